"""The cluster manager's EC2 status observation against the emulated AWS: a constant number of DescribeInstanceStatus
calls however many instances run (filtered queries, slurm_plugin/manager/observe.py), and the emulator honouring the
status filters moto drops (localcloud/aws/moto_status_filters.py)."""

from __future__ import annotations

import uuid
from datetime import UTC
from pathlib import Path
from typing import Any

import pytest

from localcloud.aws.emulated_aws import EmulatedAws
from slurm_plugin.manager.observe import STATUS_QUERIES
from slurm_plugin.powersave.ec2 import Ec2
from tests.aws.plugin_env import public_image
from tests.aws.test_manager_apply import FakeSlurm, launch, manager, node


@pytest.fixture(scope="module")
def network(emulated_aws: EmulatedAws) -> dict[str, str]:
    ec2 = emulated_aws.client("ec2", "us-east-1")
    vpc_id = ec2.create_vpc(CidrBlock="127.21.0.0/16")["Vpc"]["VpcId"]
    subnet = ec2.create_subnet(VpcId=vpc_id, CidrBlock="127.21.0.0/20", AvailabilityZone="us-east-1a")
    ami = public_image(ec2)
    return {"subnet": subnet["Subnet"]["SubnetId"], "ami": ami}


def _status_ids(aws: EmulatedAws, **params: Any) -> set[str]:
    reply = aws.client("ec2").describe_instance_status(**params)
    return {s["InstanceId"] for s in reply["InstanceStatuses"]}


def test_emulated_status_filters_return_only_matching_instances(aws: EmulatedAws, network: dict[str, str]) -> None:
    ids = [i["InstanceId"] for i in launch(aws, network, f"sf-{uuid.uuid4().hex[:8]}", 3)]
    every = _status_ids(aws)
    assert set(ids) <= every  # no filter: every running instance, as before
    ok = [{"Name": "instance-status.status", "Values": ["ok"]}]
    assert set(ids) <= _status_ids(aws, Filters=ok)
    for filters in STATUS_QUERIES:  # nothing is impaired and nothing has a scheduled event in the emulator
        assert _status_ids(aws, Filters=filters) == set()
    both = [{"Name": "instance-status.status", "Values": ["ok"]}, {"Name": "system-status.status", "Values": ["ok"]}]
    assert set(ids) <= _status_ids(aws, Filters=both)
    assert (
        _status_ids(aws, InstanceIds=ids, Filters=[{"Name": "system-status.status", "Values": ["impaired"]}]) == set()
    )
    aws.client("ec2").terminate_instances(InstanceIds=ids)


def test_adapter_reads_launch_times_on_the_fast_path(aws: EmulatedAws, network: dict[str, str]) -> None:
    (instance,) = launch(aws, network, f"ts-{uuid.uuid4().hex[:8]}", 1)
    reply = Ec2(aws.url).client("us-east-1").describe_instances(InstanceIds=[instance["InstanceId"]])
    launched = reply["Reservations"][0]["Instances"][0]["LaunchTime"]
    assert launched.tzinfo is UTC  # datetime.fromisoformat's zone, not dateutil's tzutc (botocore's default path)
    assert launched == instance["LaunchTime"]
    aws.client("ec2").terminate_instances(InstanceIds=[instance["InstanceId"]])


@pytest.mark.parametrize("count", [5, 250])
def test_a_cycle_asks_for_status_three_times_however_many_instances_run(
    aws: EmulatedAws, network: dict[str, str], tmp_path: Path, count: int
) -> None:
    cluster = f"sc-{uuid.uuid4().hex[:8]}"
    ours = launch(aws, network, cluster, count)
    slurm = FakeSlurm([node("cpu-c7i-1", "IDLE+CLOUD+POWERING_UP", ours[0]["PrivateIpAddress"])])
    aws.reset_call_counts()

    outcome = manager(aws, tmp_path, cluster, slurm).cycle()  # every instance within the orphan grace: no action

    assert outcome is not None and outcome.failures == [] and outcome.done == []
    counts = aws.call_counts()
    assert counts.get("ec2:DescribeInstanceStatus") == len(STATUS_QUERIES) == 3
    assert counts.get("ec2:DescribeInstances") == 1
    assert "ec2:TerminateInstances" not in counts
    aws.client("ec2").terminate_instances(InstanceIds=[i["InstanceId"] for i in ours])
