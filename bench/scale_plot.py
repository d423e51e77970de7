"""Where the time goes in bench/scale_10k.py (`python -m bench.scale_plot [scale-10k.json]`).

One horizontal bar group per phase: the wall seconds (outlined bar), and the CPU seconds of each process stacked
below it — the plugin (the resume/suspend worker, or the cluster manager with its scontrol calls), the emulated AWS
(moto) and slurmctld — so a phase whose wall is mostly the emulator's CPU shows it at a glance. (The scheduler phase
is a fixed sdiag window, reported in the table only.) Writes scale-10k.png next to the JSON.
matplotlib's object API with the Agg canvas: no display needed.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from matplotlib.figure import Figure

RESULTS = Path(__file__).resolve().parent / "results" / "scale-10k.json"
PROCESSES = {"plugin": "#1f77b4", "emulated_aws": "#ff7f0e", "slurmctld": "#2ca02c"}
LABELS = {
    "plugin": "plugin worker / manager (+ scontrol) CPU",
    "emulated_aws": "emulated AWS (moto) CPU",
    "slurmctld": "slurmctld CPU",
}


def phases(results: dict[str, Any]) -> list[tuple[str, float | None, dict[str, float]]]:
    """(label, wall seconds, CPU seconds by process) of every phase that has CPU figures, in run order."""
    out: list[tuple[str, float | None, dict[str, float]]] = []
    for key, label in (
        ("resume", "resume of every node\n(power_up -> all NodeAddr set)"),
        ("manager_live", "cluster-manager pass\n(every instance live)"),
        ("suspend", "suspend of every node\n(power_down -> all terminated)"),
        ("manager_after", "cluster-manager pass\n(after suspend)"),
    ):
        row = results.get("phases", {}).get(key)
        if not row or "cpu_s" not in row:
            continue
        cpu = {p: float(row["cpu_s"].get(p, 0.0)) for p in PROCESSES}
        cpu["plugin"] += float(row.get("children_cpu_s", 0.0))  # a manager pass: its scontrol calls too
        out.append((label, row.get("wall_s"), cpu))
    return out


def plot(results: dict[str, Any], path: Path) -> Path:
    """Draw the bars and save the PNG."""
    rows = phases(results)
    fig = Figure(figsize=(11, 1.3 + 1.2 * max(1, len(rows))), dpi=100, layout="constrained")
    ax = fig.subplots()
    for index, (_label, wall, cpu) in enumerate(rows):
        y = len(rows) - 1 - index
        left = 0.0
        for process, color in PROCESSES.items():
            seconds = cpu[process]
            ax.barh(
                y - 0.17, seconds, height=0.3, left=left, color=color, label=LABELS[process] if index == 0 else None
            )
            left += seconds
        if wall is not None:
            ax.barh(y + 0.17, wall, height=0.3, fill=False, edgecolor="black", label="wall" if index == 0 else None)
            ax.annotate(f"{wall:.1f} s wall", (wall, y + 0.17), xytext=(4, -4), textcoords="offset points", fontsize=8)
        ax.annotate(f"{left:.1f} s CPU", (left, y - 0.17), xytext=(4, -4), textcoords="offset points", fontsize=8)
    ax.set_yticks(range(len(rows)), [label for label, _, _ in reversed(rows)], fontsize=9)
    ax.set_xlabel("seconds")
    machine = results.get("machine", {})
    ax.set_title(
        f"{results.get('nodes', '?'):,} nodes, real slurmctld, emulated EC2 - where the time goes\n"
        f"recorded {results.get('recorded', '?')}, {machine.get('cpus', '?')} cores, "
        f"load {machine.get('load_avg_1m', '?')}",
        fontsize=10,
    )
    ax.grid(True, axis="x", alpha=0.35)
    ax.legend(loc="lower right", fontsize=8)
    fig.savefig(path)
    return path


def plot_results(results_path: Path = RESULTS) -> Path:
    """Read the JSON, write scale-10k.png next to it."""
    results = json.loads(results_path.read_text(encoding="utf-8"))
    return plot(results, results_path.with_suffix(".png"))


if __name__ == "__main__":
    print(plot_results(Path(sys.argv[1]) if len(sys.argv) > 1 else RESULTS))
