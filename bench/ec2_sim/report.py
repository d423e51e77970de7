"""The simulation's report: the table printed by `python -m bench.ec2_sim`, the JSON and the plots next to it.

Plots (matplotlib's object API, Agg canvas):
- ec2-sim-running.png: running nodes against virtual time for each N of the main rows (solid), the ideal launcher's
  expected count (dashed, bench/ec2_sim/floor.py) and ParallelCluster's published EC2 / scheduler times (markers);
- ec2-sim-ratio.png: time to all N running / floor for every row, with the 1.2x target, and the AWS calls per row.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from matplotlib.figure import Figure

# aws/aws-parallelcluster, tests/integration-tests/tests/performance_tests/test_scaling/test_scaling_stress_test/
# results/baseline.json (c5.large, dynamic nodes, best-effort and all-or-nothing alike): upper bounds its scaling
# stress test asserts, seconds from job submission to N EC2 instances / N compute nodes in the scheduler.
PARALLELCLUSTER = {
    1000: {"ec2_s": 180, "scheduler_s": 540},
    2000: {"ec2_s": 300, "scheduler_s": 600},
    3000: {"ec2_s": 420, "scheduler_s": 1020},
    4000: {"ec2_s": 540, "scheduler_s": 1200},
}
PARALLELCLUSTER_SOURCE = (
    "https://github.com/aws/aws-parallelcluster/blob/develop/tests/integration-tests/tests/performance_tests/"
    "test_scaling/test_scaling_stress_test/results/baseline.json"
)
TARGET_RATIO = 1.2


def _calls(row: dict[str, Any]) -> str:
    short = {"CreateFleet": "CF", "DescribeInstances": "DI", "RunInstances": "RI", "TerminateInstances": "TI"}
    return " ".join(f"{short.get(k, k)}={v}" for k, v in row["aws_calls"].items()) or "-"


def _num(value: float | None, digits: int = 0) -> str:
    return "never" if value is None else f"{value:.{digits}f}"


def jobs_table(rows: Sequence[dict[str, Any]]) -> str:
    """bench/README.md's jobs table: per N and job size, time to all running against the floor, calls, churn."""
    head = (
        f"{'scenario':<30} {'N':>6} {'job':>5} {'running s':>9} {'floor s':>8} {'ratio':>6} {'requeued':>8} "
        f"{'leaked':>6} {'split':>5}  AWS calls"
    )
    lines = [head, "-" * len(head)]
    for row in rows:
        lines.append(
            f"{row['scenario']:<30} {row['n']:>6} {row.get('job_nodes', 1):>5} "
            f"{_num(row['time_to_all_running_s']):>9} {row['floor_s']:>8.0f} {_num(row['ratio'], 2):>6} "
            f"{sum(row['powered_down_by_plugin'].values()):>8} {row['instances_leaked']:>6} "
            f"{row.get('jobs_across_azs', 0):>5}  {_calls(row)}"
        )
    return "\n".join(lines)


def table(rows: Sequence[dict[str, Any]]) -> str:
    """One line per row: times, floor, ratio, calls, throttled and capacity answers, Slurm-side churn."""
    head = (
        f"{'scenario':<34} {'N':>6} {'running s':>9} {'floor s':>8} {'ratio':>6} {'EC2 s':>7} {'EC2 floor':>9} "
        f"{'PC EC2/sched s':>14} {'throttled':>9} {'ICE':>5} {'timeouts':>8} {'requeued':>8} {'leaked':>6}  AWS calls"
    )
    lines = [head, "-" * len(head)]
    for row in rows:
        pc = PARALLELCLUSTER.get(row["n"])
        pc_text = f"{pc['ec2_s']}/{pc['scheduler_s']}" if pc and row["scenario"].startswith("documented") else "-"
        lines.append(
            f"{row['scenario']:<34} {row['n']:>6} {_num(row['time_to_all_running_s']):>9} {row['floor_s']:>8.0f} "
            f"{_num(row['ratio'], 2):>6} {_num(row['time_to_ec2_running_s']):>7} {row['ec2_floor_s']:>9.0f} "
            f"{pc_text:>14} {sum(row['throttled'].values()):>9} {sum(row['capacity_errors'].values()):>5} "
            f"{row['resume_timeouts']:>8} {sum(row['powered_down_by_plugin'].values()):>8} "
            f"{row['instances_leaked']:>6}  {_calls(row)}"
        )
    return "\n".join(lines)


def write_json(path: Path, rows: Sequence[dict[str, Any]], meta: dict[str, Any]) -> None:
    """The rows and the run's facts (date, machine, sources) as JSON."""
    path.parent.mkdir(parents=True, exist_ok=True)
    payload = {**meta, "parallelcluster": {"source": PARALLELCLUSTER_SOURCE, "by_n": PARALLELCLUSTER}, "rows": rows}
    text = json.dumps(payload, indent=2)
    # lists of numbers (the curves) on one line each
    text = re.sub(r"\[\s+([-0-9.eE,\s]+?)\s+\]", lambda m: "[" + " ".join(m.group(1).split()) + "]", text)
    path.write_text(text + "\n", encoding="utf-8")


