"""The emulated EC2 answers DescribeInstanceTopology (moto has no such action; localcloud/aws/instance_topology.py):
three network nodes per running instance, shared by the instances of one launch, with EC2's request rules, and the
manager's adapter (slurm_plugin/manager/topology.py) reads it through boto3, as the controller policy allows."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import pytest
from botocore.exceptions import ClientError

from localcloud.aws.emulated_aws import EmulatedAws
from localcloud.aws.iam import ACCOUNT, without_statement
from localcloud.aws.iam_requests import Inventory, table
from localcloud.aws.instance_topology import network_node
from slurm_plugin.manager.topology import describe_network_nodes
from slurm_plugin.manifest import TAG_LAUNCH_REQUEST
from stacks.iam_policies import ArnScope, RegionTarget, document, fleet_statements
from tests.aws.iam_eval import evaluate
from tests.aws.plugin_env import public_image


@pytest.fixture(scope="module")
def subnets(emulated_aws: EmulatedAws) -> dict[str, str]:
    ec2 = emulated_aws.client("ec2", "us-west-2")
    vpc = ec2.create_vpc(CidrBlock="127.17.0.0/16")["Vpc"]["VpcId"]
    a = ec2.create_subnet(VpcId=vpc, CidrBlock="127.17.0.0/20", AvailabilityZone="us-west-2a")["Subnet"]["SubnetId"]
    b = ec2.create_subnet(VpcId=vpc, CidrBlock="127.17.16.0/20", AvailabilityZone="us-west-2b")["Subnet"]["SubnetId"]
    return {"us-west-2a": a, "us-west-2b": b}


def launch(aws: EmulatedAws, subnet: str, count: int, itype: str = "p4d.24xlarge") -> list[str]:
    """One launch call of `count` instances, tagged as the plugin tags a launch request."""
    ec2 = aws.client("ec2", "us-west-2")
    ami = public_image(ec2)
    tags = [{"Key": TAG_LAUNCH_REQUEST, "Value": uuid.uuid4().hex}]
    answer = ec2.run_instances(
        ImageId=ami, InstanceType=itype, MinCount=count, MaxCount=count, SubnetId=subnet,
        TagSpecifications=[{"ResourceType": "instance", "Tags": tags}],
    )  # fmt: skip
    return [i["InstanceId"] for i in answer["Instances"]]


def topology_of(aws: EmulatedAws, ids: list[str]) -> dict[str, dict[str, Any]]:
    answer = aws.client("ec2", "us-west-2").describe_instance_topology(InstanceIds=ids)
    return {item["InstanceId"]: item for item in answer["Instances"]}


def test_instances_of_one_launch_share_their_network_nodes_and_another_launch_gets_its_own_leaf(
    aws: EmulatedAws, subnets: dict[str, str]
) -> None:
    first = launch(aws, subnets["us-west-2a"], 2)
    second = launch(aws, subnets["us-west-2a"], 2)
    other_az = launch(aws, subnets["us-west-2b"], 1)
    found = topology_of(aws, [*first, *second, *other_az])
    nodes = {iid: item["NetworkNodes"] for iid, item in found.items()}
    assert all(len(n) == 3 for n in nodes.values())
    assert nodes[first[0]] == nodes[first[1]] and nodes[second[0]] == nodes[second[1]]
    assert nodes[first[0]][:2] == nodes[second[0]][:2] and nodes[first[0]][2] != nodes[second[0]][2]
    assert nodes[other_az[0]][0] != nodes[first[0]][0]  # another AZ: another top network node
    assert nodes[first[0]][0] == network_node("us-west-2a")  # a test can know where an instance sits
    assert found[first[0]]["InstanceType"] == "p4d.24xlarge" and found[first[0]]["AvailabilityZone"] == "us-west-2a"
    assert found[first[0]]["ZoneId"].startswith("usw2-az")
    assert aws.call_counts()["ec2:DescribeInstanceTopology"] == 1


def test_an_instance_that_is_not_running_has_no_network_nodes(aws: EmulatedAws, subnets: dict[str, str]) -> None:
    (iid,) = launch(aws, subnets["us-west-2a"], 1)
    aws.client("ec2", "us-west-2").stop_instances(InstanceIds=[iid])
    assert topology_of(aws, [iid])[iid].get("NetworkNodes", []) == []


def test_ec2_request_rules_are_enforced(aws: EmulatedAws, subnets: dict[str, str]) -> None:
    ec2 = aws.client("ec2", "us-west-2")
    ids = launch(aws, subnets["us-west-2a"], 1)
    with pytest.raises(ClientError, match="InvalidParameterCombination"):
        ec2.describe_instance_topology(InstanceIds=ids, MaxResults=5)
    with pytest.raises(ClientError, match="InvalidParameterValue"):
        ec2.describe_instance_topology(InstanceIds=[f"i-{n:017x}" for n in range(101)])
    with pytest.raises(ClientError, match=r"InvalidInstanceID\.NotFound"):
        ec2.describe_instance_topology(InstanceIds=["i-0123456789abcdef0"])


def test_listing_pages_follow_next_token_and_filters_apply(aws: EmulatedAws, subnets: dict[str, str]) -> None:
    ec2 = aws.client("ec2", "us-west-2")
    mine = set(launch(aws, subnets["us-west-2b"], 3, itype="trn1.32xlarge"))
    pages = ec2.get_paginator("describe_instance_topology").paginate(
        Filters=[
            {"Name": "instance-type", "Values": ["trn1*"]},
            {"Name": "availability-zone", "Values": ["us-west-2b"]},
        ],
        PaginationConfig={"PageSize": 2},
    )
    seen = [item["InstanceId"] for page in pages for item in page["Instances"]]
    assert mine <= set(seen) and len(seen) == len(set(seen))
    assert all(len(page["Instances"]) <= 2 for page in ec2.get_paginator("describe_instance_topology").paginate(
        PaginationConfig={"PageSize": 2}))  # fmt: skip


def test_the_manager_adapter_asks_100_ids_a_call(aws: EmulatedAws, subnets: dict[str, str]) -> None:
    ids = launch(aws, subnets["us-west-2a"], 101, itype="c7i.large")
    aws.reset_call_counts()
    found, calls = describe_network_nodes(aws.client("ec2", "us-west-2"), ids, budget=5)
    assert calls == 2 == aws.call_counts()["ec2:DescribeInstanceTopology"]
    assert set(found) == set(ids) and len({nodes for nodes in found.values()}) == 1  # one launch, one network node


def test_the_controller_policy_allows_the_recorded_call_and_denies_it_without_its_statement(
    aws: EmulatedAws, subnets: dict[str, str], tmp_path: Path
) -> None:
    """The manager's DescribeInstanceTopology, recorded by the emulated AWS and evaluated by a real IAM evaluator
    against the controller's statements (stacks/iam_policies.py)."""
    ids = launch(aws, subnets["us-west-2a"], 2)
    log = tmp_path / "requests.jsonl"
    aws.log_requests(log)
    try:
        describe_network_nodes(aws.client("ec2", "us-west-2"), ids, budget=1)
    finally:
        aws.log_requests(None)
    entries = [json.loads(line) for line in log.read_text().splitlines()]
    requests = table(entries, Inventory(ACCOUNT))
    assert [(r.action, r.resource) for r in requests] == [("ec2:DescribeInstanceTopology", "*")]
    scope = ArnScope("aws", ACCOUNT, "us-west-2")
    target = RegionTarget("us-west-2", "vpc-1", ["lt-1"], f"arn:aws:iam::{ACCOUNT}:role/compute")
    policy = document(fleet_statements(scope, "alpha", [target]))
    assert evaluate({"controller": policy}, requests, ACCOUNT) == ["Allowed"]
    denied = without_statement(policy, "DescribeHasNoResourceLevelPermissions")
    assert evaluate({"controller": denied}, requests, ACCOUNT) == ["ImplicitlyDenied"]
