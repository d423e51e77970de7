"""End to end in the local cloud: the controller's metrics exporter (assets/systemd/slurm-exporter.service, started
by the controller's user data), scraped every 2 s by a real Prometheus, while EC2 answers capacity errors.

The tests read what an operator's Prometheus and CloudWatch would show: the errors per AZ, the pool's cool-down, the
job's pending reason as it changes, the CloudWatch alarm metrics (put by the exporter under the controller's IAM
role); then every query of the Grafana dashboards (assets/dashboards/) must return data over the run, and the run's
timeline picture (what `make demo` draws) must show it.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import matplotlib.image
import pytest

from elastic_slurm.dashboards import grafana
from elastic_slurm.report import fetch_timeline
from elastic_slurm.report.local_cloud import write_timeline
from localcloud.aws.faults import CapacityFault, Faults
from localcloud.cloud import LocalCloud
from localcloud.ops import LIVE
from localcloud.services import prometheus
from slurm_plugin.exporter import cloudwatch
from slurm_plugin.manifest import load_manifest
from tests.e2e.conftest import assert_no_orphans, cold_nodes, replaced_boots

pytestmark = pytest.mark.e2e
STARTED = time.time()
WINDOW = "5m"  # what the tests look back over (the run is a few minutes)


def _value(url: str, promql: str) -> float:
    """The single value of an instant query (0 when it has no series)."""
    result = prometheus.query(url, promql)
    return sum(float(r["value"][1]) for r in result)


def _wait_value(cloud: LocalCloud, url: str, promql: str, ok: Callable[[float], bool], what: str) -> float:
    cloud.wait_until(lambda: ok(_value(url, promql)), 60, what)
    return _value(url, promql)


def test_prometheus_scrapes_the_controllers_exporter(cloud: LocalCloud) -> None:
    url = cloud.info().prometheus_url
    cloud.wait_until(lambda: set(prometheus.targets_up(url).values()) == {"up"}, 30, "the exporter target up")
    assert _wait_value(cloud, url, 'slurm_up{daemon="slurmctld"}', lambda v: v == 1, "slurmctld up") == 1
    assert _value(url, 'slurm_up{daemon="slurmdbd"}') == 1
    assert _value(url, "sum(elastic_slurm_exporter_source_up)") == _value(
        url, "count(elastic_slurm_exporter_source_up)"
    )
    assert _value(url, 'sum(slurm_nodes{pool="cpu-small"})') == len(
        [n for n in cloud.nodes() if n.startswith("cpu-small-")]
    )


def test_capacity_errors_per_az_and_the_cool_down_show_in_prometheus(cloud: LocalCloud) -> None:
    url = cloud.info().prometheus_url
    errors_1a = 'sum(elastic_slurm_capacity_errors_total{pool="cpu-small", az="us-east-1a"})'
    launched_1b = 'sum(elastic_slurm_instances_launched_total{pool="cpu-small", az="us-east-1b"})'
    # other AZs' errors: earlier tests on this session's cloud (another module on this worker) may have counted some,
    # read from a scrape made after this test started
    started = time.time()
    _wait_value(cloud, url, "max(timestamp(up))", lambda v: v > started, "a scrape after the test started")
    errors_elsewhere = 'sum(elastic_slurm_capacity_errors_total{pool="cpu-small", az!="us-east-1a"})'
    errors_before, launched_before = _value(url, errors_1a), _value(url, launched_1b)
    elsewhere_before = _value(url, errors_elsewhere)
    (node,) = cold_nodes(cloud, 1)
    before = {i.instance_id for i in cloud.instances()}
    cloud.set_faults(Faults(capacity=(CapacityFault(availability_zone="us-east-1a"),)))
    job = cloud.sbatch("-w", node, wrap="true")
    (record,) = cloud.wait_jobs_done([job], timeout=120)
    assert record.state == "COMPLETED" and record.nodes == node
    launched = [i for i in cloud.instances() if i.instance_id not in before]  # the emulated EC2's view
    assert [i.availability_zone for i in launched] == ["us-east-1b"] * (1 + len(replaced_boots(cloud, launched)))
    _wait_value(cloud, url, errors_1a, lambda v: v > errors_before, "a capacity error counted in us-east-1a")
    _wait_value(cloud, url, launched_1b, lambda v: v == launched_before + len(launched), "the launch in us-east-1b")
    assert _value(url, errors_elsewhere) == elsewhere_before
    live = "sum(elastic_slurm_instances)"  # the exporter's live instances agree with the emulated EC2
    _wait_value(cloud, url, live, lambda v: v == len(cloud.instances(LIVE)), "live instances as EC2 has them")
    # no cool-down: the pool's on-demand attempt in us-east-1a was never tried (the spot one found 1b), so the AZ is
    # not known to be out of capacity (slurm_plugin/powersave/planner.py cooldown_azs)
    assert _value(url, 'elastic_slurm_pool_cooling_azs{pool="cpu-small"}') == 0
    assert_no_orphans(cloud)


def _reason(cloud: LocalCloud, job: str) -> str:
    return cloud.slurm("squeue", "-h", "-j", job, "-o", "%r", check=False).strip().split(",")[0]


def test_pending_reason_and_cool_down_of_every_az_follow_a_capacity_outage(cloud: LocalCloud) -> None:
    url = cloud.info().prometheus_url
    (node,) = cold_nodes(cloud, 1)
    before = {i.instance_id for i in cloud.instances()}
    cloud.set_faults(Faults(capacity=(CapacityFault(),)))  # no capacity anywhere: every AZ of the pool cools down
    job = cloud.sbatch("-w", node, wrap="true")
    cloud.wait_until(lambda: cloud.job_restarts(job) >= 1, 90, f"job {job} requeued after the capacity error")
    assert [i for i in cloud.instances() if i.instance_id not in before] == []  # EC2 launched nothing
    reasons: list[str] = []  # the job's pending reason at each look: "Cleaning" passes in a moment, then it settles

    def shown() -> bool:
        reasons.append(_reason(cloud, job))
        query = f'sum(slurm_jobs{{state="pending", reason="{reasons[-1]}"}})'
        return reasons[-1] not in ("", "None", "Cleaning") and _value(url, query) >= 1

    cloud.wait_until(shown, 90, f"job {job} pending in Prometheus with the reason squeue gives")
    reason = reasons[-1]
    pending = f'sum(slurm_jobs{{state="pending", reason="{reason}"}})'
    manifest = load_manifest(cloud.layout.etc / "manifest.json")
    (pool,) = [p for p in manifest.pools if p.key == "cpu-small"]
    azs_of_pool = len({loc.availability_zone for loc in pool.locations})  # both regions' (local-demo.yaml)
    assert azs_of_pool >= 3
    cooled = f'max_over_time(elastic_slurm_pool_cooling_azs{{pool="cpu-small"}}[{WINDOW}])'  # it lasts 20 s here
    _wait_value(cloud, url, cooled, lambda v: v == azs_of_pool, "every AZ of cpu-small in cool-down")
    cloud.clear_faults()
    (record,) = cloud.wait_jobs_done([job], timeout=180)
    assert record.state == "COMPLETED" and record.nodes == node
    launched = [i for i in cloud.instances() if i.instance_id not in before]
    assert len(launched) == 1 + len(replaced_boots(cloud, launched))  # once capacity is back
    _wait_value(cloud, url, pending, lambda v: v == 0, f"no job pending on {reason} any more")
    _wait_value(cloud, url, 'elastic_slurm_pool_cooling_azs{pool="cpu-small"}', lambda v: v == 0, "cool-down over")
    assert _value(url, f'max_over_time(sum(slurm_jobs{{state="pending"}})[{WINDOW}:1s])') >= 1
    assert_no_orphans(cloud)


def test_the_exporter_puts_the_alarm_metrics_into_cloudwatch(cloud: LocalCloud) -> None:
    info = cloud.info()
    watch = cloud.aws().client("cloudwatch", info.regions[0])
    dimensions = [{"Name": cloudwatch.DIMENSION, "Value": info.cluster}]

    def statistic(name: str, stat: str) -> float | None:
        answer = watch.get_metric_statistics(
            Namespace=cloudwatch.NAMESPACE, MetricName=name, Dimensions=dimensions, Statistics=[stat], Period=3600,
            StartTime=datetime.now(UTC) - timedelta(hours=1), EndTime=datetime.now(UTC) + timedelta(minutes=1),
        )  # fmt: skip
        points = answer["Datapoints"]
        return float(points[0][stat]) if points else None

    cloud.wait_until(lambda: statistic(cloudwatch.SLURMCTLD_UP, "Minimum") is not None, 30, "SlurmctldUp published")
    assert statistic(cloudwatch.SLURMCTLD_UP, "Minimum") == 1
    assert statistic(cloudwatch.SLURMDBD_UP, "Minimum") == 1
    assert (statistic(cloudwatch.CAPACITY_ERRORS, "Sum") or 0) >= 2  # the two tests above each caused errors
    assert statistic(cloudwatch.PROTECTED_POOLS, "Maximum") == 0
    assert (statistic(cloudwatch.NODES_UP, "Maximum") or 0) >= 1


def test_every_dashboard_query_returns_data_over_the_run(cloud: LocalCloud) -> None:
    url = cloud.info().prometheus_url
    queries = grafana.file_expressions()  # the JSON files Grafana imports; the license row: test_federation_e2e.py
    assert len(queries) >= 35
    empty = []
    for where, expr in queries:
        promql = expr.replace("$instance", ".+").replace("$__rate_interval", "1m")
        result = prometheus.query_range(url, promql, STARTED, time.time(), 2)
        if not any(series["values"] for series in result):
            empty.append(f"{where}: {promql}")
    assert not empty, "\n".join(empty)


def test_the_timeline_picture_of_the_run_shows_launches_errors_and_jobs(cloud: LocalCloud, tmp_path: Path) -> None:
    timeline = fetch_timeline(cloud.info().prometheus_url, STARTED, time.time(), 1.0, cluster=cloud.info().cluster)
    launched_azs = {az for az, points in timeline.launches.items() if points and points[-1][1] > 0}
    assert "us-east-1b" in launched_azs  # where the capacity errors in us-east-1a sent the node
    assert timeline.capacity_errors["us-east-1a"][-1][1] >= 1
    assert max(v for _, v in timeline.jobs.get("pending", [])) >= 1
    assert max(v for points in timeline.nodes_up.values() for _, v in points) >= 1
    path = write_timeline(cloud, STARTED, tmp_path / "timeline.png")  # what `make demo` and `local report` call
    pixels = matplotlib.image.imread(path)
    assert pixels.shape[1] >= 1000
    colours = {tuple(round(float(c), 2) for c in px[:3]) for row in pixels[::7] for px in row[::7]}
    assert len(colours) > 20, "a picture with lines, areas and legends, not a blank canvas"
