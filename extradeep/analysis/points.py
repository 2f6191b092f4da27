"""Parameter points the user asks about (lists "16,32,64", ranges "2:64:2", fixed values) and how
points and durations are written for people."""

from __future__ import annotations

import numpy as np
import pandas as pd

from extradeep.errors import InputError

MAX_POINTS = 100_000


def parse_values(text: str, option: str = "--predict", minimum: float | None = None) -> list[float]:
    """``"16,32,64"`` -> [16, 32, 64]; ``"2:64:2"`` (start:stop:step, stop included) -> 2, 4, ..., 64.
    Values must be positive, or at least ``minimum`` where given (a ZeRO stage may be 0)."""
    text = (text or "").strip()
    if not text:
        raise InputError(option, "is empty")
    values: list[float] = []
    for part in text.split(","):
        part = part.strip()
        if ":" in part:
            values.extend(_parse_range(part, option, minimum))
        else:
            values.append(_number(part, option, minimum))
    if len(values) > MAX_POINTS:
        raise InputError(option, f"asks for {len(values)} points; the limit is {MAX_POINTS}")
    return sorted(set(values))


def _parse_range(part: str, option: str, minimum: float | None = None) -> list[float]:
    pieces = part.split(":")
    if len(pieces) not in (2, 3):
        raise InputError(option, f"{part!r} is not a range start:stop[:step]")
    start, stop = _number(pieces[0], option, minimum), _number(pieces[1], option, minimum)
    step = _number(pieces[2], option) if len(pieces) == 3 else 1.0
    if step <= 0 or stop < start:
        raise InputError(option, f"{part!r} needs start <= stop and a positive step")
    return value_range(start, stop, step, option)


def value_range(start: float, stop: float, step: float, option: str = "range") -> list[float]:
    """start, start + step, ..., up to stop (included), at most MAX_POINTS values."""
    count = int(np.floor((stop - start) / step + 1e-9)) + 1
    if count > MAX_POINTS:
        raise InputError(option, f"{start:g}:{stop:g}:{step:g} has {count} points; the limit is {MAX_POINTS}")
    return [start + i * step for i in range(count)]


def _number(text: str, option: str, minimum: float | None = None) -> float:
    try:
        value = float(text)
    except ValueError:
        raise InputError(option, f"{text!r} is not a number") from None
    if not np.isfinite(value) or (value <= 0 if minimum is None else value < minimum):
        need = "a positive number" if minimum is None else f"at least {minimum:g}"
        raise InputError(option, f"{text!r} must be {need}")
    return value


def parse_fixed(items: list[str] | None, params: list[str]) -> dict[str, float]:
    """``["batch=64"]`` -> {"batch": 64.0}; only known parameters."""
    fixed: dict[str, float] = {}
    for item in items or []:
        name, sep, value = item.partition("=")
        name = name.strip()
        if not sep or name not in params:
            raise InputError("--at", f"{item!r} must be PARAM=VALUE with PARAM one of {', '.join(params)}")
        fixed[name] = _number(value, "--at")
    return fixed


def point_grid(values: list[float], params: list[str], along: str, fixed: dict[str, float]) -> pd.DataFrame:
    """Points varying ``along`` over ``values`` with every other parameter held at ``fixed``."""
    others = [p for p in params if p != along]
    missing = [p for p in others if p not in fixed]
    if missing:
        raise InputError("--at", f"give a value for {', '.join(missing)} (e.g. --at {missing[0]}=64)")
    grid = pd.DataFrame({along: np.asarray(values, dtype=float)})
    for p in others:
        grid[p] = float(fixed[p])
    return grid[params]


def format_point(point, params: list[str]) -> str:
    """``ranks=16, batch=64`` with integral values printed without a decimal point."""
    return ", ".join(f"{p}={_fmt(point[p])}" for p in params)


def _fmt(value) -> str:
    value = float(value)
    return str(int(value)) if value.is_integer() else f"{value:g}"


def format_seconds(seconds: float) -> str:
    """Readable duration: 45 ns, 850 us, 12.3 ms, 42.0 s, 12.5 min, 3.20 h, 2.10 d."""
    seconds = float(seconds)
    if not np.isfinite(seconds):
        return "n/a"
    size = abs(seconds)
    for limit, scale, unit in (
        (1e-6, 1e9, "ns"),
        (1e-3, 1e6, "us"),
        (1.0, 1e3, "ms"),
        (120.0, 1.0, "s"),
        (7200.0, 1 / 60, "min"),
        (172800.0, 1 / 3600, "h"),
    ):
        if size < limit:
            return f"{seconds * scale:.3g} {unit}" if size else "0 s"
    return f"{seconds / 86400:.3g} d"


_DURATION_UNITS = {"s": 1.0, "sec": 1.0, "m": 60.0, "min": 60.0, "h": 3600.0, "hr": 3600.0, "d": 86400.0}


def parse_duration(text: str, option: str = "--max-time") -> float:
    """``"3600"``, ``"90s"``, ``"45min"``, ``"10h"``, ``"2d"`` -> seconds."""
    text = str(text).strip().lower()
    number = text.rstrip("abcdefghijklmnopqrstuvwxyz").strip()
    unit = text[len(number) :].strip() or "s"
    if unit not in _DURATION_UNITS:
        raise InputError(option, f"{text!r}: unknown unit {unit!r} (use s, min, h or d)")
    try:
        return _number(number, option) * _DURATION_UNITS[unit]
    except InputError:
        raise InputError(option, f"{text!r} must be a positive duration, like 90s, 45min, 10h or 2d") from None
