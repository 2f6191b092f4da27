"""How profile files are named, in one place: what `profile-cmd` and the simulator write and what
discovery reads back.

`<app>.p<ranks>[.<name><value>...].r<rep>.mpi<rank>.<suffix>`: the app is everything before the first
dot; every later token is letters followed by a number, so `rate0.1` is the parameter `rate`, never the
repetition `r`. Tokens map to parameter names through aliases (`p` = ranks, `r` = rep, `mpi` = rank by
default; `parse_aliases(["b=batch"])` adds more).
"""

from __future__ import annotations

import re

from extradeep.errors import InputError
from extradeep.io.formats import strip_suffix

RANKS_TOKEN, REP_TOKEN, RANK_TOKEN = "p", "r", "mpi"
# Tokens map to names; the reserved names "rank" and "rep" say which token is which.
DEFAULT_ALIASES = {RANKS_TOKEN: "ranks", REP_TOKEN: "rep", RANK_TOKEN: "rank"}
# Columns of discovery's run table: no parameter may take these names.
RESERVED = ("path", "app", "rank", "rep", "size", "mtime_ns", "sha256")
# File-name tokens the reader already gives a meaning (p=ranks, r=rep, mpi=rank).
RESERVED_NAMES = (*DEFAULT_ALIASES, *DEFAULT_ALIASES.values())

NUMBER_TEXT = r"\d+(?:\.\d+)?(?:[eE]-?\d+)?"
NAME_TEXT = r"[A-Za-z][A-Za-z_]*"
NUMBER = re.compile(NUMBER_TEXT + "$")  # a parameter value as file names carry it
NAME = re.compile(NAME_TEXT + "$")  # a parameter name or token
APP = re.compile(r"[A-Za-z0-9_-]+$")  # an app name (no dots: they separate the tokens)
# One parameter token after the app name: letters (underscores allowed) then a number.
_TOKEN = re.compile(rf"\.(?P<name>{NAME_TEXT})(?P<value>{NUMBER_TEXT})")


def run_stem(app: str, tokens: dict, rep) -> str:
    """`app.<token><value>....r<rep>`: the name of one run's files before the rank
    (`tokens`: file-name token -> value, ranks first, e.g. {"p": 4, "lr": 0.5})."""
    return ".".join([app, *(f"{token}{format_value(value)}" for token, value in tokens.items()), f"{REP_TOKEN}{rep}"])


def rank_name(stem: str, rank, suffix: str = ".sqlite") -> str:
    """The file of one rank of the run `stem` (`rank` may be a placeholder such as nsys's `%q{RANK}`)."""
    return f"{stem}.{RANK_TOKEN}{rank}{suffix}"


def format_value(value) -> str:
    """A parameter value as file names carry it: whole numbers without a decimal point, text as given."""
    if isinstance(value, str):
        return value
    return str(int(value)) if float(value).is_integer() else str(value)


def check_name_parts(app: str, params, prefixes: dict) -> None:
    """Refuse (InputError, one line) an app, parameter names or file-name prefixes whose names would not
    parse back: `prefixes` maps each parameter to its token."""
    if not APP.match(app):
        raise InputError(
            None, f"app {app!r}: use letters, digits, '_' or '-' (no dots: they separate file-name tokens)"
        )
    for name in params:
        if not NAME.match(name) or name in RESERVED:
            raise InputError(None, f"parameter {name!r}: use letters and '_' only, not {', '.join(RESERVED)}")
    for name, prefix in prefixes.items():
        clash = DEFAULT_ALIASES.get(prefix, name) != name
        if not NAME.match(prefix) or clash:
            raise InputError(
                None,
                f"prefix {name}={prefix}: use letters and '_', not {REP_TOKEN} or {RANK_TOKEN} (repetition and rank "
                f"tokens), and {RANKS_TOKEN} only for ranks",
            )
    taken = list(prefixes.values())
    if len(set(taken)) < len(taken):
        raise InputError(
            None,
            f"two parameters share a file-name prefix ({', '.join(f'{n}={p}' for n, p in prefixes.items())}); "
            "give --prefix NAME=LETTERS",
        )


def parse_aliases(items, base: dict | None = None) -> dict:
    """`["b=batch", "n=ranks"]` -> alias dict on top of `base` (default: p=ranks, r=rep, mpi=rank)."""
    aliases = dict(DEFAULT_ALIASES if base is None else base)
    for item in items or ():
        token, sep, name = str(item).partition("=")
        if not sep or not token.strip() or not name.strip():
            raise InputError(None, f"alias {item!r} is not TOKEN=NAME (e.g. p=ranks)")
        aliases[token.strip()] = name.strip()
    return aliases


def parse_name(name: str, aliases: dict | None = None) -> dict:
    """Parse `app.p4.lr0.5.r2.mpi3.sqlite` -> {"app": "app", "ranks": 4, "lr": 0.5, "rep": 2, "rank": 3}.

    The app is everything before the first dot; every later token must be letters followed by a
    number, so `rate0.1` is the parameter `rate`, never the repetition `r`.
    """
    aliases = DEFAULT_ALIASES if aliases is None else aliases
    stem = strip_suffix(name)
    app, dot, rest = stem.partition(".")
    rest = dot + rest
    parsed: dict = {"app": app}
    pos = 0
    for match in _TOKEN.finditer(rest):
        if match.start() != pos:
            break
        key = aliases.get(match["name"], match["name"])
        if key in parsed:
            raise InputError(name, f"parameter {key!r} appears twice in the file name")
        parsed[key] = parse_number(match["value"])
        pos = match.end()
    if pos != len(rest) or not app:
        raise InputError(
            name,
            "file name does not follow the convention app.p4.r1.mpi0.sqlite "
            f"(cannot read {rest[pos:]!r}); give a --manifest for other names",
        )
    return check_rank_rep(parsed, name)


def parse_number(text: str) -> int | float:
    value = float(text)
    return int(value) if value.is_integer() and re.fullmatch(r"\d+", text) else value


def check_rank_rep(row: dict, source) -> dict:
    for key, default in (("rank", 0), ("rep", 1)):
        value = row.get(key, default)
        try:
            as_int = int(float(value))
        except (TypeError, ValueError):
            raise InputError(source, f"{key} must be a whole number, got {value!r}") from None
        if as_int != float(value) or as_int < 0:
            raise InputError(source, f"{key} must be a whole number >= 0, got {value!r}")
        row[key] = as_int
    return row
