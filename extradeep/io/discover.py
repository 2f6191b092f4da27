"""Find profiles (Nsight Systems exports, Kineto traces) and learn each one's configuration point, rank and repetition.

Parameters come from file names in the Extra-Deep convention (`app.p4.b32.r2.mpi3.sqlite`) or from an
explicit manifest (CSV or TOML). The result is a runs table, one row per export:
`path, app, <params...>, rank, rep, size, mtime_ns` (+ `sha256` once hashed). Checks that need the
whole batch (missing rank files, duplicate content, mixed apps) live here too.
"""

from __future__ import annotations

import csv
import hashlib
import io
import sys
from pathlib import Path

import pandas as pd

from extradeep.columns import PATH, RANK
from extradeep.columns import STEP_SUM_COLUMNS as COLUMNS_OF_STEP_SUMS
from extradeep.errors import InputError, read_problem, require_regular_file, special_file_problem
from extradeep.io.config import CONFIG_NAME
from extradeep.io.formats import KINETO, NSYS, format_by_name
from extradeep.io.kineto.load import looks_like_trace
from extradeep.io.naming import (  # noqa: F401 (DEFAULT_ALIASES, parse_aliases, parse_name: discovery's API)
    DEFAULT_ALIASES,
    NUMBER,
    RESERVED,
    check_rank_rep,
    parse_aliases,
    parse_name,
    parse_number,
)

# Columns of the per-step tables that parameters are joined to: no parameter may take these names.
STEP_SUM_COLUMNS = ("file", *COLUMNS_OF_STEP_SUMS)
EXPORT_SUFFIX = ".sqlite"


def find_exports(paths, notes: list | None = None) -> tuple[list[Path], list[str]]:
    """Expand files and directories (recursively) into export paths, sorted; plus the problems met.
    A subfolder that is a study of its own is left out with a line in ``notes`` where given (it is
    how such a folder is meant to be read, not a problem), else among the problems."""
    found, problems = [], []
    notes = problems if notes is None else notes
    for given in [paths] if isinstance(paths, (str, Path)) else paths:
        path = Path(given)
        if path.is_dir():
            exports = sorted(p for p in path.rglob("*") if p.is_file() and _is_profile(p))
            exports, studies = _outside_studies(path, exports)
            notes += [
                f"{study}: left out, a separate study (it has its own {CONFIG_NAME}); give that folder on its own"
                for study in studies
            ]
            reports = [p for p in path.rglob("*.nsys-rep") if not p.with_suffix(EXPORT_SUFFIX).exists()]
            if reports:
                problems.append(
                    f"{path}: {len(reports)} .nsys-rep file(s) have no .sqlite export beside them "
                    "(run: nsys export --type sqlite FILE.nsys-rep)"
                )
            if not exports:
                problems.append(
                    f"{path}: no profiles (*{EXPORT_SUFFIX} exports or *.json[.gz] Kineto traces) found in this directory"
                )
            found.extend(exports)
        elif path.is_file():
            found.append(path)
        else:
            problems.append(f"{path}: {special_file_problem(path) or 'no such file or directory'}")
    unique = list(dict.fromkeys(p.resolve() for p in found))
    return unique, problems


def _outside_studies(root: Path, exports: list[Path]) -> tuple[list[Path], list[Path]]:
    """A subfolder with its own extradeep.toml is a study of its own (other settings, often another
    application): its files are not read as part of `root`. Returns (kept files, such subfolders)."""
    studies = sorted({c.parent for c in root.rglob(CONFIG_NAME) if c.parent != root})
    if not studies:
        return exports, []
    inside = [p for p in exports if any(s in p.parents for s in studies)]
    return [p for p in exports if p not in set(inside)], [s for s in studies if any(s in p.parents for p in inside)]


# the names torch.profiler.tensorboard_trace_handler gives its traces (gzipped with use_gzip)
TRACE_NAMES = (".pt.trace.json", ".pt.trace.json.gz")


def _is_profile(path: Path) -> bool:
    """In a folder: nsys exports by name, Kineto traces by name and a look at their first bytes
    (folders also hold truth.json, --json outputs and other JSON that are no traces)."""
    fmt = format_by_name(path)
    if fmt == KINETO and path.name.lower().endswith(TRACE_NAMES):
        return True  # PyTorch's own name: damaged, empty or foreign, the reader says so in one line
    return fmt == NSYS or (fmt == KINETO and looks_like_trace(path))


