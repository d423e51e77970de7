"""Capacity cool-down: after a capacity error emptied a pool's AZ, skip that (pool, AZ) for a while.

State lives in `{state_dir}/capacity.json` as {"pool|az": expiry epoch seconds}; `active` is pure.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path

from slurm_plugin.powersave.state import locked, read_json, write_json

CAPACITY_FILE = "capacity.json"


def active(entries: Mapping[str, object], now: float) -> list[tuple[str, str]]:
    """(pool key, AZ) pairs whose cool-down has not expired at `now`."""
    result = []
    for key, expiry in entries.items():
        pool, sep, az = key.partition("|")
        if sep and isinstance(expiry, int | float) and expiry > now:
            result.append((pool, az))
    return result


def load_cooling(state_dir: str | Path, now: float) -> list[tuple[str, str]]:
    """Active cool-downs from the state file."""
    return active(read_json(Path(state_dir) / CAPACITY_FILE), now)


def add_cooling(state_dir: str | Path, pairs: Iterable[tuple[str, str]], now: float, seconds: int) -> None:
    """Start (or extend) cool-downs for (pool key, AZ) pairs; expired entries are dropped."""
    wanted = list(pairs)
    if not wanted or seconds <= 0:
        return
    with locked(state_dir) as directory:
        path = directory / CAPACITY_FILE
        entries = {k: v for k, v in read_json(path).items() if isinstance(v, int | float) and v > now}
        for pool, az in wanted:
            entries[f"{pool}|{az}"] = now + seconds
        write_json(path, entries)


def pool_available_at(state_dir: str | Path, pool: str, azs: Iterable[str], now: float) -> float | None:
    """When the pool can launch again: None if some AZ of `azs` is not cooling, else the earliest expiry."""
    entries = read_json(Path(state_dir) / CAPACITY_FILE)
    expiries = []
    for az in azs:
        expiry = entries.get(f"{pool}|{az}")
        if not isinstance(expiry, int | float) or expiry <= now:
            return None
        expiries.append(float(expiry))
    return min(expiries) if expiries else None
