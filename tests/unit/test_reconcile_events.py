"""SQS/EventBridge messages → actions: spot interruptions and rebalance requeue at once, retirements drain."""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import UTC, datetime

from slurm_plugin.manager.events import event_actions, parse_message
from slurm_plugin.manager.model import Instance, Kind, Node

NOW = datetime(2026, 11, 22, 3, 0, tzinfo=UTC)
NODES = [
    Node("cpu-c7i-1", "ALLOCATED", frozenset({"CLOUD"}), "127.1.0.1"),
    Node("cpu-c7i-2", "IDLE", frozenset({"CLOUD", "POWERED_DOWN"}), "127.1.0.2"),
]
INSTANCES = [
    Instance("i-1", "us-east-1", "running", "127.1.0.1", NOW, "alpha", "cpu-c7i"),
    Instance("i-2", "us-east-1", "running", "127.1.0.2", NOW, "alpha", "cpu-c7i"),
]


def bridge(detail_type: str, detail: Mapping[str, object], source: str = "aws.ec2") -> str:
    return json.dumps({"version": "0", "detail-type": detail_type, "source": source, "region": "us-east-1",
                       "time": "2026-11-22T03:00:00Z", "detail": detail})  # fmt: skip


def test_spot_interruption_warning_powers_the_node_down_and_requeues_at_once() -> None:
    events = parse_message(
        bridge("EC2 Spot Instance Interruption Warning", {"instance-id": "i-1", "instance-action": "terminate"})
    )
    actions = event_actions(events, NODES, INSTANCES)
    assert [(a.kind, a.target, a.counter) for a in actions] == [(Kind.POWER_DOWN, "cpu-c7i-1", "spot_interruptions")]
    assert actions[0].reason.startswith("(Spot:Interruption)")


def test_rebalance_recommendation_in_an_sns_envelope_powers_the_node_down() -> None:
    inner = bridge("EC2 Instance Rebalance Recommendation", {"instance-id": "i-1"})
    events = parse_message(json.dumps({"Type": "Notification", "Message": inner}))
    assert [(a.kind, a.target) for a in event_actions(events, NODES, INSTANCES)] == [(Kind.POWER_DOWN, "cpu-c7i-1")]


def test_state_change_to_terminated_powers_the_node_down() -> None:
    events = parse_message(
        bridge("EC2 Instance State-change Notification", {"instance-id": "i-1", "state": "terminated"})
    )
    actions = event_actions(events, NODES, INSTANCES)
    assert [(a.kind, a.reason.split(")")[0]) for a in actions] == [(Kind.POWER_DOWN, "(Manager:InstanceGone")]


def test_state_change_to_running_needs_nothing() -> None:
    events = parse_message(bridge("EC2 Instance State-change Notification", {"instance-id": "i-1", "state": "running"}))
    assert event_actions(events, NODES, INSTANCES) == []


def test_scheduled_retirement_health_event_drains_the_node() -> None:
    detail = {"service": "EC2", "eventTypeCode": "AWS_EC2_INSTANCE_RETIREMENT_SCHEDULED",
              "affectedEntities": [{"entityValue": "i-1"}]}  # fmt: skip
    actions = event_actions(parse_message(bridge("AWS Health Event", detail, "aws.health")), NODES, INSTANCES)
    assert [(a.kind, a.target) for a in actions] == [(Kind.DRAIN, "cpu-c7i-1")]
    assert "RETIREMENT" in actions[0].reason


def test_event_for_an_instance_no_node_claims_is_ignored() -> None:
    for iid in ("i-2", "i-unknown"):  # i-2's node is powered down: it claims nothing
        events = parse_message(bridge("EC2 Spot Instance Interruption Warning", {"instance-id": iid}))
        assert event_actions(events, NODES, INSTANCES) == []


def test_malformed_and_unrelated_messages_give_no_events() -> None:
    assert parse_message("not json") == []
    assert parse_message("[]") == []
    assert parse_message(bridge("EC2 AMI State Change", {"ImageId": "ami-1"})) == []
    assert parse_message(json.dumps({"detail-type": "EC2 Spot Instance Interruption Warning", "detail": "x"})) == []
