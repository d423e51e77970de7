"""The manager's observe → reconcile → apply cycle against the emulated AWS (moto server), with a fake Slurm.

Filtered describes (one per region), batched terminates, nothing of another cluster touched, SQS events handled,
standby controllers do nothing.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from localcloud.aws.emulated_aws import EmulatedAws
from slurm_plugin.manager import metrics
from slurm_plugin.manager.daemon import Manager, main
from slurm_plugin.manager.model import Node, Settings
from slurm_plugin.manager.observe import parse_state
from slurm_plugin.manifest import TAG_CLUSTER, TAG_POOL, Location, Manifest, PoolManifest
from slurm_plugin.powersave.ec2 import Ec2
from slurm_plugin.powersave.slurm import SlurmError
from tests.aws.plugin_env import public_image

LATER = datetime.now(UTC) + timedelta(hours=2)  # every instance launched by the test is past the orphan grace


@dataclass
class FakeSlurm:
    """ManagerSlurm double: fixed nodes, records every update."""

    node_list: list[Node]
    leader: str = "ctl-a"
    calls: list[tuple[str, tuple[str, ...], str]] = field(default_factory=list)
    failing: tuple[str, ...] = ()  # power-downs whose reason starts with one of these fail
    read_again: list[Node] | None = None  # what a second read shows (Slurm moved on meanwhile); else node_list
    reads: int = 0

    def nodes(self) -> list[Node]:
        self.reads += 1
        return list(self.node_list if self.reads == 1 or self.read_again is None else self.read_again)

    def ping(self) -> str:
        return f"Slurmctld(primary) at {self.leader} is UP\n"

    def power_down(self, nodes: Sequence[str], reason: str) -> None:
        self.calls.append(("power_down", tuple(nodes), reason))
        if reason.startswith(self.failing):
            raise SlurmError(f"scontrol update: slurm_update error: Socket timed out ({reason})")

    def drain(self, nodes: Sequence[str], reason: str) -> None:
        self.calls.append(("drain", tuple(nodes), reason))

    def resume(self, nodes: Sequence[str]) -> None:
        self.calls.append(("resume", tuple(nodes), ""))

    def power_down_again(self, nodes: Sequence[str]) -> None:
        self.calls.append(("power_down_again", tuple(nodes), ""))

    def power_up(self, nodes: Sequence[str]) -> None:
        self.calls.append(("power_up", tuple(nodes), ""))


def node(name: str, state: str, addr: str | None = None) -> Node:
    base, flags = parse_state(state)
    return Node(name, base, flags, addr)


@pytest.fixture(scope="module")
def network(emulated_aws: EmulatedAws) -> dict[str, str]:
    ec2 = emulated_aws.client("ec2", "us-east-1")
    vpc_id = ec2.create_vpc(CidrBlock="127.18.0.0/16")["Vpc"]["VpcId"]
    subnet = ec2.create_subnet(VpcId=vpc_id, CidrBlock="127.18.0.0/20", AvailabilityZone="us-east-1a")
    ami = public_image(ec2)
    return {"subnet": subnet["Subnet"]["SubnetId"], "ami": ami}


def launch(aws: EmulatedAws, network: dict[str, str], cluster: str, count: int) -> list[dict[str, Any]]:
    tags = [{"Key": TAG_CLUSTER, "Value": cluster}, {"Key": TAG_POOL, "Value": "cpu-c7i"}]
    reply = aws.client("ec2").run_instances(
        ImageId=network["ami"], InstanceType="c7i.large", SubnetId=network["subnet"], MinCount=count,
        MaxCount=count, TagSpecifications=[{"ResourceType": "instance", "Tags": tags}],
    )  # fmt: skip
    instances: list[dict[str, Any]] = reply["Instances"]
    return instances


def states(aws: EmulatedAws, ids: list[str]) -> dict[str, str]:
    reply = aws.client("ec2").describe_instances(InstanceIds=ids)
    return {i["InstanceId"]: i["State"]["Name"] for r in reply["Reservations"] for i in r["Instances"]}


def manager(aws: EmulatedAws, tmp_path: Path, cluster: str, slurm: FakeSlurm, **extra: Any) -> Manager:
    pool = PoolManifest(
        partition="cpu", pool="c7i", node_prefix="cpu-c7i-", min_nodes=0, max_nodes=10, instance_types=["c7i.large"],
        purchase_option="on_demand",
        locations=[Location(region="us-east-1", availability_zone="us-east-1a", subnet_id="s", launch_template_id="l")],
    )  # fmt: skip
    manifest = Manifest(
        cluster=cluster, home_region="us-east-1", aws_endpoint_url=aws.url, instance_cache_path=str(tmp_path / "c"),
        state_dir=str(tmp_path / "state"), log_file=str(tmp_path / "plugin.log"), pools=[pool],
    )  # fmt: skip
    settings = Settings(cluster=cluster, pools=(pool,))
    return Manager(manifest, settings, slurm, Ec2(aws.url), host="ctl-a", **extra)


@pytest.fixture
def cluster() -> str:
    return f"mgr-{uuid.uuid4().hex[:8]}"


def test_orphans_are_terminated_in_one_batch_and_another_clusters_instances_survive(
    aws: EmulatedAws, network: dict[str, str], tmp_path: Path, cluster: str
) -> None:
    ours = launch(aws, network, cluster, 3)
    theirs = launch(aws, network, f"{cluster}-other", 2)
    claimed = ours[0]
    slurm = FakeSlurm([node("cpu-c7i-1", "ALLOCATED+CLOUD", claimed["PrivateIpAddress"])])
    aws.reset_call_counts()

    outcome = manager(aws, tmp_path, cluster, slurm).cycle(now=lambda: LATER)

    assert outcome is not None and outcome.failures == []
    counts = aws.call_counts()  # before the test's own describes
    assert counts.get("ec2:DescribeInstances") == 1 and counts.get("ec2:TerminateInstances") == 1
    after = states(aws, [i["InstanceId"] for i in ours + theirs])
    assert after[claimed["InstanceId"]] == "running"
    assert {after[i["InstanceId"]] for i in ours[1:]} <= {"shutting-down", "terminated"}
    assert {after[i["InstanceId"]] for i in theirs} == {"running"}
    assert slurm.calls == []
    assert metrics.load(tmp_path / "state").counters["orphans_terminated"] == 2
    aws.client("ec2").terminate_instances(InstanceIds=[claimed["InstanceId"]] + [i["InstanceId"] for i in theirs])


def test_node_whose_instance_was_terminated_behind_our_back_is_powered_down(
    aws: EmulatedAws, network: dict[str, str], tmp_path: Path, cluster: str
) -> None:
    (lost,) = launch(aws, network, cluster, 1)
    aws.client("ec2").terminate_instances(InstanceIds=[lost["InstanceId"]])
    slurm = FakeSlurm([node("cpu-c7i-2", "MIXED+CLOUD", lost["PrivateIpAddress"])])

    manager(aws, tmp_path, cluster, slurm).cycle(now=lambda: LATER)

    assert [(c[0], c[1]) for c in slurm.calls] == [("power_down", ("cpu-c7i-2",))]
    assert slurm.calls[0][2].startswith("(Manager:InstanceGone)")
    assert slurm.reads == 2  # read again before the power-down: still up, so the instance is lost


def test_a_node_slurm_powers_down_between_the_reads_is_left_to_suspend_program(
    aws: EmulatedAws, network: dict[str, str], tmp_path: Path, cluster: str
) -> None:
    """Slurm read first (idle, powered up), then its suspend: POWERING_DOWN, and SuspendProgram terminates the
    instance before EC2 is read. No power-down with `(Manager:InstanceGone)`, no loss counted; the node is read again
    once. (test_node_whose_instance_was_terminated_behind_our_back_is_powered_down: still up when read again.)"""
    (suspended,) = launch(aws, network, cluster, 1)
    aws.client("ec2").terminate_instances(InstanceIds=[suspended["InstanceId"]])
    address = suspended["PrivateIpAddress"]
    slurm = FakeSlurm(
        [node("cpu-c7i-6", "IDLE+CLOUD", address)], read_again=[node("cpu-c7i-6", "IDLE+CLOUD+POWERING_DOWN", address)]
    )

    outcome = manager(aws, tmp_path, cluster, slurm).cycle(now=lambda: LATER)

    assert outcome is not None and outcome.failures == [] and outcome.done == []
    assert slurm.calls == [] and slurm.reads == 2
    assert metrics.load(tmp_path / "state").counters.get("instances_lost", 0) == 0


def test_a_cycle_repeats_the_power_down_of_idle_nodes_left_not_responding_and_counts_them(
    aws: EmulatedAws, tmp_path: Path, cluster: str
) -> None:
    stale = [node(f"cpu-c7i-{i}", "IDLE+CLOUD+NOT_RESPONDING+POWERED_DOWN") for i in (3, 4)]
    slurm = FakeSlurm([*stale, node("cpu-c7i-5", "IDLE+CLOUD+POWERED_DOWN")])

    outcome = manager(aws, tmp_path, cluster, slurm).cycle(now=lambda: LATER)

    assert outcome is not None and outcome.failures == []
    assert [(c[0], c[1]) for c in slurm.calls] == [("power_down_again", ("cpu-c7i-3", "cpu-c7i-4"))]
    assert metrics.load(tmp_path / "state").counters["stale_not_responding_cleared"] == 2


def test_standby_controller_observes_nothing_and_acts_on_nothing(
    aws: EmulatedAws, network: dict[str, str], tmp_path: Path, cluster: str
) -> None:
    (orphan,) = launch(aws, network, cluster, 1)
    slurm = FakeSlurm([], leader="ctl-b")
    aws.reset_call_counts()

    assert manager(aws, tmp_path, cluster, slurm).cycle(now=lambda: LATER) is None

    assert "ec2:DescribeInstances" not in aws.call_counts()
    assert states(aws, [orphan["InstanceId"]]) == {orphan["InstanceId"]: "running"}
    aws.client("ec2").terminate_instances(InstanceIds=[orphan["InstanceId"]])


def test_spot_interruption_from_sqs_requeues_the_node_and_the_message_is_deleted(
    aws: EmulatedAws, network: dict[str, str], tmp_path: Path, cluster: str
) -> None:
    (spot,) = launch(aws, network, cluster, 1)
    sqs = aws.client("sqs")
    queue = sqs.create_queue(QueueName=cluster)["QueueUrl"]
    event = {"detail-type": "EC2 Spot Instance Interruption Warning", "source": "aws.ec2",
             "detail": {"instance-id": spot["InstanceId"], "instance-action": "terminate"}}  # fmt: skip
    sqs.send_message(QueueUrl=queue, MessageBody=json.dumps(event))
    slurm = FakeSlurm([node("cpu-c7i-3", "ALLOCATED+CLOUD", spot["PrivateIpAddress"])])

    manager(aws, tmp_path, cluster, slurm, sqs=sqs, queue_url=queue).cycle(now=lambda: LATER)

    assert [(c[0], c[1]) for c in slurm.calls] == [("power_down", ("cpu-c7i-3",))]
    assert slurm.calls[0][2].startswith("(Spot:Interruption)")
    assert aws.messages_in_queue(queue) == 0
    assert metrics.load(tmp_path / "state").counters["spot_interruptions"] == 1
    aws.client("ec2").terminate_instances(InstanceIds=[spot["InstanceId"]])


@pytest.mark.parametrize("failing", ["(Manager:InstanceGone)", "(Spot:Interruption)"])
def test_an_event_message_stays_queued_only_when_its_own_action_failed(
    aws: EmulatedAws, network: dict[str, str], tmp_path: Path, cluster: str, failing: str
) -> None:
    """A spot warning for one node and, in the same cycle, another node whose instance is gone: when the other
    node's power-down fails the warning was handled and is deleted; when its own fails it stays for the next round."""
    spot, lost = launch(aws, network, cluster, 2)
    aws.client("ec2").terminate_instances(InstanceIds=[lost["InstanceId"]])
    sqs = aws.client("sqs")
    queue = sqs.create_queue(QueueName=cluster)["QueueUrl"]
    event = {"detail-type": "EC2 Spot Instance Interruption Warning", "source": "aws.ec2",
             "detail": {"instance-id": spot["InstanceId"], "instance-action": "terminate"}}  # fmt: skip
    sqs.send_message(QueueUrl=queue, MessageBody=json.dumps(event))
    slurm = FakeSlurm(
        [node("cpu-c7i-4", "ALLOCATED+CLOUD", spot["PrivateIpAddress"]),
         node("cpu-c7i-5", "MIXED+CLOUD", lost["PrivateIpAddress"])],
        failing=(failing,),
    )  # fmt: skip

    outcome = manager(aws, tmp_path, cluster, slurm, sqs=sqs, queue_url=queue).cycle(now=lambda: LATER)

    assert outcome is not None and len(outcome.failures) == 1 and failing in outcome.failures[0]
    assert sorted(c[1] for c in slurm.calls) == [("cpu-c7i-4",), ("cpu-c7i-5",)]
    assert aws.messages_in_queue(queue) == (1 if failing.startswith("(Spot") else 0)
    aws.client("ec2").terminate_instances(InstanceIds=[spot["InstanceId"]])


def test_missing_manifest_is_a_one_line_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--manifest", str(tmp_path / "nope.json"), "--once"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "manifest" in err[0]


def test_bad_interval_is_a_one_line_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["--manifest", "m.json", "--interval", "soon"])
    assert exit_info.value.code == 2
    assert "--interval" in capsys.readouterr().err
