"""What the exporter reads from the plugin: the event log (folded into counters, histograms and live instances as it
grows) and the small state files (capacity cool-downs, protected pools, the manager's counters, license sync).

`EventTotals.fold` is pure: tests feed it records. `PluginReader` tails the log (slurm_plugin/telemetry/events.py)
once per scrape — only the lines appended since the last scrape are read, so a scrape costs the same at 10 or 10,000
nodes. Counters restart with the exporter from what the log still holds (Prometheus' rate() handles the reset).
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from slurm_plugin.licenses.cli import STATE_FILE as LICENSE_STATE_FILE
from slurm_plugin.manager import metrics as manager_metrics
from slurm_plugin.manifest import Manifest
from slurm_plugin.powersave import capacity, protection
from slurm_plugin.powersave.state import read_json
from slurm_plugin.telemetry import events

# Seconds: a launch is a CreateFleet call plus address lookups (seconds) up to failover through every location
# (minutes); a job's wait runs from seconds (warm node) to hours (capacity). Buckets cover both ends.
LAUNCH_BUCKETS = (1.0, 2.0, 5.0, 10.0, 20.0, 30.0, 60.0, 120.0, 300.0, 600.0)
WAIT_BUCKETS = (1.0, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1800.0, 3600.0, 14400.0)
Labels = tuple[str, ...]


@dataclass
class Histogram:
    """Cumulative bucket counts per label tuple (what prometheus_client's HistogramMetricFamily takes)."""

    bounds: tuple[float, ...]
    buckets: dict[Labels, list[int]] = field(default_factory=dict)
    sums: dict[Labels, float] = field(default_factory=dict)

    def observe(self, labels: Labels, value: float) -> None:
        """Count one value."""
        counts = self.buckets.setdefault(labels, [0] * (len(self.bounds) + 1))
        for index, bound in enumerate((*self.bounds, float("inf"))):
            if value <= bound:
                counts[index] += 1
        self.sums[labels] = self.sums.get(labels, 0.0) + value


def _text(record: Mapping[str, Any], key: str) -> str:
    return str(record.get(key, ""))


def _bump(table: dict[Labels, float], labels: Labels, by: float = 1.0) -> None:
    table[labels] = table.get(labels, 0.0) + by


@dataclass
class EventTotals:
    """Everything the event log adds up to."""

    launch_calls: dict[Labels, float] = field(default_factory=dict)  # (pool, region, market)
    launched: dict[Labels, float] = field(default_factory=dict)  # (pool, az, region, market)
    terminated: dict[Labels, float] = field(default_factory=dict)  # (pool, az, region, market, reason)
    capacity_errors: dict[Labels, float] = field(default_factory=dict)  # (pool, az, code)
    throttled: dict[Labels, float] = field(default_factory=dict)  # (api, region)
    boot_failures: dict[Labels, float] = field(default_factory=dict)  # (pool,)
    launch_seconds: Histogram = field(default_factory=lambda: Histogram(LAUNCH_BUCKETS))  # (pool,)
    live: dict[str, Labels] = field(default_factory=dict)  # instance id -> (pool, az, region, market)
    _node_instance: dict[str, str] = field(default_factory=dict)  # node -> its latest instance id

    def fold(self, records: Iterable[Mapping[str, Any]]) -> None:
        """Add records (in log order)."""
        for r in records:
            kind = r["event"]
            if kind == "launch_call":
                _bump(self.launch_calls, (_text(r, "pool"), _text(r, "region"), _text(r, "market")))
                azs = r.get("azs")
                for az, n in azs.items() if isinstance(azs, dict) else ():
                    _bump(self.launched, (_text(r, "pool"), str(az), _text(r, "region"), _text(r, "market")), float(n))
            elif kind == "capacity_error":
                _bump(self.capacity_errors, (_text(r, "pool"), _text(r, "az"), _text(r, "code")))
            elif kind == "throttled":
                _bump(self.throttled, (_text(r, "api"), _text(r, "region")))
            elif kind == "boot_failed":
                _bump(self.boot_failures, (_text(r, "pool"),))
            elif kind == "node_launched":
                # a node's new instance replaces its old one, also one that ended without a `terminated` line (a
                # spot interruption, an instance EC2 lost): the live count does not drift up
                node = _text(r, "node")
                previous = self._node_instance.get(node) if node else None
                if previous is not None and previous != _text(r, "instance_id"):
                    self.live.pop(previous, None)
                if node:
                    self._node_instance[node] = _text(r, "instance_id")
                self.live[_text(r, "instance_id")] = (
                    _text(r, "pool"),
                    _text(r, "az"),
                    _text(r, "region"),
                    _text(r, "market"),
                )
                seconds = r.get("seconds")
                if isinstance(seconds, int | float):
                    self.launch_seconds.observe((_text(r, "pool"),), float(seconds))
            elif kind == "terminated":  # where it ran: from its launch (an instance never bound has no AZ here)
                pool, az, region, market = self.live.pop(_text(r, "instance_id"), ("", "", "", ""))
                where = (pool or _text(r, "pool"), az, region or _text(r, "region"), market)
                _bump(self.terminated, (*where, _text(r, "reason")))

    def live_instances(self) -> dict[Labels, float]:
        """Live instances by (pool, az, region, market)."""
        out: dict[Labels, float] = {}
        for labels in self.live.values():
            _bump(out, labels)
        return out


@dataclass(frozen=True)
class PluginState:
    """The state files at one scrape."""

    cooling_azs: dict[str, int]  # pool -> AZs in capacity cool-down now
    protected: dict[str, bool]  # pool -> protected mode
    manager_counters: dict[str, int]
    manager_last_cycle: str
    license_servers: dict[str, tuple[int, float | None]]  # server -> (consecutive failures, last success)


class PluginReader:
    """Reads the event log incrementally and the state files whole (each is a few KB)."""

    def __init__(self, manifest: Manifest, license_state_dir: str | Path) -> None:
        self.manifest = manifest
        self.license_state = Path(license_state_dir) / LICENSE_STATE_FILE
        self.totals = EventTotals()
        self._tail = events.Tail(manifest.state_dir)

    def refresh(self) -> EventTotals:
        """Fold in what the log gained since the last call."""
        self.totals.fold(self._tail.read())
        return self.totals

    def state(self, now: float | None = None) -> PluginState:
        """Cool-downs, protected pools, manager counters and license sync health now."""
        at = time.time() if now is None else now
        pools: Sequence[Any] = self.manifest.pools
        cooling = {pool.key: 0 for pool in pools}
        for pool, _az in capacity.load_cooling(self.manifest.state_dir, at):
            cooling[pool] = cooling.get(pool, 0) + 1
        held = protection.protected(self.manifest.state_dir, pools)
        manager = manager_metrics.load(self.manifest.state_dir)
        servers: dict[str, tuple[int, float | None]] = {}
        for name, health in (read_json(self.license_state).get("servers") or {}).items():
            if isinstance(health, dict):
                last = health.get("last_success")
                servers[str(name)] = (
                    int(health.get("consecutive_failures") or 0),
                    float(last) if isinstance(last, int | float) else None,
                )
        return PluginState(
            cooling_azs=cooling,
            protected={pool.key: pool.key in held for pool in pools},
            manager_counters=dict(manager.to_json()["counters"]),
            manager_last_cycle=manager.last_cycle,
            license_servers=servers,
        )


def license_sync_age(servers: Mapping[str, tuple[int, float | None]], now: float) -> float | None:
    """Seconds since the stalest server last synced (None without servers; inf for one never synced)."""
    if not servers:
        return None
    lasts = [last for _failures, last in servers.values()]
    if any(last is None for last in lasts):
        return float("inf")
    return max(0.0, now - min(last for last in lasts if last is not None))
