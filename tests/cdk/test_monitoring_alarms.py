"""The alarms and dashboard on the exporter's CloudWatch metrics (stacks/cluster_alarms.py) and the controller's
permission to publish them, on the synthesized cluster stacks: federation (accounting and synced licenses, cluster
`east`), minimal (accounting, no licenses), remote-region (neither, cluster `burst`)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from aws_cdk.assertions import Match, Template

from slurm_plugin.exporter.cloudwatch import (
    CAPACITY_ERRORS,
    DIMENSION,
    FAILED_BOOTS,
    JOBS_PENDING,
    JOBS_RUNNING,
    LICENSE_SYNC_AGE,
    NAMESPACE,
    NODES_UP,
    PROTECTED_POOLS,
    SLURMCTLD_UP,
    SLURMDBD_UP,
)
from tests.cdk.conftest import Assembly

pytestmark = pytest.mark.cdk

STACKS = {"federation": "es-east-cluster", "minimal": "es-minimal-cluster", "remote-region": "es-burst-cluster"}
CLUSTERS = {"federation": "east", "minimal": "minimal", "remote-region": "burst"}


@pytest.fixture(scope="module")
def stacks(assemblies: dict[str, Assembly]) -> dict[str, dict[str, Any]]:
    """Config → its cluster stack's template (as JSON), each synthesized once per session."""
    return {config: assemblies[config].template_json(stack) for config, stack in STACKS.items()}


def _alerts_topic(template: dict[str, Any], cluster: str) -> str:
    (logical_id,) = [
        str(key)
        for key, resource in template["Resources"].items()
        if resource["Type"] == "AWS::SNS::Topic"
        and resource["Properties"].get("DisplayName") == f"Slurm cluster {cluster} alerts"
    ]
    return logical_id


def _alarm(config: str, metric: str, **expected: Any) -> dict[str, Any]:
    """The alarm's expected properties: our namespace, the cluster's dimension, the alert topic as its action."""
    return {
        "Namespace": NAMESPACE,
        "MetricName": metric,
        "Dimensions": [{"Name": DIMENSION, "Value": CLUSTERS[config]}],
        **expected,
    }


def _alarms_on(template: dict[str, Any], metric: str) -> dict[str, Any]:
    found: dict[str, Any] = Template.from_json(template).find_resources(
        "AWS::CloudWatch::Alarm", {"Properties": {"Namespace": NAMESPACE, "MetricName": metric}}
    )
    return found


@pytest.mark.parametrize("config", list(STACKS))
def test_controller_capacity_boot_and_protection_alarms_notify_the_alert_topic(
    stacks: dict[str, dict[str, Any]], config: str
) -> None:
    template = Template.from_json(stacks[config])
    actions = [{"Ref": _alerts_topic(stacks[config], CLUSTERS[config])}]
    every_minute = {"Statistic": "Maximum", "Period": 60}
    expected = [
        _alarm(
            config,
            SLURMCTLD_UP,
            **every_minute,
            Threshold=1,
            ComparisonOperator="LessThanThreshold",
            EvaluationPeriods=3,
            DatapointsToAlarm=3,
            TreatMissingData="breaching",  # no report: the controller or its exporter is gone
        ),
        _alarm(
            config,
            CAPACITY_ERRORS,
            Statistic="Sum",
            Period=300,
            Threshold=10,
            ComparisonOperator="GreaterThanOrEqualToThreshold",
            EvaluationPeriods=1,
            TreatMissingData="notBreaching",
        ),
        _alarm(
            config,
            FAILED_BOOTS,
            Statistic="Sum",
            Period=900,
            Threshold=3,
            ComparisonOperator="GreaterThanOrEqualToThreshold",
            EvaluationPeriods=1,
        ),
        _alarm(
            config, PROTECTED_POOLS, **every_minute, Threshold=1, ComparisonOperator="GreaterThanOrEqualToThreshold"
        ),
    ]
    for properties in expected:
        template.has_resource_properties("AWS::CloudWatch::Alarm", {**properties, "AlarmActions": actions})
    for metric in (SLURMCTLD_UP, CAPACITY_ERRORS, FAILED_BOOTS, PROTECTED_POOLS):
        assert len(_alarms_on(stacks[config], metric)) == 1, (config, metric)


def test_daemon_alarms_are_created_after_the_controllers_reported_healthy(stacks: dict[str, dict[str, Any]]) -> None:
    # missing data counts as down: created earlier, they would alarm while the controllers boot
    for config in ("federation", "minimal"):
        for metric in (SLURMCTLD_UP, SLURMDBD_UP):
            ((_, alarm),) = _alarms_on(stacks[config], metric).items()
            waits = [
                key for key in stacks[config]["Resources"] if key.startswith("Controller") and key.endswith("Ready")
            ]
            assert waits and set(waits) <= set(alarm["DependsOn"]), (config, metric)
    for metric in (CAPACITY_ERRORS, FAILED_BOOTS, PROTECTED_POOLS):
        ((_, alarm),) = _alarms_on(stacks["minimal"], metric).items()
        assert "DependsOn" not in alarm, metric


