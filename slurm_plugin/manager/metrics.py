"""The manager's counters, persisted as JSON in the manifest's state_dir (`manager-metrics.json`).

Counters only grow (orphans terminated, nodes replaced, spot interruptions, health-check failures, ...); capacity errors
are counted by `pool|AZ` from the resume worker's cool-down file (each new cool-down expiry is one more error). The
file is a cache for `elastic-slurm status` and the metrics exporter: losing it loses history, never correctness.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from slurm_plugin.powersave.capacity import CAPACITY_FILE
from slurm_plugin.powersave.state import locked, read_json, write_json

METRICS_FILE = "manager-metrics.json"
COUNTERS = (
    "orphans_terminated",
    "instances_lost",
    "nodes_replaced",
    "resume_timeouts",
    "capacity_recovered",
    "always_on_started",
    "spot_interruptions",
    "rebalance_recommendations",
    "health_check_failures",
    "ec2_impaired",
    "fleet_stopped_nodes",
    "ec2_scheduled_events",
    "stale_not_responding_cleared",
    "action_failures",
    "cycles",
)


@dataclass
class Metrics:
    """Counters plus the capacity errors by `pool|AZ` and the last cycle's summary."""

    counters: dict[str, int] = field(default_factory=dict)
    capacity_errors: dict[str, int] = field(default_factory=dict)
    capacity_seen: dict[str, float] = field(default_factory=dict)
    last_cycle: str = ""
    last_actions: int = 0

    def bump(self, name: str, by: int = 1) -> None:
        """Add to a counter."""
        self.counters[name] = self.counters.get(name, 0) + by

    def count_capacity(self, entries: Mapping[str, object]) -> None:
        """Count each new cool-down (`pool|az` → expiry) of the capacity file once."""
        for key, expiry in entries.items():
            if isinstance(expiry, int | float) and self.capacity_seen.get(key) != float(expiry):
                self.capacity_seen[key] = float(expiry)
                self.capacity_errors[key] = self.capacity_errors.get(key, 0) + 1

    def finish_cycle(self, now: datetime, actions: int) -> None:
        """Record the end of one reconcile cycle."""
        self.bump("cycles")
        self.last_cycle = now.isoformat(timespec="seconds")
        self.last_actions = actions

    def to_json(self) -> dict[str, Any]:
        """The file's content."""
        return {
            "counters": {name: self.counters.get(name, 0) for name in sorted(set(COUNTERS) | set(self.counters))},
            "capacity_errors": dict(sorted(self.capacity_errors.items())),
            "capacity_seen": dict(sorted(self.capacity_seen.items())),
            "last_cycle": self.last_cycle,
            "last_actions": self.last_actions,
        }


def _ints(value: Any) -> dict[str, int]:
    if not isinstance(value, dict):
        return {}
    return {str(k): int(v) for k, v in value.items() if isinstance(v, int | float)}


def from_json(data: Mapping[str, Any]) -> Metrics:
    """Metrics from the file's content (unknown or broken parts read as empty)."""
    seen = data.get("capacity_seen")
    return Metrics(
        counters=_ints(data.get("counters")),
        capacity_errors=_ints(data.get("capacity_errors")),
        capacity_seen={str(k): float(v) for k, v in (seen or {}).items() if isinstance(v, int | float)},
        last_cycle=str(data.get("last_cycle", "")),
        last_actions=int(data.get("last_actions", 0) or 0),
    )


def load(state_dir: str | Path) -> Metrics:
    """The persisted metrics (empty when there is no file yet)."""
    return from_json(read_json(Path(state_dir) / METRICS_FILE))


def save(state_dir: str | Path, metrics: Metrics) -> None:
    """Persist atomically."""
    directory = Path(state_dir)
    directory.mkdir(parents=True, exist_ok=True)
    write_json(directory / METRICS_FILE, metrics.to_json())


def update(state_dir: str | Path, counters: Iterable[str], now: datetime, actions: int) -> Metrics:
    """Load, add one per counter name, fold in new capacity cool-downs, finish the cycle, save; returns the result."""
    with locked(state_dir) as directory:
        metrics = load(directory)
        for name in counters:
            if name:
                metrics.bump(name)
        metrics.count_capacity(read_json(directory / CAPACITY_FILE))
        metrics.finish_cycle(now, actions)
        save(directory, metrics)
    return metrics
