"""The EC2 event rules of every synthesized template (stacks/monitoring.py, stacks/region.py) pass exactly the events
the cluster manager acts on (slurm_plugin/manager/events.py), evaluated with moto's EventBridge pattern matcher on
AWS's documented event shapes. EC2 events carry no tags, so no rule can pick one cluster's instances (the manager
drops other instances' events); what the rules drop is the state changes no manager acts on (pending, running)."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from moto.events.models import EventPattern

from slurm_plugin.manager.events import REBALANCE, SPOT_WARNING, STATE_CHANGE, event_actions, parse_message
from slurm_plugin.manager.model import GONE_INSTANCE_STATES, Instance, Node

pytestmark = pytest.mark.cdk

# https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/monitoring-instance-state-changes.html: every state
STATES = ("pending", "running", "stopping", "stopped", "shutting-down", "terminated")


def _event(detail_type: str, **detail: str) -> dict[str, Any]:
    return {
        "source": "aws.ec2",
        "detail-type": detail_type,
        "account": "123456789012",
        "region": "us-west-2",
        "resources": ["arn:aws:ec2:us-west-2:123456789012:instance/i-0abc"],
        "detail": {"instance-id": "i-0abc", **detail},
    }


def _ec2_rules(all_templates: dict[str, Path]) -> dict[str, list[EventPattern]]:
    """`config/stack` → the patterns of its rules on EC2 events."""
    rules: dict[str, list[EventPattern]] = {}
    for key, path in all_templates.items():
        for resource in json.loads(path.read_text(encoding="utf-8"))["Resources"].values():
            pattern = resource.get("Properties", {}).get("EventPattern")
            if resource["Type"] == "AWS::Events::Rule" and pattern.get("source") == ["aws.ec2"]:
                rules.setdefault(key, []).append(EventPattern.load(json.dumps(pattern)))
    return rules


def _passes(patterns: list[EventPattern], event: dict[str, Any]) -> bool:
    return any(p.matches_event(event) for p in patterns)


def test_state_changes_pass_only_to_the_states_the_manager_acts_on(all_templates: dict[str, Path]) -> None:
    rules = _ec2_rules(all_templates)
    assert rules  # every cluster stack has its rules, every remote region its forwarding rules
    for key, patterns in rules.items():
        passed = {s for s in STATES if _passes(patterns, _event(STATE_CHANGE, state=s))}
        assert passed == GONE_INSTANCE_STATES, key
        assert _passes(patterns, _event(SPOT_WARNING, **{"instance-action": "terminate"})), key
        assert _passes(patterns, _event(REBALANCE)), key


def test_a_dropped_state_change_is_one_the_manager_ignores() -> None:
    """The consumer's side: a `running` or `pending` event produces no action even for a node's own instance."""
    node = Node(name="cpu-c7i-1", state="ALLOCATED", addr="127.0.0.5")
    launched = datetime(2026, 1, 1, tzinfo=UTC)
    instance = Instance("i-0abc", "us-west-2", "running", "127.0.0.5", launched, cluster="burst")
    for state in STATES:
        actions = event_actions(parse_message(json.dumps(_event(STATE_CHANGE, state=state))), [node], [instance])
        assert bool(actions) == (state in GONE_INSTANCE_STATES), state


def test_the_unfiltered_pattern_of_before_is_caught() -> None:
    """Negative case: the old pattern (every state change) lets `running` through, which the check above reports."""
    old = EventPattern.load(json.dumps({"source": ["aws.ec2"], "detail-type": [STATE_CHANGE]}))
    passed = {s for s in STATES if old.matches_event(_event(STATE_CHANGE, state=s))}
    assert passed != GONE_INSTANCE_STATES and "running" in passed
