"""The cost report as a text table (with a total line) or as JSON for machines (pure)."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from slurm_plugin.cost.report import CostReport, JobCost, Row
from slurm_plugin.cost.when import iso

LEGEND = (
    "estimated: priced with a fallback (another AZ's spot price, the on-demand price, or no launch record in the "
    "event log: the pool's first type on-demand); unpriced: no price in the instance cache, counted as $0"
)


def usd(value: float) -> str:
    """Dollars readable at any size (emulated prices are tiny)."""
    return f"{value:,.4f}" if value == 0 or abs(value) >= 0.0001 else f"{value:.2e}"


def _note(estimated: int | bool, unpriced: int | bool) -> str:
    return ", ".join(word for word, flag in (("estimated", estimated), ("unpriced", unpriced)) if flag)


def table_lines(report: CostReport) -> list[str]:
    """Header, one line per row, the total line and (when needed) the legend."""
    head = f"cost of cluster {report.cluster} from {iso(report.since)} to {iso(report.until)} ({report.hours:.2f} h)"
    estimated = sum(1 for j in report.jobs if j.estimated)
    unpriced = sum(1 for j in report.jobs if j.unpriced)
    flags = ", ".join(f"{n} {w}" for n, w in ((estimated, "estimated"), (unpriced, "unpriced")) if n)
    count = len({j.run.job_id for j in report.jobs})
    if report.by == "job":
        runs: dict[str, list[JobCost]] = {}
        for job in report.jobs:
            runs.setdefault(job.run.job_id, []).append(job)
        header = ["JOB", "USER", "ACCOUNT", "PARTITION", "NODES", "HOURS", "SHARE", "USD", "NOTE"]
        cells = [_job_cells(row, runs[row.key]) for row in report.rows]
        total = ["TOTAL", f"{count} jobs", "", "", "", "", "", usd(report.total_usd), flags]
    else:
        header = [report.by.upper(), "JOBS", "NODE-HOURS", "USD", "NOTE"]
        cells = [
            [r.key, str(r.jobs), f"{r.node_hours:.3f}", usd(r.usd), _note(r.estimated, r.unpriced)] for r in report.rows
        ]
        node_hours = sum(r.node_hours for r in report.rows)
        total = ["TOTAL", str(count), f"{node_hours:.3f}", usd(report.total_usd), flags]
    lines = [head, *_aligned([header, *cells, total], right={"NODES", "HOURS", "SHARE", "USD", "JOBS", "NODE-HOURS"})]
    if not report.jobs:
        lines.append("(no job held nodes in this window)")
    if estimated or unpriced:
        lines.append(LEGEND)
    return lines


def _job_cells(row: Row, runs: list[JobCost]) -> list[str]:
    """A job's line; a requeued job's runs are summed (nodes and share of its last run)."""
    last = runs[-1]
    note = _note(row.estimated, row.unpriced)
    if len(runs) > 1:
        note = ", ".join(p for p in (f"{len(runs)} runs", note) if p)
    return [
        row.key,
        last.run.user,
        last.run.account,
        last.run.partition,
        str(len(last.nodes)),
        f"{sum(r.seconds for r in runs) / 3600:.3f}",
        f"{last.share:.2f}",
        usd(row.usd),
        note,
    ]


def _aligned(table: list[list[str]], right: set[str]) -> list[str]:
    """Columns padded to their widest cell; numeric columns right-aligned."""
    widths = [max(len(row[i]) for row in table) for i in range(len(table[0]))]
    header = table[0]
    lines = []
    for row in table:
        cells = [
            cell.rjust(width) if header[i] in right else cell.ljust(width)
            for i, (cell, width) in enumerate(zip(row, widths, strict=True))
        ]
        lines.append("  ".join(cells).rstrip())
    return lines


def report_json(report: CostReport) -> dict[str, Any]:
    """The report as JSON-ready data: window, rows, every job with its nodes and prices, the total."""
    return {
        "cluster": report.cluster,
        "since": report.since,
        "until": report.until,
        "by": report.by,
        "rows": [asdict(row) for row in report.rows],
        "jobs": [_job_json(job) for job in report.jobs],
        "total_usd": report.total_usd,
    }


def _job_json(job: JobCost) -> dict[str, Any]:
    run = job.run
    return {
        "job_id": run.job_id,
        "user": run.user,
        "account": run.account,
        "partition": run.partition,
        "state": run.state,
        "start": run.start,
        "end": run.end,
        "elapsed": run.elapsed,
        "alloc_cpus": run.alloc_cpus,
        "seconds": job.seconds,
        "share": job.share,
        "usd": job.usd,
        "estimated": job.estimated,
        "unpriced": job.unpriced,
        "nodes": [asdict(node) for node in job.nodes],
    }
