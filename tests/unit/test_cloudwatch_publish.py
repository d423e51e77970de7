"""The exporter's CloudWatch publisher (slurm_plugin/exporter/cloudwatch.py) against moto's CloudWatch: values arrive
in the ElasticSlurm namespace under the cluster's dimension with their units, counters become deltas, and a failing
CloudWatch never raises."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError
from moto import mock_aws

from slurm_plugin.exporter.cloudwatch import (
    CAPACITY_ERRORS,
    DIMENSION,
    FAILED_BOOTS,
    INFINITY,
    JOBS_PENDING,
    LICENSE_SYNC_AGE,
    NAMESPACE,
    NODES_UP,
    SLURMCTLD_UP,
    UNITS,
    CloudWatchPublisher,
    CounterDeltas,
    cloudwatch_client,
)
from stacks.cluster_alarms import license_sync_threshold_s

REGION = "us-east-1"
NOW = datetime.now(UTC).replace(second=0, microsecond=0)


@pytest.fixture
def cloudwatch(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """moto's CloudWatch, in process."""
    monkeypatch.delenv("AWS_ENDPOINT_URL", raising=False)
    with mock_aws():
        yield boto3.client("cloudwatch", region_name=REGION)


def _statistics(client: Any, cluster: str, name: str, stat: str = "Sum") -> list[float]:
    points = client.get_metric_statistics(
        Namespace=NAMESPACE,
        MetricName=name,
        Dimensions=[{"Name": DIMENSION, "Value": cluster}],
        StartTime=NOW - timedelta(minutes=10),
        EndTime=NOW + timedelta(minutes=10),
        Period=60,
        Statistics=[stat],
    )["Datapoints"]
    return [p[stat] for p in sorted(points, key=lambda p: p["Timestamp"])]


def test_values_arrive_in_the_namespace_with_the_cluster_dimension_and_units(cloudwatch: Any) -> None:
    values = {SLURMCTLD_UP: 1, NODES_UP: 12, JOBS_PENDING: 40, CAPACITY_ERRORS: 3, LICENSE_SYNC_AGE: 95.5}
    CloudWatchPublisher(cloudwatch, "east").publish(values, NOW)
    listed = cloudwatch.list_metrics(Namespace=NAMESPACE)["Metrics"]
    assert {m["MetricName"] for m in listed} == set(values)
    assert all(m["Dimensions"] == [{"Name": DIMENSION, "Value": "east"}] for m in listed)
    for name, value in values.items():
        assert _statistics(cloudwatch, "east", name) == [value], name
    ages = cloudwatch.get_metric_statistics(
        Namespace=NAMESPACE,
        MetricName=LICENSE_SYNC_AGE,
        Dimensions=[{"Name": DIMENSION, "Value": "east"}],
        StartTime=NOW - timedelta(minutes=1),
        EndTime=NOW + timedelta(minutes=1),
        Period=60,
        Statistics=["Maximum"],
        Unit="Seconds",
    )["Datapoints"]
    assert [p["Maximum"] for p in ages] == [95.5]


def test_units_are_count_except_the_license_sync_age_in_seconds() -> None:
    assert {name for name, unit in UNITS.items() if unit != "Count"} == {LICENSE_SYNC_AGE}


