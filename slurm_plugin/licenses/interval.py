"""How long the license sync may go without running: the longest gap between runs of its timer, from the systemd
OnCalendar expressions of `licenses[].sync_schedule` (slurm-license-sync.timer runs at their union).

Understood: the shorthands `minutely`, `hourly`, `daily`, and `[*-*-*] HOUR:MINUTE[:SECOND]` where each field is `*`,
a number, `A..B`, `START/REPEAT` (also `*/REPEAT`, `A..B/REPEAT`) or a comma list of those — every day the same
times. Anything else (weekdays, dates, `weekly`, time zones) is not understood and left out; since more run times
only shorten the gaps, the gap of the understood ones bounds the union's from above.
"""

from __future__ import annotations

from collections.abc import Iterable
from itertools import pairwise, product

DAY_S = 86_400
SHORTHANDS = {"minutely": "*:*:00", "hourly": "*:00:00", "daily": "00:00:00"}
EVERY_DAY = ("*-*-*", "*-*")


def _field(text: str, top: int) -> set[int] | None:
    """Values 0..top matched by one time field, or None when not understood."""
    values: set[int] = set()
    for item in text.split(","):
        base, _, repeat = item.partition("/")
        if base == "*":
            low, high = 0, top
        elif ".." in base:
            first, _, last = base.partition("..")
            if not (first.isdigit() and last.isdigit()):
                return None
            low, high = int(first), int(last)
        elif base.isdigit():
            low = int(base)
            high = top if repeat else low
        else:
            return None
        if repeat and not (repeat.isdigit() and int(repeat) > 0):
            return None
        if not 0 <= low <= high <= top:
            return None
        values.update(range(low, high + 1, int(repeat) if repeat else 1))
    return values


def run_times(expression: str) -> set[int] | None:
    """Seconds of the day at which `expression` runs (the same every day), or None when not understood."""
    tokens = SHORTHANDS.get(expression.strip(), expression.strip()).split()
    if len(tokens) == 2 and tokens[0] in EVERY_DAY:
        tokens = tokens[1:]
    if len(tokens) != 1:
        return None
    parts = tokens[0].split(":")
    if len(parts) == 2:
        parts.append("00")
    if len(parts) != 3:
        return None
    fields = [_field(text, top) for text, top in zip(parts, (23, 59, 59), strict=True)]
    if any(f is None for f in fields):
        return None
    hours, minutes, seconds = (f or set() for f in fields)
    return {h * 3600 + m * 60 + s for h, m, s in product(hours, minutes, seconds)}


def longest_gap_seconds(expressions: Iterable[str]) -> int | None:
    """The longest time between two consecutive runs of the union of `expressions` (the understood ones), or None
    when none is understood."""
    times: set[int] = set()
    understood = False
    for expression in expressions:
        found = run_times(expression)
        if found is not None:
            understood = True
            times |= found
    if not understood or not times:
        return None
    ordered = sorted(times)
    gaps = [b - a for a, b in pairwise(ordered)]
    gaps.append(ordered[0] + DAY_S - ordered[-1])
    return max(gaps)
