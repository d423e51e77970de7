"""The cluster's timeline from Prometheus: nodes, instances, jobs, launches, capacity errors and terminations.

Every PromQL string lives in TIMELINE_QUERIES (metric names: spec/metrics.md). Gauges are kept as Prometheus answers
them. Counters (launches, capacity errors, terminations) become cumulative counts *within the window*: a series that
has a sample at the window's first step starts at 0 there; one that appears later (the exporter shows a label set, e.g.
an AZ, once it counted something there) is 0 one step before and its first value then; a drop (exporter restart) is a
counter reset, as in PromQL's increase().
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from elastic_slurm.report.prometheus import Points, query_range

Series = dict[str, Points]  # label (a pool, an AZ, a job state, "total") -> [(unix time, value), ...]

TIMELINE_QUERIES: dict[str, str] = {
    "nodes_up": 'sum by (pool) (slurm_nodes{state=~"idle|allocated|mixed|completing"})',
    "instances": "sum by (az) (elastic_slurm_instances)",
    "jobs": 'sum by (state) (slurm_jobs{state=~"pending|configuring|running"})',
    "launches": "sum by (az) (elastic_slurm_instances_launched_total)",
    "capacity_errors": "sum by (az) (elastic_slurm_capacity_errors_total)",
    "terminations": "sum(elastic_slurm_instances_terminated_total)",
}
COUNTERS = frozenset({"launches", "capacity_errors", "terminations"})
MAX_POINTS = 1000  # per series: enough for a 1200 px wide picture, far below Prometheus' 11,000 limit


@dataclass
class Timeline:
    """Named series over one window [start, end] (unix seconds), sampled every `step` seconds."""

    cluster: str
    start: float
    end: float
    step: float
    nodes_up: Series = field(default_factory=dict)  # per pool: Slurm nodes idle, allocated, mixed or completing
    instances: Series = field(default_factory=dict)  # per AZ: live instances
    jobs: Series = field(default_factory=dict)  # "pending", "running"
    launches: Series = field(default_factory=dict)  # per AZ: instances launched since the window's start
    capacity_errors: Series = field(default_factory=dict)  # per AZ: capacity errors since the window's start
    terminations: Series = field(default_factory=dict)  # "total": instances terminated since the window's start

    def series(self) -> dict[str, Series]:
        """Every series group by its TIMELINE_QUERIES name."""
        return {name: getattr(self, name) for name in TIMELINE_QUERIES}


def default_step(start: float, end: float) -> float:
    """Whole seconds, at least 1, at most MAX_POINTS samples (the local cloud scrapes every 2 s: a sample holds)."""
    return float(max(1, math.ceil((end - start) / MAX_POINTS)))


def _label(metric: dict[str, str]) -> str:
    """The series' name: its label values ("us-east-1a"), or "total" for an unlabelled sum."""
    values = [value for key, value in sorted(metric.items()) if key != "__name__"]
    return "/".join(values) or "total"


def within_window(points: Points, window_start: float, step: float) -> Points:
    """A cumulative counter's points as the count since the window's start (see the module docstring)."""
    result: Points = []
    total = 0.0
    previous: float | None = None
    for t, value in points:
        if previous is None:
            total = 0.0 if t <= window_start + step / 2 else value  # present at the start: its baseline
            if total:  # it appeared later: what it counted happened in the window, after a step at 0
                result.append((t - step, 0.0))
        else:
            total += value - previous if value >= previous else value  # a drop is a reset to 0
        previous = value
        result.append((t, total))
    return result


def fetch_timeline(prometheus_url: str, start: float, end: float, step: float, cluster: str = "") -> Timeline:
    """Run every TIMELINE_QUERIES query over [start, end]; PrometheusError (one line) when it fails."""
    if not end > start:
        raise ValueError(f"the window must not be empty: start {start} >= end {end}")
    if not step > 0:
        raise ValueError(f"step must be positive, got {step}")
    got: dict[str, Series] = {}
    for name, query in TIMELINE_QUERIES.items():
        series: Series = {}
        for metric, points in query_range(prometheus_url, query, start, end, step):
            series[_label(metric)] = within_window(points, start, step) if name in COUNTERS else points
        got[name] = dict(sorted(series.items()))
    return Timeline(
        cluster=cluster,
        start=start,
        end=end,
        step=step,
        nodes_up=got["nodes_up"],
        instances=got["instances"],
        jobs=got["jobs"],
        launches=got["launches"],
        capacity_errors=got["capacity_errors"],
        terminations=got["terminations"],
    )