def test_one_put_metric_data_call_per_publish_and_other_clusters_stay_apart(
    cloudwatch: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[dict[str, Any]] = []
    real = cloudwatch.put_metric_data

    def counting(**kwargs: Any) -> Any:
        calls.append(kwargs)
        return real(**kwargs)

    monkeypatch.setattr(cloudwatch, "put_metric_data", counting)
    CloudWatchPublisher(cloudwatch, "east").publish({name: 1 for name in UNITS}, NOW)
    CloudWatchPublisher(cloudwatch, "west").publish({SLURMCTLD_UP: 0}, NOW)
    assert [len(c["MetricData"]) for c in calls] == [len(UNITS), 1]
    assert _statistics(cloudwatch, "east", SLURMCTLD_UP) == [1]
    assert _statistics(cloudwatch, "west", SLURMCTLD_UP) == [0]


def test_unknown_metric_name_is_rejected_before_any_call(cloudwatch: Any) -> None:
    with pytest.raises(ValueError, match="SlurmctldUpp"):
        CloudWatchPublisher(cloudwatch, "east").publish({SLURMCTLD_UP: 1, "SlurmctldUpp": 1}, NOW)
    assert cloudwatch.list_metrics(Namespace=NAMESPACE)["Metrics"] == []


def test_non_finite_values_are_left_out_and_the_rest_published(
    cloudwatch: Any, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING):
        CloudWatchPublisher(cloudwatch, "east").publish({SLURMCTLD_UP: 1, LICENSE_SYNC_AGE: float("nan")}, NOW)
    assert {m["MetricName"] for m in cloudwatch.list_metrics(Namespace=NAMESPACE)["Metrics"]} == {SLURMCTLD_UP}
    assert "LicenseSyncAgeSeconds" in caplog.text


def test_infinity_is_sent_as_a_large_finite_value_above_every_alarm_threshold(cloudwatch: Any) -> None:
    CloudWatchPublisher(cloudwatch, "east").publish({LICENSE_SYNC_AGE: float("inf")}, NOW)  # never synced
    assert _statistics(cloudwatch, "east", LICENSE_SYNC_AGE, "Maximum") == [INFINITY]
    assert license_sync_threshold_s(["weekly"]) < INFINITY  # even the threshold of a schedule not understood


def test_a_naive_timestamp_is_taken_as_utc(cloudwatch: Any) -> None:
    CloudWatchPublisher(cloudwatch, "east").publish({NODES_UP: 7}, NOW.replace(tzinfo=None))
    assert _statistics(cloudwatch, "east", NODES_UP, "Maximum") == [7]


def _closed_port() -> int:
    """The discard port: nobody listens there (a port the kernel just handed out may be handed out again, and in
    use, by the time the test connects)."""
    return 9


def test_unreachable_cloudwatch_logs_one_warning_line_and_does_not_raise(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    for key, value in {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing"}.items():
        monkeypatch.setenv(key, value)
    client = cloudwatch_client(REGION, endpoint_url=f"http://127.0.0.1:{_closed_port()}")
    with caplog.at_level(logging.WARNING, logger="slurm_plugin.exporter.cloudwatch"):
        CloudWatchPublisher(client, "east").publish({SLURMCTLD_UP: 1}, NOW)
    (record,) = [r for r in caplog.records if r.name == "slurm_plugin.exporter.cloudwatch"]
    assert record.levelno == logging.WARNING
    assert "EndpointConnectionError" in record.getMessage() and "\n" not in record.getMessage()


def test_a_refused_call_logs_the_error_code_and_does_not_raise(
    cloudwatch: Any, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    def refuse(**_: Any) -> Any:
        error = {"Error": {"Code": "AccessDenied", "Message": "not authorized to perform:\ncloudwatch:PutMetricData"}}
        raise ClientError(error, "PutMetricData")  # type: ignore[arg-type]

    monkeypatch.setattr(cloudwatch, "put_metric_data", refuse)
    with caplog.at_level(logging.WARNING, logger="slurm_plugin.exporter.cloudwatch"):
        CloudWatchPublisher(cloudwatch, "east").publish({SLURMCTLD_UP: 1}, NOW)
    (message,) = [r.getMessage() for r in caplog.records if r.name == "slurm_plugin.exporter.cloudwatch"]
    assert "AccessDenied: not authorized to perform: cloudwatch:PutMetricData" in message


def test_counter_deltas_first_publish_zero_then_increments_and_reset_sends_the_new_total() -> None:
    deltas = CounterDeltas()
    assert deltas.deltas({CAPACITY_ERRORS: 7, FAILED_BOOTS: 2}) == {CAPACITY_ERRORS: 0, FAILED_BOOTS: 0}
    assert deltas.deltas({CAPACITY_ERRORS: 10, FAILED_BOOTS: 2}) == {CAPACITY_ERRORS: 3, FAILED_BOOTS: 0}
    assert deltas.deltas({CAPACITY_ERRORS: 4, FAILED_BOOTS: 5}) == {CAPACITY_ERRORS: 4, FAILED_BOOTS: 3}  # restarted
    assert deltas.deltas({CAPACITY_ERRORS: 4}) == {CAPACITY_ERRORS: 0}
    assert deltas.delta("NewCounter", 50) == 0  # a name seen for the first time later also starts at 0


def test_published_deltas_sum_to_the_errors_since_start(cloudwatch: Any) -> None:
    deltas, publisher = CounterDeltas(), CloudWatchPublisher(cloudwatch, "east")
    for minute, total in enumerate((5, 5, 9, 12)):
        publisher.publish(deltas.deltas({CAPACITY_ERRORS: total}), NOW + timedelta(minutes=minute))
    assert _statistics(cloudwatch, "east", CAPACITY_ERRORS) == [0, 0, 4, 3]