def one_format_per_run(runs: pd.DataFrame) -> tuple[pd.DataFrame, list[str]]:
    """A run (point and repetition) profiled in both formats counts once: its nsys exports are used
    (they hold more: OS runtime calls, NVTX payloads), its Kineto traces are skipped, one line per run."""
    if runs.empty:
        return runs, []
    fmt = runs[PATH].map(format_by_name).fillna(NSYS)
    keys = param_columns(runs) + ["rep"]
    both = fmt.groupby([runs[k] for k in keys], dropna=False).transform("nunique") > 1
    drop = both & (fmt == KINETO)
    problems = []
    for _, group in runs[drop].groupby(keys, dropna=False, sort=True):
        label = _point_label(group.iloc[0], keys)
        problems.append(
            f"{label}: profiled as nsys exports and as Kineto traces; using the nsys exports, "
            f"skipping {len(group)} Kineto trace(s)"
        )
    return runs[~drop].reset_index(drop=True), problems


def runs_from_names(paths, aliases: dict | None = None, notes: list | None = None) -> tuple[pd.DataFrame, list[str]]:
    """Runs table from Extra-Deep file names; unparsable names become problem lines (``notes``: as
    :func:`find_exports`)."""
    exports, problems = find_exports(paths, notes)
    rows = []
    for path in exports:
        try:
            rows.append({"path": str(path), **parse_name(path.name, aliases)})
        except InputError as exc:
            problems.append(f"{path}: {exc.problem}")
    return _with_stat(rows), problems


def read_manifest(manifest, aliases: dict | None = None) -> pd.DataFrame:
    """Runs table of the usable rows of a CSV or TOML manifest (see `manifest_runs`)."""
    return manifest_runs(manifest, aliases)[0]


def manifest_runs(manifest, aliases: dict | None = None) -> tuple[pd.DataFrame, list[str]]:
    """(runs table, problems) from a CSV or TOML manifest (path, parameter values, rank, rep; paths
    relative to it). A bad row is skipped with one line naming the manifest, its row and the
    problem; InputError only when no row is usable."""
    manifest = Path(manifest)
    if not manifest.is_file():
        raise InputError(manifest, special_file_problem(manifest) or "manifest not found")
    if manifest.suffix.lower() == ".toml":
        records, unit, first = _toml_records(manifest), "run", 1
    else:
        records, unit, first = _csv_records(manifest), "line", 2  # line 1 is the header
    if not records:
        raise InputError(manifest, "manifest lists no runs")
    aliases = DEFAULT_ALIASES if aliases is None else aliases
    rows, problems = [], []
    for number, record in enumerate(records, start=first):
        where = f"{manifest} ({unit} {number})"
        try:
            rows.append(_manifest_row(manifest, record, aliases, where))
        except InputError as exc:
            problems.append(f"{where}: {exc.problem}; skipped")
    if not rows:
        error = InputError(manifest, f"no usable run among {len(records)}; first problem: {problems[0]}")
        error.problems = problems
        raise error
    return _with_stat(rows), problems


def _manifest_row(manifest: Path, record: dict, aliases: dict, where: str) -> dict:
    if None in record:  # csv.DictReader puts surplus cells under the key None
        raise InputError(where, f"more cells than the header has columns: {record[None]!r}")
    record = {aliases.get(str(k).strip(), str(k).strip()): v for k, v in record.items()}
    if not record.get("path"):
        raise InputError(where, "every run needs a path")
    text = str(record.pop("path")).strip()
    if "\0" in text:
        raise InputError(where, f"the path {text!r} holds a NUL byte")
    path = Path(text)
    row = {"path": str((manifest.parent / path).resolve()), "app": str(record.pop("app", "") or "")}
    for key, value in record.items():
        row[key] = _manifest_value(where, key, value)
    return check_rank_rep(row, where)


def read_toml(path) -> dict:
    """Parse a TOML file (tomllib on 3.11+, tomli on 3.10: a dependency there); errors are one line."""
    path = Path(path)
    require_regular_file(path)
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover - Python 3.10 only
        try:
            import tomli as tomllib
        except ModuleNotFoundError:
            raise InputError(path, "TOML files need Python 3.11 or the tomli package; use a CSV manifest") from None
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise InputError(path, f"cannot read ({exc.strerror})") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise InputError(path, f"not valid TOML: {exc}") from None