def test_slurmdbd_alarm_only_with_accounting(stacks: dict[str, dict[str, Any]]) -> None:
    for config in ("federation", "minimal"):
        Template.from_json(stacks[config]).has_resource_properties(
            "AWS::CloudWatch::Alarm",
            _alarm(
                config,
                SLURMDBD_UP,
                Statistic="Maximum",
                Period=60,
                Threshold=1,
                ComparisonOperator="LessThanThreshold",
                EvaluationPeriods=3,
                TreatMissingData="breaching",
                AlarmActions=[{"Ref": _alerts_topic(stacks[config], CLUSTERS[config])}],
            ),
        )
    assert _alarms_on(stacks["remote-region"], SLURMDBD_UP) == {}  # accounting: none


def test_license_sync_alarm_only_with_synced_licenses_at_three_runs_of_the_schedule(
    stacks: dict[str, dict[str, Any]],
) -> None:
    Template.from_json(stacks["federation"]).has_resource_properties(
        "AWS::CloudWatch::Alarm",
        _alarm(
            "federation",
            LICENSE_SYNC_AGE,
            Statistic="Maximum",
            Period=60,
            Threshold=900,  # sync_schedule "*:0/5": three missed runs
            ComparisonOperator="GreaterThanThreshold",
            AlarmActions=[{"Ref": _alerts_topic(stacks["federation"], "east")}],
        ),
    )
    assert _alarms_on(stacks["minimal"], LICENSE_SYNC_AGE) == {}
    assert _alarms_on(stacks["remote-region"], LICENSE_SYNC_AGE) == {}


def _dashboard_body(template: dict[str, Any]) -> dict[str, Any]:
    """The dashboard's JSON with each CloudFormation token replaced by a readable stand-in (alarm ARNs by the
    alarm's logical id)."""
    (dashboard,) = Template.from_json(template).find_resources("AWS::CloudWatch::Dashboard").values()
    body = dashboard["Properties"]["DashboardBody"]
    parts = body["Fn::Join"][1] if isinstance(body, dict) else [body]
    text = "".join(
        part if isinstance(part, str) else part["Fn::GetAtt"][0] if "Fn::GetAtt" in part else "TOKEN" for part in parts
    )
    result: dict[str, Any] = json.loads(text)
    return result


def test_dashboard_graphs_nodes_jobs_capacity_errors_boots_and_shows_every_new_alarm(
    stacks: dict[str, dict[str, Any]],
) -> None:
    for config in STACKS:
        Template.from_json(stacks[config]).resource_count_is("AWS::CloudWatch::Dashboard", 1)
        widgets = _dashboard_body(stacks[config])["widgets"]
        graphed = {
            (metric[0], metric[1], metric[2], metric[3])
            for w in widgets
            for metric in w["properties"].get("metrics", [])
            if metric[0] == NAMESPACE
        }
        cluster = CLUSTERS[config]
        for name in (NODES_UP, JOBS_PENDING, JOBS_RUNNING, CAPACITY_ERRORS, FAILED_BOOTS):
            assert (NAMESPACE, name, DIMENSION, cluster) in graphed, (config, name)
        shown = {alarm for w in widgets for alarm in w["properties"].get("alarms", [])}
        ours = {
            key
            for key, resource in stacks[config]["Resources"].items()
            if resource["Type"] == "AWS::CloudWatch::Alarm" and resource["Properties"].get("Namespace") == NAMESPACE
        }
        assert len(ours) == {"federation": 6, "minimal": 5, "remote-region": 4}[config]
        assert ours <= shown, config


def test_controller_may_put_metrics_only_in_the_elasticslurm_namespace_and_compute_not_at_all(
    stacks: dict[str, dict[str, Any]],
) -> None:
    statement = {
        "Sid": "PutClusterMetrics",
        "Effect": "Allow",
        "Action": "cloudwatch:PutMetricData",
        "Resource": "*",
        "Condition": {"StringEquals": {"cloudwatch:namespace": NAMESPACE}},
    }
    for config in STACKS:
        template = Template.from_json(stacks[config])
        template.has_resource_properties(
            "AWS::IAM::Policy",
            {
                "PolicyDocument": {"Statement": Match.array_with([statement])},
                "Roles": [{"Ref": Match.string_like_regexp("^ControllerRole")}],
            },
        )
        granting = [
            policy
            for policy in template.find_resources("AWS::IAM::Policy").values()
            if any(s.get("Sid") == "PutClusterMetrics" for s in policy["Properties"]["PolicyDocument"]["Statement"])
        ]
        (policy,) = granting  # the controller role's policy only: no compute or login role publishes metrics
        assert [r["Ref"][: len("ControllerRole")] for r in policy["Properties"]["Roles"]] == ["ControllerRole"]