def plot_running(rows: Sequence[dict[str, Any]], path: Path) -> Path:
    """Running nodes against time, one panel per N of the documented-limits rows."""
    main = [r for r in rows if r["scenario"] == "documented limits"]
    columns = 2 if len(main) > 1 else 1
    lines = math.ceil(len(main) / columns)
    figure = Figure(figsize=(6.2 * columns, 4.4 * lines), layout="constrained")
    for index, row in enumerate(main, start=1):
        ax = figure.add_subplot(lines, columns, index)
        ax.step(row["curve"]["t"], row["curve"]["running"], where="post", color="#1f77b4", label="plugin (simulated)")
        ax.plot(row["ideal_curve"]["t"], row["ideal_curve"]["running"], "--", color="#7f7f7f",
                label="ideal launcher (expected)")  # fmt: skip
        ax.axvline(row["floor_s"], color="#7f7f7f", linewidth=0.8)
        ax.axvline(row["floor_s"] * TARGET_RATIO, color="#d62728", linewidth=0.8, linestyle=":", label="1.2 x floor")
        pc = PARALLELCLUSTER.get(row["n"])
        if pc:
            ax.plot([pc["ec2_s"]], [row["n"]], "^", color="#2ca02c", label="ParallelCluster EC2 (published)")
            ax.plot([pc["scheduler_s"]], [row["n"]], "s", color="#2ca02c", label="ParallelCluster scheduler")
        ax.set_title(f"N = {row['n']:,}: {_num(row['time_to_all_running_s'])} s, floor {row['floor_s']:.0f} s")
        ax.set_xlabel("virtual seconds since the jobs were submitted")
        ax.set_ylabel("nodes running (slurmd registered)")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7, loc="lower right")
    figure.suptitle("Scale-out under EC2's documented rate limits (RunInstances resource bucket 1000 + 2/s)")
    figure.savefig(path, dpi=100)
    return path


def plot_ratio(rows: Sequence[dict[str, Any]], path: Path) -> Path:
    """Per row: ratio to the floor (target line), AWS calls by API, and the Slurm-side churn."""
    labels = [f"{r['scenario']}, N={r['n']:,}" for r in rows]
    xs = list(range(len(rows)))
    ratios = [r["ratio"] or 0.0 for r in rows]
    figure = Figure(figsize=(12, 11), layout="constrained")
    top, middle, bottom = (figure.add_subplot(3, 1, i) for i in (1, 2, 3))
    top.bar(xs, ratios, color=["#1f77b4" if 0 < v <= TARGET_RATIO else "#d62728" for v in ratios])
    top.axhline(TARGET_RATIO, color="#d62728", linestyle=":", label="target: 1.2 x floor")
    top.axhline(1.0, color="#7f7f7f", linewidth=0.8)
    for x, value in enumerate(ratios):
        top.text(x, value + 0.02, f"{value:.2f}" if value else "never", ha="center", fontsize=8)
    top.set_ylabel("time to all N running / floor")
    top.set_title("Time to N running nodes against the floor the rate limits allow")
    apis = sorted({api for r in rows for api in r["aws_calls"]})
    width = 0.8 / max(1, len(apis))
    for index, api in enumerate(apis):
        shifted = [x - 0.4 + width * (index + 0.5) for x in xs]
        middle.bar(shifted, [r["aws_calls"].get(api, 0) for r in rows], width=width, label=api)
    middle.plot(xs, [sum(r["throttled"].values()) or math.nan for r in rows], "k_", markersize=16,
                label="answered RequestLimitExceeded")  # fmt: skip
    middle.set_yscale("log")
    middle.set_ylabel("AWS calls (each try)")
    middle.set_title("AWS calls by API")
    for index, (key, label) in enumerate((("powered_down_by_plugin", "nodes powered down by the plugin (job requeued)"),
                                          ("resume_timeouts", "ResumeTimeouts (slurmctld)"))):  # fmt: skip
        values = [sum(r[key].values()) if isinstance(r[key], dict) else r[key] for r in rows]
        bottom.bar([x - 0.2 + 0.4 * index for x in xs], values, width=0.4, label=label)
    bottom.set_yscale("symlog", linthresh=10)
    bottom.set_ylabel("events")
    bottom.set_title("Slurm-side churn")
    for ax in (top, middle, bottom):
        ax.set_xticks(xs, labels, fontsize=7, rotation=30, ha="right")
        ax.legend(fontsize=8)
        ax.grid(axis="y", alpha=0.3)
    figure.savefig(path, dpi=100)
    return path
