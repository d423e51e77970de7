"""`--since` / `--until`: the time formats sacct's man page lists, resolved once to epoch seconds (pure).

sacct resolves `now-7days` when it parses it; resolving it here first means sacct's selection and the report's
clipping use the very same instant (sacct then gets it as `uts<epoch>`, `sacct_time`). The semantics follow
Slurm's parse_time() for a time in the past, as sacct calls it: a date alone is its midnight, a clock time alone is
today, a month/day without a year is this year unless that month is still to come (then last year).
"""

from __future__ import annotations

import re
import time
from datetime import datetime, timedelta

FORMATS = (
    "YYYY-MM-DD[THH:MM[:SS]], MMDD[YY][-HH:MM[:SS]], MM/DD[/YY][-HH:MM[:SS]], MM.DD[.YY][-HH:MM[:SS]], "
    "HH:MM[:SS][AM|PM], today, midnight, noon, now[{+|-}count[seconds|minutes|hours|days|weeks]]"
)
UNIT_SECONDS = {"second": 1, "minute": 60, "hour": 3600, "day": 86400, "week": 604800}
NAMED_CLOCKS = {"midnight": (0, 0), "noon": (12, 0), "elevenses": (11, 0), "fika": (15, 0), "teatime": (16, 0)}

_NOW = re.compile(r"^now(?:\s*([+-])\s*(\d{1,9})\s*(seconds?|minutes?|hours?|days?|weeks?)?)?$", re.IGNORECASE)
_DATE = r"(?P<date>\d{4}-\d{1,2}-\d{1,2}|\d{4}(?:\d{2})?|\d{1,2}[./]\d{1,2}(?:[./]\d{2})?|today|tomorrow)"
_CLOCK = r"(?P<clock>\d{1,2}:\d{2}(?::\d{2})?\s*(?:am|pm)?|midnight|noon|elevenses|fika|teatime)"
_FULL = re.compile(rf"^{_DATE}?(?P<sep>[-T\s]+)?{_CLOCK}?$", re.IGNORECASE)


class WhenError(ValueError):
    """A time argument sacct would not accept (one-line message)."""


def resolve(text: str, now: float) -> float:
    """Epoch seconds of a sacct time expression, `now` being the current epoch time; WhenError when malformed."""
    value = text.strip()
    relative = _NOW.match(value)
    if relative:
        sign, count, unit = relative.groups()
        delta = int(count or 0) * UNIT_SECONDS[(unit or "second").lower().removesuffix("s")]
        return now + (-delta if sign == "-" else delta)
    if value.lower().startswith("uts") and value[3:].isdigit():  # Slurm's own epoch form
        return float(int(value[3:]))
    match = _FULL.match(value)
    if not match or not _well_formed(match):
        raise WhenError(f"{text!r} is not a time sacct accepts ({FORMATS})")
    today = datetime.fromtimestamp(now)
    try:
        year, month, day = _date(match.group("date"), today)
        hour, minute, second = _clock(match.group("clock"))
        return datetime(year, month, day, hour, minute, second).timestamp()
    except ValueError as exc:
        raise WhenError(f"{text!r}: {exc}") from None


def _well_formed(match: re.Match[str]) -> bool:
    """A date, a clock time, or both with a separator between them."""
    date, sep, clock = match.group("date"), match.group("sep"), match.group("clock")
    if date and clock:
        return bool(sep)
    return bool(date or clock) and not sep


def _date(text: str | None, today: datetime) -> tuple[int, int, int]:
    """(year, month, day): today without a date, this year (or last, for a month still to come) without a year."""
    if text is None or text.lower() == "today":
        return today.year, today.month, today.day
    if text.lower() == "tomorrow":
        later = today + timedelta(days=1)
        return later.year, later.month, later.day
    if "-" in text:
        year, month, day = (int(part) for part in text.split("-"))
        return year, month, day
    parts = re.split(r"[./]", text) if re.search(r"[./]", text) else [text[0:2], text[2:4], text[4:6]]
    month, day = int(parts[0]), int(parts[1])
    if len(parts) > 2 and parts[2]:
        return 2000 + int(parts[2]), month, day
    return (today.year - 1 if month > today.month else today.year), month, day


def _clock(text: str | None) -> tuple[int, int, int]:
    """(hour, minute, second); midnight without a clock."""
    if text is None:
        return 0, 0, 0
    named = NAMED_CLOCKS.get(text.lower())
    if named is not None:
        return named[0], named[1], 0
    match = re.match(r"(\d{1,2}):(\d{2})(?::(\d{2}))?\s*(am|pm)?$", text, re.IGNORECASE)
    assert match is not None  # _FULL matched it
    hour, minute, second = int(match[1]), int(match[2]), int(match[3] or 0)
    half = (match[4] or "").lower()
    if half and not 1 <= hour <= 12:
        raise ValueError(f"hour {hour} with {half.upper()}")
    if half == "pm" and hour != 12:
        hour += 12
    elif half == "am" and hour == 12:
        hour = 0
    if hour > 23 or minute > 59 or second > 59:
        raise ValueError(f"no such time of day {hour:02d}:{minute:02d}:{second:02d}")
    return hour, minute, second


def sacct_time(epoch: float) -> str:
    """The instant as sacct's -S/-E take it without a time zone to guess: `uts<epoch seconds>` (Slurm's parse_time)
    — a wall-clock time would be ambiguous in the hour a DST change repeats."""
    return f"uts{int(epoch)}"


def iso(epoch: float) -> str:
    """A readable local time for the report's header."""
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(epoch))
