"""Draw a Timeline as one PNG: three panels sharing the time axis (seconds since the window's start).

(a) Slurm nodes up per pool (lines) and live instances per AZ (stacked areas), (b) jobs pending, configuring (their nodes boot) and running,
(c) instances launched per AZ (stacked areas), terminated, and capacity errors per AZ (right axis: a handful of errors stays visible next to thousands of launches).
matplotlib is imported here, lazily, through its object API (Figure + the Agg canvas): no display, no pyplot global
state, and `elastic-slurm` works on a controller without matplotlib.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from elastic_slurm.report.prometheus import Points
from elastic_slurm.report.timeline import Series, Timeline

SIZE_IN = (12.0, 9.0)  # at DPI: 1200 x 900 px
DPI = 100
AZ_COLORS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#bcbd22")
POOL_COLORS = ("#333333", "#d62728", "#7f7f7f", "#006d2c", "#54278f", "#a6761d")
JOB_COLORS = {"pending": "#ff7f0e", "configuring": "#9467bd", "running": "#2ca02c"}
LEGEND_X = 1.07  # legends right of the panels, clear of panel (c)'s right axis, aligned in every panel


class ReportError(RuntimeError):
    """The picture cannot be drawn (one line)."""


def _colors(labels: list[str], palette: tuple[str, ...]) -> dict[str, str]:
    return {label: palette[i % len(palette)] for i, label in enumerate(sorted(labels))}


def _xy(points: Points, start: float) -> tuple[list[float], list[float]]:
    return [t - start for t, _ in points], [v for _, v in points]


def _increases(values: list[float]) -> list[int]:
    """Indices where a cumulative count went up (where to put a marker)."""
    return [i for i, v in enumerate(values) if v > (values[i - 1] if i else 0)]


def _plot(
    ax: Any,
    timeline: Timeline,
    series: Series,
    label: str,
    colors: dict[str, str],
    mark_increases: bool = False,
    **style: Any,
) -> int:
    """Step lines of one series group (markers where a count went up, if asked); returns how many were drawn."""
    drawn = 0
    for name, points in series.items():
        if not points:
            continue
        x, y = _xy(points, timeline.start)
        marks = _increases(y) if mark_increases else None
        color = colors.get(name, "#000000")
        ax.plot(x, y, drawstyle="steps-post", color=color, label=label.format(name), markevery=marks, **style)
        drawn += 1
    return drawn


def _stack(ax: Any, timeline: Timeline, series: Series, label: str, colors: dict[str, str]) -> int:
    """Step areas of one series group stacked on each other (AZs with equal counts would hide each other as lines);
    returns how many were drawn."""
    names = [name for name, points in series.items() if points]
    times = sorted({t for name in names for t, _ in series[name]})
    if not times:
        return 0
    x = [t - timeline.start for t in times]
    lower = [0.0] * len(times)
    for name in names:
        values = dict(series[name])
        upper = [low + values.get(t, 0.0) for low, t in zip(lower, times, strict=True)]
        color = colors.get(name, "#000000")
        ax.fill_between(x, lower, upper, step="post", color=color, alpha=0.35, linewidth=0, label=label.format(name))
        ax.plot(x, upper, drawstyle="steps-post", color=color, linewidth=1.0)
        lower = upper
    return len(names)


def _finish(ax: Any, drawn: int, missing: list[str], ylabel: str, extra_handles: Any = None) -> None:
    """Axis label, integer ticks from 0, a legend right of the panel, and "no data" notes."""
    from matplotlib.ticker import MaxNLocator

    ax.set_ylabel(ylabel)
    ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_ylim(bottom=0)
    ax.grid(True, alpha=0.3)
    if drawn == 0:
        ax.text(0.5, 0.5, "no data", transform=ax.transAxes, ha="center", va="center", fontsize=16, color="#888888")
    elif missing:
        ax.text(
            0.99,
            0.97,
            "no data: " + ", ".join(missing),
            transform=ax.transAxes,
            ha="right",
            va="top",
            fontsize=8,
            color="#888888",
        )
    handles, labels = ax.get_legend_handles_labels()
    for handle in extra_handles or []:
        handles.append(handle)
        labels.append(handle.get_label())
    if handles:
        ax.legend(handles, labels, loc="upper left", bbox_to_anchor=(LEGEND_X, 1.0), fontsize=8, frameon=False)


def draw(timeline: Timeline, path: str | Path) -> Path:
    """Write the timeline picture to `path` (PNG, 1200 x 900 px); returns the path."""
    try:
        from matplotlib.figure import Figure
        from matplotlib.ticker import MaxNLocator
    except ImportError:
        raise ReportError("matplotlib is not installed: pip install matplotlib") from None
    out = Path(path)
    fig = Figure(figsize=SIZE_IN, dpi=DPI, layout="constrained")
    nodes_ax, jobs_ax, events_ax = fig.subplots(3, 1, sharex=True)
    azs = sorted({*timeline.instances, *timeline.launches, *timeline.capacity_errors})
    az_colors = _colors(azs, AZ_COLORS)

    drawn = _plot(
        nodes_ax,
        timeline,
        timeline.nodes_up,
        "nodes up, pool {}",
        _colors(list(timeline.nodes_up), POOL_COLORS),
        linewidth=2.2,
    )
    instances = _stack(nodes_ax, timeline, timeline.instances, "instances, {} (stacked)", az_colors)
    missing = [name for name, n in (("nodes up", drawn), ("instances", instances)) if n == 0]
    _finish(nodes_ax, drawn + instances, missing, "nodes / instances")
    nodes_ax.set_title("(a) Slurm nodes up per pool, live instances per AZ", loc="left", fontsize=10)

    jobs = _plot(jobs_ax, timeline, timeline.jobs, "jobs {}", JOB_COLORS, linewidth=2)
    _finish(jobs_ax, jobs, [], "jobs")
    jobs_ax.set_title(
        "(b) jobs pending, configuring (waiting for their nodes to boot), running", loc="left", fontsize=10
    )

    launches = _stack(events_ax, timeline, timeline.launches, "launched, {} (stacked)", az_colors)
    ends = _plot(
        events_ax,
        timeline,
        timeline.terminations,
        "terminated ({})",
        {"total": "#000000"},
        linestyle="--",
        linewidth=1.6,
    )
    errors_ax = events_ax.twinx()
    errors = _plot(
        errors_ax,
        timeline,
        timeline.capacity_errors,
        "capacity errors, {} (right axis)",
        az_colors,
        linestyle=":",
        linewidth=1.6,
        marker="X",
        markersize=9,
        mark_increases=True,
    )
    errors_ax.set_ylabel("capacity errors")
    errors_ax.set_ylim(bottom=0)
    errors_ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    missing = [
        name for name, n in (("launches", launches), ("terminations", ends), ("capacity errors", errors)) if n == 0
    ]
    _finish(events_ax, launches + ends + errors, missing, "instances", errors_ax.get_legend_handles_labels()[0])
    events_ax.set_title("(c) since the start: instances launched, terminated; capacity errors", loc="left", fontsize=10)

    events_ax.set_xlim(0, max(timeline.end - timeline.start, 1.0))
    clock = time.strftime("%H:%M:%S", time.gmtime(timeline.start))
    events_ax.set_xlabel(f"seconds since {clock} UTC (step {timeline.step:g} s)")
    date = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(timeline.start))
    fig.suptitle(f"{timeline.cluster or 'cluster'} — {date}", fontsize=14)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, format="png")
    return out
