"""Parsing what Slurm 22.05 and EC2 really say (fixtures captured from slurmctld 22.05.8) into Nodes and Instances."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

from slurm_plugin.manager.model import Node
from slurm_plugin.manager.observe import (
    active_controller,
    instance_from_api,
    oneliner_fields,
    parse_json,
    parse_oneliner,
    parse_state,
    split_reason,
    status_from_api,
)

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "scontrol"


def nodes_of(name: str) -> dict[str, Node]:
    return {n.name: n for n in parse_oneliner((FIXTURES / name).read_text(), tz=UTC)}


def test_state_string_splits_into_base_and_flags() -> None:
    assert parse_state("IDLE+CLOUD+POWERED_DOWN") == ("IDLE", frozenset({"CLOUD", "POWERED_DOWN"}))
    assert parse_state("DOWN+CLOUD+POWERED_DOWN") == ("DOWN", frozenset({"CLOUD", "POWERED_DOWN"}))
    assert parse_state("idle*") == ("IDLE", frozenset({"NOT_RESPONDING"}))
    assert parse_state("mixed~") == ("MIXED", frozenset({"POWERED_DOWN"}))


def test_reason_at_the_end_keeps_spaces_and_its_timestamp() -> None:
    fields = oneliner_fields(
        "NodeName=a State=IDLE+CLOUD+DRAIN Reason=(Health:gpu) 7 of 8 GPUs [root@2026-11-22T02:46:11]"
    )
    assert fields["State"] == "IDLE+CLOUD+DRAIN"
    assert split_reason(fields["Reason"], UTC) == (
        "(Health:gpu) 7 of 8 GPUs",
        datetime(2026, 11, 22, 2, 46, 11, tzinfo=UTC),
    )


def test_reason_containing_key_value_text_is_not_split() -> None:
    nodes = nodes_of("show-nodes-oneliner-22.05-c.txt")
    assert nodes["cpu-c7i-1"].reason == "(Health:slurmd) Reason=with=equals inside"


def test_value_with_spaces_such_as_os_is_kept_whole() -> None:
    line = (FIXTURES / "show-nodes-oneliner-22.05-c.txt").read_text().splitlines()[0]
    fields = oneliner_fields(line)
    assert fields["OS"].startswith("Linux ") and " SMP " in fields["OS"]
    assert fields["RealMemory"] == "1000" and fields["NodeAddr"] == "127.0.0.1"


def test_slurm_22_05_powering_up_and_down_states() -> None:
    nodes = nodes_of("show-nodes-oneliner-22.05-a.txt")
    n1, n2, n3, n4 = (nodes[f"cpu-c7i-{i}"] for i in range(1, 5))
    assert n1.state == "MIXED" and n1.powering_up and n1.addr is None
    assert n2.addr == "127.0.0.9" and n2.powering_up and not n2.up
    assert n3.down and n3.powered_down and n3.reason.startswith("(Code:InsufficientInstanceCapacity)")
    assert n3.reason_time == datetime(2026, 11, 22, 2, 46, 11, tzinfo=UTC)
    assert n4.drain and n4.powered_down and n4.reason == "(Health:gpu) 7 of 8 GPUs"


def test_slurm_22_05_registered_node_with_a_job() -> None:
    nodes = nodes_of("show-nodes-oneliner-22.05-c.txt")
    n1 = nodes["cpu-c7i-1"]
    assert n1.state == "MIXED" and n1.busy and n1.drain
    n2 = nodes["cpu-c7i-2"]
    assert n2.drain and n2.powered_down and n2.not_responding


def test_every_node_of_the_output_is_parsed() -> None:
    for name in ("a", "b", "c"):
        assert sorted(nodes_of(f"show-nodes-oneliner-22.05-{name}.txt")) == [f"cpu-c7i-{i}" for i in range(1, 5)]


def test_json_output_of_newer_slurm_is_parsed() -> None:
    text = json.dumps(
        {
            "nodes": [
                {"name": "cpu-c7i-1", "state": ["IDLE", "CLOUD", "POWERED_DOWN"], "address": "cpu-c7i-1", "reason": ""},
                {
                    "name": "cpu-c7i-2",
                    "state": "down",
                    "state_flags": ["CLOUD", "POWERED_DOWN"],
                    "address": "127.0.0.5",
                    "reason": "(Code:InsufficientInstanceCapacity) x",
                    "reason_changed_at": {"set": True, "infinite": False, "number": 1795000000},
                },
            ]
        }
    )
    one, two = parse_json(text)
    assert one.powered_down and one.addr is None and one.reason_time is None
    assert two.down and two.addr == "127.0.0.5" and two.reason_time == datetime.fromtimestamp(1795000000, UTC)


def test_active_controller_is_the_first_one_up() -> None:
    assert active_controller((FIXTURES / "ping-22.05.txt").read_text()) == "vm"
    both = "Slurmctld(primary) at ctl-a is DOWN\nSlurmctld(backup) at ctl-b is UP\n"
    assert active_controller(both) == "ctl-b"
    assert active_controller("Slurmctld(primary) at ctl-a is DOWN\n") is None


def test_instance_from_describe_instances() -> None:
    raw = {
        "InstanceId": "i-1",
        "State": {"Name": "running"},
        "PrivateIpAddress": "127.16.0.5",
        "LaunchTime": datetime(2026, 11, 22, 2, 0, tzinfo=UTC),
        "InstanceType": "c7i.large",
        "InstanceLifecycle": "spot",
        "Placement": {"AvailabilityZone": "us-east-1a"},
        "Tags": [{"Key": "elastic-slurm:cluster", "Value": "alpha"}, {"Key": "elastic-slurm:pool", "Value": "cpu-c7i"}],
    }
    inst = instance_from_api(raw, "us-east-1")
    assert (inst.cluster, inst.pool, inst.private_ip, inst.spot, inst.live) == (
        "alpha",
        "cpu-c7i",
        "127.16.0.5",
        True,
        True,
    )


def test_status_impaired_since_and_scheduled_events() -> None:
    since = datetime(2026, 11, 22, 1, 0, tzinfo=UTC)
    raw = {
        "InstanceId": "i-1",
        "InstanceStatus": {"Status": "ok", "Details": [{"Name": "reachability", "Status": "passed"}]},
        "SystemStatus": {
            "Status": "impaired",
            "Details": [{"Name": "reachability", "Status": "failed", "ImpairedSince": since}],
        },
        "Events": [{"Code": "instance-retirement", "Description": "The instance is running on degraded hardware"}],
    }
    impaired, events = status_from_api(raw)
    assert impaired == since and [e.code for e in events] == ["instance-retirement"] and events[0].active