def _csv_records(manifest: Path) -> list[dict]:
    try:
        with open(manifest, newline="", encoding="utf-8") as fh:
            text = fh.read()
        if "\0" in text:  # Python 3.10's csv refuses the line, 3.11+ reads it: the same words on both
            line = text.count("\n", 0, text.index("\0")) + 1
            raise InputError(f"{manifest} (line {line})", "holds a NUL byte; a manifest is text")
        return list(csv.DictReader(io.StringIO(text, newline="")))
    except UnicodeDecodeError as exc:
        raise InputError(manifest, f"not a CSV manifest: {read_problem(exc)}") from None
    except (OSError, csv.Error) as exc:
        raise InputError(manifest, f"cannot read the CSV manifest ({exc})") from None


def _toml_records(manifest: Path) -> list[dict]:
    records = read_toml(manifest)
    records = records.get("run", records.get("runs"))
    if not isinstance(records, list):
        raise InputError(manifest, "a TOML manifest lists runs as [[run]] tables with path = ...")
    # `params = {ranks = 4}` sub-tables are flattened next to path, rank and rep.
    return [{**{k: v for k, v in r.items() if k != "params"}, **r.get("params", {})} for r in records]


def _manifest_value(where, key, value):
    if value is None or (isinstance(value, str) and not value.strip()):
        raise InputError(where, f"no value for {key!r}")
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return value
    text = str(value).strip()
    try:
        return parse_number(text) if NUMBER.fullmatch(text) else float(text)
    except ValueError:
        raise InputError(where, f"value of {key!r} is not a number: {value!r}") from None


def _with_stat(rows: list[dict]) -> pd.DataFrame:
    runs = pd.DataFrame(rows, columns=None if rows else ["path", "app", "rank", "rep"])
    sizes, mtimes = [], []
    for path in runs[PATH]:
        try:
            stat = Path(path).stat()
            sizes.append(stat.st_size)
            mtimes.append(stat.st_mtime_ns)
        except OSError:
            sizes.append(-1)
            mtimes.append(-1)
    runs["size"] = pd.Series(sizes, index=runs.index, dtype="int64")
    runs["mtime_ns"] = pd.Series(mtimes, index=runs.index, dtype="int64")
    return runs


def param_columns(runs: pd.DataFrame) -> list[str]:
    """The parameter columns of a runs table (everything that is not bookkeeping)."""
    return [c for c in runs.columns if c not in RESERVED]


def file_sha256(path, chunk: int = 1 << 20) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        while block := fh.read(chunk):
            digest.update(block)
    return digest.hexdigest()


def drop_non_exports(runs: pd.DataFrame) -> tuple[pd.DataFrame, list[str]]:
    """When the files look like several applications, first skip those that are no export at all (not
    SQLite, empty, truncated, unreadable): one stray bad file must not block the rest as "another
    application". (A batch of one application leaves this to the reader, without opening files here.)"""
    if runs["app"].nunique() <= 1:
        return runs, []
    from extradeep.io.formats import profile_format
    from extradeep.io.sqlite import check_header

    keep, problems = [], []
    for path in runs[PATH]:
        problem = None
        try:
            if profile_format(path) == NSYS:  # a Kineto trace is checked by its own reader
                check_header(Path(path))
        except InputError as exc:
            problem = str(exc)
        except OSError as exc:
            problem = f"{path}: cannot read ({exc.strerror})"
        keep.append(problem is None)
        problems += [problem] if problem else []
    return runs[keep].reset_index(drop=True), problems


def check_single_app(runs: pd.DataFrame) -> None:
    """Refuse a batch that mixes applications: their measurements must never be aggregated together."""
    counts = runs["app"].value_counts()
    if len(counts) > 1:
        listed = ", ".join(f"{app!r} ({n} files)" for app, n in counts.items())
        raise InputError(
            None,
            f"the inputs mix applications: {listed}; give one application's exports at a time "
            "(or name the runs in a manifest file)",
        )


def drop_duplicates(runs: pd.DataFrame) -> tuple[pd.DataFrame, list[str]]:
    """Keep the first of several files with the same sha256; one problem line per dropped copy."""
    dup = runs["sha256"].duplicated(keep="first")
    first = runs.drop_duplicates("sha256").set_index("sha256")[PATH]
    problems = [f"{row.path}: same content as {first[row.sha256]}; skipped" for row in runs[dup].itertuples()]
    return runs[~dup].reset_index(drop=True), problems


