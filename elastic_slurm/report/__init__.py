"""Reports on a running cluster from its Prometheus: the timeline picture (`elastic-slurm local report`).

fetch_timeline (timeline.py) reads the series, draw (draw.py) turns them into a PNG; matplotlib is needed only by
draw and imported there.
"""

from elastic_slurm.report.draw import ReportError, draw
from elastic_slurm.report.prometheus import PrometheusError
from elastic_slurm.report.timeline import TIMELINE_QUERIES, Timeline, default_step, fetch_timeline

__all__ = ["TIMELINE_QUERIES", "PrometheusError", "ReportError", "Timeline", "default_step", "draw", "fetch_timeline"]
