"""The timeline picture of a running local cloud: its Prometheus (CloudInfo.prometheus_url) from `start` to now,
drawn to a PNG. `elastic-slurm local report` and `make demo` call this."""

from __future__ import annotations

import time
from pathlib import Path

from elastic_slurm.report.draw import ReportError, draw
from elastic_slurm.report.timeline import default_step, fetch_timeline
from localcloud.cloud import LocalCloud


def write_timeline(cloud: LocalCloud, start: float, out: Path | None = None) -> Path:
    """Draw the cloud's timeline since `start` (epoch seconds) to `out` (default: timeline.png in its state dir);
    ReportError / PrometheusError (one line) when the cloud has no Prometheus or it cannot be read."""
    info = cloud.info()
    url = getattr(info, "prometheus_url", "")
    if not url:
        raise ReportError(f"this local cloud records no Prometheus (no prometheus_url in {cloud.layout.cloud_json})")
    end = time.time()
    start = min(start, end - 1)
    timeline = fetch_timeline(url, start, end, default_step(start, end), cluster=info.cluster)
    return draw(timeline, out if out is not None else cloud.layout.root / "timeline.png")
