"""The exporter's prometheus_client collector: every scrape reads each source once (slurm_source, plugin_source) and
turns what it read into metric families. Names and labels are listed in docs/observability.md.

A source that fails is reported by `elastic_slurm_exporter_source_up{source} 0` and its metrics are left out of that
scrape (never stale numbers presented as current). `Snapshot` keeps the values the CloudWatch publisher needs.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import TypeVar

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector

from slurm_plugin.exporter.plugin_source import WAIT_BUCKETS, EventTotals, Histogram, PluginReader, license_sync_age
from slurm_plugin.exporter.slurm_source import FINISHED_STATES, NODE_STATES, JobRow, SlurmReader, SourceError, count
from slurm_plugin.manifest import Manifest
from slurm_plugin.powersave.planner import markets, node_pools, pool_of
from slurm_plugin.primary import Gate

log = logging.getLogger("slurm-exporter")
T = TypeVar("T")
UP_STATES = ("idle", "allocated", "mixed", "completing")
# States whose start time is when the job began running (a pending job's is a forecast; a job cancelled while
# pending gets its cancel time): the submit-to-running histogram counts only these
RAN_STATES = frozenset({
    "running", "completing", "suspended", "completed", "failed", "timeout", "node_fail", "out_of_memory", "preempted",
})  # fmt: skip
# the EC2 calls the plugin makes, listed at 0 per region so "nothing throttled" is a value, not a missing series
THROTTLE_APIS = ("CreateFleet", "RunInstances", "DescribeInstances", "TerminateInstances")


@dataclass
class Snapshot:
    """What the last scrape saw, for the CloudWatch publisher."""

    slurmctld_up: bool = False
    slurmdbd_up: bool | None = None
    nodes_up: int = 0
    jobs: dict[str, int] = field(default_factory=dict)  # state -> jobs
    capacity_errors: float | None = None  # cumulative; None when the event log could not be read
    boot_failures: float | None = None  # cumulative; None when the event log could not be read
    protected_pools: int = 0
    license_sync_age: float | None = None


def _gauge(name: str, doc: str, labels: tuple[str, ...], values: Mapping[tuple[str, ...], float]) -> Metric:
    family = GaugeMetricFamily(name, doc, labels=list(labels))
    for key, value in sorted(values.items()):
        family.add_metric(list(key), value)
    return family


def _counter(name: str, doc: str, labels: tuple[str, ...], values: Mapping[tuple[str, ...], float]) -> Metric:
    family = CounterMetricFamily(name, doc, labels=list(labels))
    for key, value in sorted(values.items()):
        family.add_metric(list(key), value)
    return family


def _histogram(name: str, doc: str, labels: tuple[str, ...], hist: Histogram) -> Metric:
    family = HistogramMetricFamily(name, doc, labels=list(labels))
    bounds = [*(str(b) for b in hist.bounds), "+Inf"]
    for key, counts in sorted(hist.buckets.items()):
        family.add_metric(list(key), list(zip(bounds, [float(c) for c in counts], strict=True)), hist.sums[key])
    return family


class ClusterCollector(Collector):
    """Slurm + plugin metrics of one cluster."""

    def __init__(
        self, manifest: Manifest, slurm: SlurmReader, plugin: PluginReader, accounting: bool, per_user: bool = True
    ) -> None:
        self.manifest = manifest
        # series labelled by user or account (who runs what, how much): anyone who can scrape reads them, so the
        # command line turns them off unless the site asks for them (main.py PER_USER_ENV, docs/observability.md)
        self.per_user = per_user
        self.slurm = slurm
        self.plugin = plugin
        self.accounting = accounting
        self.snapshot = Snapshot()
        self._by_prefix = node_pools(manifest.pools)
        self._regions = sorted({loc.region for pool in manifest.pools for loc in pool.locations})
        self._places: dict[
            tuple[str, ...], float
        ] = {  # where each pool may run: (pool, az, region, market), listed at 0 when nothing runs there
            (pool.key, loc.availability_zone, loc.region, market): 0.0
            for pool in manifest.pools
            for loc in pool.locations
            for market in markets(pool.purchase_option)
        }
        self._waits = Histogram(WAIT_BUCKETS)  # (partition,)
        self._started_jobs: set[str] = set()
        self._source_up: dict[str, float] = {}
        self._source_seconds: dict[str, float] = {}
        # which controller acts (slurm_plugin/primary.py): elastic_slurm_controller_acting
        self.gate = Gate.for_slurm(manifest.slurm_bin_dir, manifest.slurm_conf)

    def _read(self, source: str, read: Callable[[], T]) -> T | None:
        started = time.monotonic()
        try:
            value = read()
        except (SourceError, OSError) as exc:
            log.warning("source %s: %s", source, exc)
            value = None
        self._source_up[source] = 0.0 if value is None else 1.0
        self._source_seconds[source] = time.monotonic() - started
        return value

    def collect(self) -> Iterator[Metric]:
        """One scrape."""
        snap = Snapshot()
        yield from self._nodes(snap)
        yield from self._jobs(snap)
        yield from self._sdiag(snap)
        yield from self._licenses()
        yield from self._plugin(snap)
        self.snapshot = snap
        yield _gauge("elastic_slurm_exporter_source_up", "1 when the source answered this scrape", ("source",),
                     {(k,): v for k, v in self._source_up.items()})  # fmt: skip
        yield _gauge("elastic_slurm_exporter_source_seconds", "How long reading the source took", ("source",),
                     {(k,): v for k, v in self._source_seconds.items()})  # fmt: skip
        yield _gauge("elastic_slurm_controller_acting", "1 on the controller acting for the cluster (scontrol ping)",
                     ("host",), {(self.gate.host,): float(self.gate.acting())})  # fmt: skip

    def _nodes(self, snap: Snapshot) -> Iterator[Metric]:
        rows = self._read("nodes", self.slurm.nodes)
        if rows is None:
            return
        # every state of every pool, 0 included: a series that was 3 and is now 0 says so instead of vanishing
        values: dict[tuple[str, ...], float] = {
            (p.partition, p.key, state): 0.0 for p in self.manifest.pools for state in NODE_STATES
        }
        for (partition, name, state), n in count((r.partition, r.name, r.state) for r in rows).items():
            pool = pool_of(name, self._by_prefix)
            key = (partition, pool.key if pool is not None else "", state)
            values[key] = values.get(key, 0.0) + n
        snap.nodes_up = len({r.name for r in rows if r.state in UP_STATES})
        yield _gauge("slurm_nodes", "Nodes by partition, pool and state", ("partition", "pool", "state"), values)

    def _jobs(self, snap: Snapshot) -> Iterator[Metric]:
        listed = self._read("jobs", self.slurm.jobs)
        if listed is None:
            return
        self._observe_waits(listed)
        rows = [r for r in listed if r.state not in FINISHED_STATES]
        by_state = count((r.partition, r.state, r.reason) for r in rows)
        for state in ("pending", "configuring", "running"):  # always present: a dashboard shows 0, not nothing
            for partition in {r.partition for r in rows} | {p.partition for p in self.manifest.pools}:
                by_state.setdefault((partition, state, ""), 0)
        snap.jobs = {}
        for (_p, state, _r), n in by_state.items():
            snap.jobs[state] = snap.jobs.get(state, 0) + n
        yield _gauge("slurm_jobs", "Jobs by partition, state and pending reason", ("partition", "state", "reason"),
                     {k: float(v) for k, v in by_state.items()})  # fmt: skip
        if self.per_user:
            yield _gauge("slurm_user_jobs", "Jobs by user and state", ("user", "state"),
                         {k: float(v) for k, v in count((r.user, r.state) for r in rows).items()})  # fmt: skip
            yield _gauge("slurm_account_jobs", "Jobs by account and state", ("account", "state"),
                         {k: float(v) for k, v in count((r.account, r.state) for r in rows).items()})  # fmt: skip
        yield _histogram("elastic_slurm_job_wait_seconds", "Submit to RUNNING, per job (seen by the exporter)",
                         ("partition",), self._waits)  # fmt: skip

    def _observe_waits(self, rows: list[JobRow]) -> None:
        present = set()
        for row in rows:
            present.add(row.job_id)
            if row.started is not None and row.state in RAN_STATES and row.job_id not in self._started_jobs:
                self._started_jobs.add(row.job_id)
                if row.submitted is not None and row.started is not None:
                    self._waits.observe((row.partition,), max(0.0, row.started - row.submitted))
        self._started_jobs &= present  # forget jobs slurmctld no longer holds

    def _sdiag(self, snap: Snapshot) -> Iterator[Metric]:
        sdiag = self._read("sdiag", self.slurm.sdiag)
        up: dict[tuple[str, ...], float] = {("slurmctld",): 1.0 if sdiag is not None else 0.0}
        snap.slurmctld_up = sdiag is not None
        if self.accounting:
            dbd = self._read("slurmdbd", lambda: self.slurm.slurmdbd_up() or None)
            up[("slurmdbd",)] = 1.0 if dbd else 0.0
            snap.slurmdbd_up = bool(dbd)
        yield _gauge("slurm_up", "1 when the daemon answers", ("daemon",), up)
        if sdiag is None:
            return
        yield _gauge("slurm_scheduler_cycle_seconds", "Scheduler cycle times (sdiag)", ("scheduler", "stat"),
                     {(s, stat): sdiag.cycles.get((s, stat), 0.0) for s in ("main", "backfill")
                      for stat in ("last", "max", "mean")})  # fmt: skip
        yield _gauge("slurm_scheduler_queue_length", "Jobs the main scheduler looked at last cycle", (),
                     {(): sdiag.queue_length})  # fmt: skip
        for key in ("server_threads", "agent_queue_size", "dbd_agent_queue_size"):
            yield _gauge(f"slurm_{key}", f"sdiag {key.replace('_', ' ')}", (), {(): sdiag.totals.get(key, 0.0)})
        for key in ("jobs_submitted", "jobs_started", "jobs_completed", "jobs_failed"):
            yield _counter(f"slurm_{key}", f"sdiag {key.replace('_', ' ')} (reset daily by slurmctld)", (),
                           {(): sdiag.totals.get(key, 0.0)})  # fmt: skip
        yield _counter("slurm_rpc_calls", "RPCs slurmctld served, by message type", ("type",),
                       {(k,): v for k, v in sdiag.rpc_count.items()})  # fmt: skip
        yield _counter("slurm_rpc_time_seconds", "Time slurmctld spent on RPCs, by message type", ("type",),
                       {(k,): v for k, v in sdiag.rpc_seconds.items()})  # fmt: skip
        if self.per_user:
            yield _counter("slurm_rpc_user_calls", "RPCs slurmctld served, by user", ("user",),
                           {(k,): v for k, v in sdiag.rpc_user_count.items()})  # fmt: skip

    def _licenses(self) -> Iterator[Metric]:
        rows = self._read("licenses", self.slurm.licenses)
        if rows is None:
            return
        yield _gauge("slurm_license_total", "Licenses Slurm may hand out", ("license",),
                     {(r.name,): r.total for r in rows})  # fmt: skip
        yield _gauge("slurm_license_used", "Licenses held by jobs", ("license",), {(r.name,): r.used for r in rows})

    def _plugin(self, snap: Snapshot) -> Iterator[Metric]:
        totals = self._read("events", self.plugin.refresh)
        state = self._read("state", self.plugin.state)
        if totals is not None:
            yield from _event_metrics(totals, [p.key for p in self.manifest.pools], self._regions, self._places)
            snap.capacity_errors = sum(totals.capacity_errors.values())
            snap.boot_failures = sum(totals.boot_failures.values())
        if state is None:
            return
        yield _gauge("elastic_slurm_pool_cooling_azs", "AZs of the pool in capacity cool-down now", ("pool",),
                     {(k,): float(v) for k, v in state.cooling_azs.items()})  # fmt: skip
        yield _gauge("elastic_slurm_pool_protected", "1 while the pool is in protected mode", ("pool",),
                     {(k,): float(v) for k, v in state.protected.items()})  # fmt: skip
        yield _counter("elastic_slurm_manager_actions", "The cluster manager's counters", ("action",),
                       {(k,): float(v) for k, v in state.manager_counters.items()})  # fmt: skip
        snap.protected_pools = sum(state.protected.values())
        age = license_sync_age(state.license_servers, time.time())
        snap.license_sync_age = age
        if age is not None:
            yield _gauge("elastic_slurm_license_sync_age_seconds", "Since the stalest license server last synced", (),
                         {(): age})  # fmt: skip
            yield _gauge("elastic_slurm_license_sync_failures", "Consecutive failed syncs, per server", ("server",),
                         {(k,): float(v[0]) for k, v in state.license_servers.items()})  # fmt: skip


def _event_metrics(
    totals: EventTotals, pools: list[str], regions: list[str], places: Mapping[tuple[str, ...], float]
) -> Iterator[Metric]:
    zero_pools: dict[tuple[str, ...], float] = {(p,): 0.0 for p in pools}
    yield _counter("elastic_slurm_launch_calls", "CreateFleet/RunInstances calls", ("pool", "region", "market"),
                   totals.launch_calls)  # fmt: skip
    yield _counter("elastic_slurm_instances_launched", "Instances EC2 launched", ("pool", "az", "region", "market"),
                   totals.launched)  # fmt: skip
    yield _counter("elastic_slurm_instances_terminated", "Instances terminated, by where they ran and why",
                   ("pool", "az", "region", "market", "reason"), totals.terminated)  # fmt: skip
    yield _counter("elastic_slurm_capacity_errors", "Capacity errors EC2 answered", ("pool", "az", "code"),
                   totals.capacity_errors)  # fmt: skip
    yield _counter("elastic_slurm_api_throttled", "Throttled AWS answers (each try)", ("api", "region"),
                   {**{(api, region): 0.0 for api in THROTTLE_APIS for region in regions}, **totals.throttled})  # fmt: skip
    yield _counter("elastic_slurm_boot_failures", "Nodes that did not register in time", ("pool",),
                   {**zero_pools, **totals.boot_failures})  # fmt: skip
    yield _histogram("elastic_slurm_launch_seconds", "Resume request to instance bound to its node", ("pool",),
                     totals.launch_seconds)  # fmt: skip
    yield _gauge("elastic_slurm_instances", "Live instances (from the event log)", ("pool", "az", "region", "market"),
                 {**places, **totals.live_instances()})  # fmt: skip
