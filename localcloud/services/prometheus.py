"""A real Prometheus (Debian's `prometheus` package, on the host) scraping the controller's metrics exporter.

`local up` starts it with its own configuration and TSDB under the state dir (`prometheus/`), listening on
127.0.0.1 only, scraping the exporter (assets/systemd/slurm-exporter.service, run on the controller from its user
data) every SCRAPE_SECONDS. On AWS the operator's Prometheus or Amazon Managed Prometheus scrapes the same exporter
(docs/observability.md); the dashboards' queries (assets/dashboards/) and the timeline picture run against it here.
"""

from __future__ import annotations

import shutil
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from elastic_slurm.report.prometheus import PrometheusError, api
from localcloud.layout import Layout
from localcloud.services import procs

BINARY = Path("/usr/bin/prometheus")
SCRAPE_SECONDS = 2  # the demo and the tests run for minutes, not hours (and 2 s leaves a loaded test machine time
# for the exporter's five Slurm calls: a scrape that times out records nothing); see docs/local-cloud.md
START_TIMEOUT = 60
__all__ = ["PrometheusError", "query", "query_range", "start", "targets_up"]


def config_text(exporter: str) -> str:
    """prometheus.yml scraping `exporter` (HOST:PORT)."""
    return (
        "global:\n"
        f"  scrape_interval: {SCRAPE_SECONDS}s\n"
        f"  evaluation_interval: {SCRAPE_SECONDS}s\n"
        "scrape_configs:\n"
        "  - job_name: elastic-slurm\n"
        f"    static_configs:\n      - targets: ['{exporter}']\n"
    )


def start(layout: Layout, port: int, exporter: str) -> str:
    """Start Prometheus; returns its base URL once it answers ready."""
    if not BINARY.exists():
        raise PrometheusError(f"{BINARY} is missing: apt-get install prometheus (scripts/setup.sh installs it)")
    home = layout.root / "prometheus"
    shutil.rmtree(home / "data", ignore_errors=True)
    home.mkdir(parents=True, exist_ok=True)
    (home / "prometheus.yml").write_text(config_text(exporter))
    url = f"http://127.0.0.1:{port}"
    argv = [
        str(BINARY),
        f"--config.file={home / 'prometheus.yml'}",
        f"--storage.tsdb.path={home / 'data'}",
        f"--web.listen-address=127.0.0.1:{port}",
        "--web.enable-lifecycle",
    ]
    procs.spawn(argv, layout.log_file("prometheus"), layout.pid_file("prometheus"))
    if not procs.wait_until(lambda: _ready(url), START_TIMEOUT, 0.25):
        tail = layout.log_file("prometheus").read_text(errors="replace").strip().splitlines()[-3:]
        raise PrometheusError(f"prometheus did not become ready on {url}: {' | '.join(tail)}")
    return url


def _ready(url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/-/ready", timeout=2) as answer:
            return bool(answer.status == 200)
    except (OSError, urllib.error.URLError):
        return False


def query(url: str, promql: str, at: float | None = None) -> list[dict[str, Any]]:
    """An instant query's raw result vector (PrometheusError naming the server when it fails)."""
    params = {"query": promql, **({"time": str(at)} if at is not None else {})}
    return list(api(url, "query", params).get("result") or [])


def query_range(url: str, promql: str, start: float, end: float, step: float) -> list[dict[str, Any]]:
    """A range query's raw result matrix (NaN samples kept: a dashboard draws them as gaps, they are still data)."""
    params = {"query": promql, "start": str(start), "end": str(end), "step": str(step)}
    return list(api(url, "query_range", params).get("result") or [])


def targets_up(url: str) -> dict[str, str]:
    """Scrape target → health (up/down/unknown)."""
    return {t["scrapeUrl"]: t["health"] for t in api(url, "targets", {}).get("activeTargets", [])}
