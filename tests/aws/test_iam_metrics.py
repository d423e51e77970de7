"""The controller's `PutClusterMetrics` statement (stacks/node_policies.py): the exporter may put CloudWatch metrics in
the ElasticSlurm namespace and in no other — evaluated with the real IAM evaluator (conditions) and enforced by the
emulated AWS's IAM gate (the action) on the publisher's own calls."""

from __future__ import annotations

import logging
import uuid
from datetime import UTC, datetime, timedelta

import pytest

from localcloud.aws.emulated_aws import EmulatedAws
from localcloud.aws.iam import ACCOUNT, Credentials, role_documents, without_statement
from localcloud.aws.iam_requests import AuthzRequest
from slurm_plugin.exporter.cloudwatch import DIMENSION, NAMESPACE, SLURMCTLD_UP, CloudWatchPublisher
from tests.aws.conftest import ENFORCED_REGION, ENFORCED_TARGETS, signed_client
from tests.aws.iam_eval import evaluate

REGION = ENFORCED_REGION
TARGETS = ENFORCED_TARGETS


def _put(namespace: str | None) -> AuthzRequest:
    context: dict[str, str | list[str]] = {"cloudwatch:namespace": namespace} if namespace is not None else {}
    return AuthzRequest("cloudwatch:PutMetricData", "*", context, f"PutMetricData in {namespace}")


def test_controller_may_put_metrics_in_the_elasticslurm_namespace_only() -> None:
    documents = role_documents("east", TARGETS)
    requests = [_put(NAMESPACE), _put("AWS/EC2"), _put("Other"), _put(None)]
    assert evaluate({"controller": documents["controller"]}, requests, ACCOUNT) == [
        "Allowed",
        "ImplicitlyDenied",
        "ImplicitlyDenied",
        "ImplicitlyDenied",
    ]
    without = without_statement(documents["controller"], "PutClusterMetrics")
    assert evaluate({"controller": without}, [_put(NAMESPACE)], ACCOUNT) == ["ImplicitlyDenied"]
    assert evaluate({"compute": documents["compute"]}, [_put(NAMESPACE)], ACCOUNT) == ["ImplicitlyDenied"]


def _maxima(aws: EmulatedAws, cluster: str, now: datetime) -> list[float]:
    points = aws.client("cloudwatch", REGION).get_metric_statistics(
        Namespace=NAMESPACE,
        MetricName=SLURMCTLD_UP,
        Dimensions=[{"Name": DIMENSION, "Value": cluster}],
        StartTime=now - timedelta(minutes=5),
        EndTime=now + timedelta(minutes=5),
        Period=60,
        Statistics=["Maximum"],
    )["Datapoints"]
    return [p["Maximum"] for p in points]


def test_the_publisher_signing_as_the_controller_gets_through_the_iam_gate_and_compute_does_not(
    enforcing: tuple[EmulatedAws, dict[str, Credentials]], caplog: pytest.LogCaptureFixture
) -> None:
    aws, principals = enforcing
    now = datetime.now(UTC)
    controller, compute = f"ctl-{uuid.uuid4().hex[:6]}", f"cmp-{uuid.uuid4().hex[:6]}"
    with caplog.at_level(logging.WARNING, logger="slurm_plugin.exporter.cloudwatch"):
        CloudWatchPublisher(signed_client(aws, principals["controller"], "cloudwatch"), controller).publish(
            {SLURMCTLD_UP: 1}, now
        )
        assert caplog.records == []
        CloudWatchPublisher(signed_client(aws, principals["compute"], "cloudwatch"), compute).publish(
            {SLURMCTLD_UP: 1}, now
        )
    assert _maxima(aws, controller, now) == [1]
    assert _maxima(aws, compute, now) == []
    (denied,) = [r.getMessage() for r in caplog.records]
    assert "AccessDenied" in denied and "cloudwatch:PutMetricData" in denied
