"""Plots of the resume/suspend rows of bench/results/resume.json (`python -m bench.plots`; `make bench` calls it).

Writes next to the JSON:
- calls-vs-n.png: EC2 API calls of one resume and one suspend against N (log-log), each point labelled with its calls
  by API, and the "one call per node" line of a plugin that does not batch;
- wall-vs-n.png: wall and CPU seconds of the plugin process against N (log-log);
- jobs-vs-n.png (issue 33): for one big job and for jobs of 50 nodes, both launch APIs, seconds to the first / half /
  last NodeAddr against N, and the EC2 calls of each; the foreground's p50 / p95 in the title.
matplotlib's object API with the Agg canvas: no display needed.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

from bench.parallelcluster.source import VERSION as PC_VERSION

RESULTS = Path(__file__).resolve().parent / "results" / "resume.json"
CASES = {"resume": "#1f77b4", "suspend": "#d62728"}  # row case prefix -> colour


def _rows(results: dict[str, Any], prefix: str) -> list[dict[str, Any]]:
    """The rows of one case ("resume (…)", "suspend (…)"), by N."""
    return sorted((r for r in results["rows"] if r["case"].startswith(prefix + " (")), key=lambda r: r["n"])


def _log_axes(ax: Any, ns: list[int], ylabel: str) -> None:
    ax.set_xscale("log")
    ax.set_yscale("log")
    if ns:
        ax.set_xlim(min(ns) / 1.6, max(ns) * 3)  # room for the labels of the first and last points
    ax.set_xticks(ns)
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:,.0f}"))
    ax.xaxis.set_minor_locator(LogLocator(subs="auto"))
    ax.xaxis.set_minor_formatter(NullFormatter())
    ax.yaxis.set_major_locator(LogLocator(subs=(1.0, 2.0, 5.0)))
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    ax.yaxis.set_minor_formatter(NullFormatter())
    ax.set_xlabel("N (nodes resumed, then suspended)")
    ax.set_ylabel(ylabel)
    ax.grid(True, which="major", alpha=0.35)
    ax.legend(loc="upper left", fontsize=9)


def _subtitle(results: dict[str, Any]) -> str:
    machine = results.get("machine", {})
    return (
        f"emulated EC2 - recorded {results.get('recorded', '?')}, "
        f"{machine.get('cpus', '?')} cores, load {machine.get('load_avg_1m', '?')}"
    )


def plot_calls(results: dict[str, Any], path: Path) -> Path:
    """EC2 API calls per resume / suspend against N, with the one-call-per-node line for scale."""
    fig = Figure(figsize=(10, 6), dpi=100, layout="constrained")
    ax = fig.subplots()
    ns: set[int] = set()
    for case, color in CASES.items():
        rows = _rows(results, case)
        n = [r["n"] for r in rows]
        total = [sum(r["ec2_calls"].values()) for r in rows]
        ns.update(n)
        style = (
            {"linewidth": 4, "marker": "o", "markersize": 10}
            if case == "resume"
            else {"linestyle": "--", "marker": "s"}
        )
        ax.plot(n, total, color=color, label=f"{case}: EC2 calls (total)", **style)  # dashed over solid when equal
        for x, y, row in zip(n, total, rows, strict=True):
            text = "\n".join(f"{api} {count}" for api, count in row["ec2_calls"].items())
            ax.annotate(text, (x, y), textcoords="offset points", xytext=(6, 8 if case == "resume" else -26),
                        fontsize=8, color=color)  # fmt: skip
    if ns:
        line = sorted(ns)
        ax.plot(line, line, linestyle=":", color="#555555", label="one launch call per node (no batching)")
        ax.set_ylim(0.5, max(line) * 2)
    _log_axes(ax, sorted(ns), "EC2 API calls (log)")
    ax.set_title("1 pool, 3 instance types x 3 AZs, " + _subtitle(results), fontsize=9, loc="left")
    fig.suptitle("Power-save plugin: EC2 API calls per resume / suspend against N", fontsize=13)
    fig.savefig(path, format="png")
    return path


def plot_wall(results: dict[str, Any], path: Path) -> Path:
    """Wall (solid) and CPU (dashed) seconds of the plugin process per resume / suspend against N."""
    fig = Figure(figsize=(10, 6), dpi=100, layout="constrained")
    ax = fig.subplots()
    ns: set[int] = set()
    for case, color in CASES.items():
        rows = _rows(results, case)
        n = [r["n"] for r in rows]
        ns.update(n)
        ax.plot(n, [r["wall_s"] for r in rows], marker="o", color=color, linewidth=2, label=f"{case}: wall s")
        ax.plot(n, [r["cpu_s"] for r in rows], marker="s", color=color, linestyle="--", label=f"{case}: CPU s (plugin)")
        for x, y in zip(n, [r["wall_s"] for r in rows], strict=True):
            ax.annotate(f"{y:.2g} s", (x, y), textcoords="offset points", xytext=(0, 9 if case == "resume" else -16),
                        ha="center", fontsize=8, color=color)  # fmt: skip
    _log_axes(ax, sorted(ns), "seconds (log)")
    seconds = [r[key] for case in CASES for r in _rows(results, case) for key in ("wall_s", "cpu_s")]
    if seconds:
        ax.set_ylim(min(seconds) / 1.6, max(seconds) * 1.8)  # room for the labels of the lowest and highest points
    ax.set_title(
        "1 pool, 3 instance types x 3 AZs, "
        + _subtitle(results)
        + "\nwall includes the emulator's own work (moto, another process)",
        fontsize=9,
        loc="left",
    )
    fig.suptitle("Power-save plugin: wall and CPU time per resume / suspend against N", fontsize=13)
    fig.savefig(path, format="png")
    return path


JOB_CASES = {  # row case -> colour
    "one big job (CreateFleet)": "#1f77b4",
    "jobs of 50 (CreateFleet)": "#ff7f0e",
    "one big job (RunInstances)": "#2ca02c",
    "jobs of 50 (RunInstances)": "#d62728",
    f"jobs of 50 (CreateFleet) ParallelCluster {PC_VERSION}": "#7f7f7f",  # bench/parallelcluster/: side by side
    f"jobs of 50 (RunInstances) ParallelCluster {PC_VERSION}": "#8c564b",
}


def plot_jobs(results: dict[str, Any], path: Path) -> Path | None:
    """Seconds to the first / half / last NodeAddr and EC2 calls against N, per job case; None without such rows."""
    by_case = {c: sorted((r for r in results["rows"] if r["case"] == c), key=lambda r: r["n"]) for c in JOB_CASES}
    if not any(by_case.values()):
        return None
    fig = Figure(figsize=(13, 6), dpi=100, layout="constrained")
    times, calls = fig.subplots(1, 2)
    for case, rows in by_case.items():
        color = JOB_CASES[case]
        n = [r["n"] for r in rows]
        for key, style, label in (("last_s", "-", "last"), ("half_s", "--", "half"), ("first_s", ":", "first")):
            times.plot(n, [r["nodeaddr"][key] for r in rows], linestyle=style, marker="o", color=color,
                       label=f"{case}: {label}")  # fmt: skip
        for x, row in zip(n, rows, strict=True):
            if row["nodeaddr"]["last_s"] is None:  # not every node got an address (the row's `failed` says why)
                continue
            times.annotate(f"{row['nodeaddr']['last_s']:.1f} s", (x, row["nodeaddr"]["last_s"]),
                           textcoords="offset points", xytext=(5, 3), fontsize=8, color=color)  # fmt: skip
        total = [sum(r["ec2_calls"].values()) for r in rows]
        calls.plot(n, total, marker="s", color=color, label=case)
        for x, y in zip(n, total, strict=True):
            calls.annotate(str(y), (x, y), textcoords="offset points", xytext=(5, 3), fontsize=8, color=color)
    times.set_ylim(bottom=0)
    times.set_xlabel("N (nodes resumed in one ResumeProgram call)")
    times.set_ylabel("seconds from the resume's start to the NodeAddr of the first / half / last node")
    times.grid(True, alpha=0.35)
    times.legend(fontsize=7, ncol=2)
    calls.set_xlabel("N")
    calls.set_ylabel("AWS API calls of the resume (ParallelCluster's with its DynamoDB writes)")
    calls.set_yscale("log")
    calls.grid(True, alpha=0.35)
    calls.legend(fontsize=8)
    fore = [r for r in results["rows"] if r["case"].startswith("ResumeProgram foreground") and "p95_s" in r]
    fg = "; ".join(f"{r['case'].split(', ')[-1]}: p50 {r['p50_s'] * 1000:.0f} ms, p95 {r['p95_s'] * 1000:.0f} ms"
                   for r in fore)  # fmt: skip
    times.set_title(_subtitle(results) + (f"\nforeground (N={fore[0]['n']}): {fg}" if fore else ""), fontsize=8,
                    loc="left")  # fmt: skip
    fig.suptitle("Many jobs in one resume: jobs of 50 nodes next to one big job, both launch APIs", fontsize=13)
    fig.savefig(path, format="png")
    return path


def plot_results(results_path: Path = RESULTS) -> list[Path]:
    """The PNGs, written next to the JSON (a --quick run has no resume/suspend rows: those plots are left as they
    are)."""
    results = json.loads(results_path.read_text(encoding="utf-8"))
    out = results_path.parent
    paths = []
    if _rows(results, "resume"):
        paths += [plot_calls(results, out / "calls-vs-n.png"), plot_wall(results, out / "wall-vs-n.png")]
    jobs = plot_jobs(results, out / "jobs-vs-n.png")
    return paths + ([jobs] if jobs else [])


def main() -> int:
    for path in plot_results(Path(sys.argv[1]) if len(sys.argv) > 1 else RESULTS):
        print(f"plot: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