def drop_conflicts(runs: pd.DataFrame) -> tuple[pd.DataFrame, list[str]]:
    """Two different files claiming the same point, repetition and rank: keep the first, report the rest."""
    keys = param_columns(runs) + ["rep", "rank"]
    dup = runs.duplicated(keys, keep="first")
    problems = [
        f"{row[PATH]}: same point, repetition and rank as another file ({_point_label(row, keys)}); skipped"
        for _, row in runs[dup].iterrows()
    ]
    return runs[~dup].reset_index(drop=True), problems


def missing_ranks(runs: pd.DataFrame, ranks_param: str = "ranks") -> list[str]:
    """One line per (point, repetition) with fewer rank files than the ranks parameter says."""
    if ranks_param not in runs.columns or runs.empty:
        return []
    keys = param_columns(runs) + ["rep"]
    problems = []
    for _, group in runs.groupby(keys, dropna=False, sort=True):
        expected = int(group[ranks_param].iloc[0])
        have = set(group[RANK])
        if len(have) < expected:
            absent = sorted(set(range(expected)) - have)
            shown = ", ".join(f"mpi{r}" for r in absent[:8]) + (" ..." if len(absent) > 8 else "")
            label = _point_label(group.iloc[0], keys)
            problems.append(f"{label}: {len(have)} of {expected} rank files (missing {shown}); using the ranks present")
    return problems


def _point_label(row, keys) -> str:
    """`app ranks=4 rep=1`; without an app name (manifests may leave it out) just the values."""
    return " ".join([str(row["app"])] * bool(row["app"]) + [f"{k}={_fmt(row[k])}" for k in keys])


def _fmt(value) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


def discover(paths=None, aliases=None, manifest=None, ranks_param: str = "ranks") -> tuple[pd.DataFrame, list[str]]:
    """Runs table with sha256 plus problem lines, for library users (ingest hashes in its workers).

    Raises InputError when nothing usable is found or the batch mixes applications.
    """
    aliases = parse_aliases(aliases) if isinstance(aliases, (list, tuple)) else aliases
    if manifest is not None:
        runs, problems = manifest_runs(manifest, aliases)
    else:
        runs, problems = runs_from_names(paths, aliases)
    runs, problems = validate_runs(runs, problems)
    runs, unreadable = _hashed(runs)
    runs, dups = drop_duplicates(runs)
    return runs, problems + unreadable + dups + missing_ranks(runs, ranks_param)


def _hashed(runs: pd.DataFrame) -> tuple[pd.DataFrame, list[str]]:
    """The runs with their sha256; a file the OS will not let us read is skipped with one line."""
    from extradeep.io.sqlite import unreadable

    digests, problems = [], []
    for path in runs[PATH]:
        try:
            digests.append(file_sha256(path))
        except OSError as exc:
            digests.append(None)
            problems.append(f"{path}: {unreadable(exc)}; skipped")
    runs = runs.assign(sha256=digests)
    runs = runs[runs["sha256"].notna()].reset_index(drop=True)
    if runs.empty:
        raise InputError(None, "no usable exports found: " + "; ".join(problems))
    return runs, problems


def validate_runs(runs: pd.DataFrame, problems: list[str]) -> tuple[pd.DataFrame, list[str]]:
    """Drop unreadable paths and conflicting rows, refuse mixed apps; raise when nothing is left."""
    problems = list(problems)
    missing = runs["size"] < 0
    problems += [f"{p}: file not found" for p in runs.loc[missing, "path"]]
    runs = runs[~missing].reset_index(drop=True)
    runs, unusable = drop_non_exports(runs)
    problems += unusable
    if runs.empty:
        raise InputError(None, "no usable exports found" + (": " + "; ".join(problems) if problems else ""))
    check_single_app(runs)
    params = param_columns(runs)
    clash = sorted(set(params) & set(STEP_SUM_COLUMNS))
    if clash:
        raise InputError(
            None,
            f"parameter name(s) {', '.join(clash)} are reserved; rename them, e.g. --alias {clash[0]}=n_{clash[0]}",
        )
    incomplete = runs[params].isna().any(axis=1) if params else pd.Series(False, index=runs.index)
    for _, row in runs[incomplete].iterrows():
        absent = ", ".join(k for k in params if pd.isna(row[k]))
        problems.append(f"{row[PATH]}: has no value for parameter(s) {absent} that other files have; skipped")
    runs = runs[~incomplete].reset_index(drop=True)
    runs, twice = one_format_per_run(runs)
    runs, conflicts = drop_conflicts(runs)
    return runs, problems + twice + conflicts
