"""Job costs and their groups (pure).

A job's cost is the sum over its nodes of price (USD/hour, `pricing`) x hours x share, where
- hours: the part of the run inside the report's window [since, until]; a running job counts up to `until`;
- share = AllocCPUS / (sum of the vCPUs of its nodes' instance types), capped at 1: a job alone on whole nodes pays
  the whole nodes, two 1-CPU jobs on one 2-vCPU node pay half each. Idle time of a node no job holds is no job's.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from slurm_plugin.cost.ledger import Ledger, tenancy_for
from slurm_plugin.cost.pricing import NodePrice, price_node
from slurm_plugin.cost.sacct import JobRun
from slurm_plugin.instance_cache import InstanceCache
from slurm_plugin.manifest import Manifest

GROUPINGS = ("job", "user", "account", "partition")
SECONDS_PER_HOUR = 3600.0


@dataclass(frozen=True)
class JobCost:
    """One run of a job, priced."""

    run: JobRun
    seconds: float  # inside the window
    share: float
    nodes: tuple[NodePrice, ...]
    usd: float

    @property
    def estimated(self) -> bool:
        """A node was priced by a fallback rule."""
        return any(n.estimated for n in self.nodes)

    @property
    def unpriced(self) -> bool:
        """A node had no price at all (counted as $0)."""
        return any(n.usd_per_hour is None for n in self.nodes)

    @property
    def node_hours(self) -> float:
        """Nodes x hours (whole nodes, before the share)."""
        return len(self.nodes) * self.seconds / SECONDS_PER_HOUR


@dataclass(frozen=True)
class Row:
    """One line of the table: a job, or the jobs of one user, account or partition."""

    key: str
    jobs: int
    node_hours: float
    usd: float
    estimated: int  # jobs with an estimated price
    unpriced: int  # jobs with an unpriced node


@dataclass(frozen=True)
class CostReport:
    """The whole report of one cluster over [since, until]."""

    cluster: str
    since: float
    until: float
    by: str
    jobs: list[JobCost]
    rows: list[Row]

    @property
    def total_usd(self) -> float:
        """Sum of every job's cost."""
        return sum(job.usd for job in self.jobs)

    @property
    def hours(self) -> float:
        """Length of the window in hours."""
        return (self.until - self.since) / SECONDS_PER_HOUR


def price_job(
    run: JobRun, ledger: Ledger, manifest: Manifest, cache: InstanceCache, since: float, until: float
) -> JobCost:
    """The cost of one run inside [since, until]."""
    start = run.start if run.start is not None else until
    end = min(run.end if run.end is not None else until, until)
    seconds = max(0.0, end - max(start, since))
    nodes = tuple(price_node(node, tenancy_for(ledger, node, start, end), manifest, cache) for node in run.nodes)
    vcpus = sum(n.vcpus or 0 for n in nodes)
    share = min(1.0, run.alloc_cpus / vcpus) if vcpus and run.alloc_cpus > 0 else 1.0
    usd = sum((n.usd_per_hour or 0.0) * seconds / SECONDS_PER_HOUR * share for n in nodes)
    return JobCost(run=run, seconds=seconds, share=share, nodes=nodes, usd=usd)


def group_rows(jobs: Iterable[JobCost], by: str) -> list[Row]:
    """Rows by job (in sacct's order) or by user, account or partition (most expensive first)."""
    if by not in GROUPINGS:
        raise ValueError(f"unknown grouping {by!r} (one of {', '.join(GROUPINGS)})")
    groups: dict[str, list[JobCost]] = {}
    for job in jobs:
        key = {"job": job.run.job_id, "user": job.run.user, "account": job.run.account}.get(by, job.run.partition)
        groups.setdefault(key or "(none)", []).append(job)
    rows = [
        Row(
            key=key,
            jobs=len({j.run.job_id for j in members}),
            node_hours=sum(j.node_hours for j in members),
            usd=sum(j.usd for j in members),
            estimated=sum(1 for j in members if j.estimated),
            unpriced=sum(1 for j in members if j.unpriced),
        )
        for key, members in groups.items()
    ]
    return rows if by == "job" else sorted(rows, key=lambda r: (-r.usd, r.key))


def build_report(
    manifest: Manifest,
    cache: InstanceCache,
    ledger: Ledger,
    runs: Iterable[JobRun],
    since: float,
    until: float,
    by: str = "job",
) -> CostReport:
    """Price every run that held nodes inside the window and group them."""
    held = [run for run in runs if run.nodes and run.start is not None and run.start <= until]
    jobs = [price_job(run, ledger, manifest, cache, since, until) for run in held]
    jobs = [job for job in jobs if job.seconds > 0 or since <= (job.run.start or 0.0)]  # not runs ended before since
    return CostReport(manifest.cluster, since, until, by, jobs, group_rows(jobs, by))
