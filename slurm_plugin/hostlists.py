"""Slurm hostlists ↔ node names (`cpu-c7i-[1-3],gpu-g5-7` ↔ `cpu-c7i-1 … gpu-g5-7`), built on python-hostlist.

Every entry point of the plugin (resume, suspend, resume-fail) receives a hostlist from slurmctld; render writes
compressed hostlists into slurm.conf. Bad input raises ValueError with a one-line message.
"""

from __future__ import annotations

from collections.abc import Iterable

import hostlist

# Refuse expansions that no cluster can have (a typo like `n[1-99999999]` must not eat the controller's memory).
MAX_EXPANDED = 200_000
_FORBIDDEN = set(" \t\r\n\"'")


def expand(text: str) -> list[str]:
    """Expand a Slurm hostlist expression into node names (order kept, duplicates dropped).

    Raises ValueError (one line) on an empty or malformed expression.
    """
    value = text.strip()
    if not value:
        raise ValueError("empty hostlist")
    if any(ch in _FORBIDDEN for ch in value):
        raise ValueError(f"bad hostlist {_show(value)}: contains whitespace or quotes")
    try:
        names: list[str] = hostlist.expand_hostlist(value)
    except hostlist.BadHostlist as exc:
        raise ValueError(f"bad hostlist {_show(value)}: {exc}") from None
    if not names:
        raise ValueError(f"bad hostlist {_show(value)}: names no node")
    if len(names) > MAX_EXPANDED:
        raise ValueError(f"bad hostlist {_show(value)}: expands to more than {MAX_EXPANDED} names")
    return names


def compress(names: Iterable[str]) -> str:
    """Compress node names into one sorted Slurm hostlist expression (`a-[1-3,5]`); empty input gives ''."""
    unique = sorted(set(names))
    if not unique:
        return ""
    result: str = hostlist.collect_hostlist(unique)
    return result


def _show(value: str, limit: int = 80) -> str:
    """Quote a (possibly huge) expression for an error message, shortened to stay one readable line."""
    shown = value if len(value) <= limit else value[: limit - 3] + "..."
    return repr(shown)
