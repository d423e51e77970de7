"""The fault layer in front of moto behaves like EC2: capacity errors, idempotency, throttling, lost responses."""

from __future__ import annotations

from typing import Any

import boto3
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError

from localcloud.aws.emulated_aws import EmulatedAws
from localcloud.aws.faults import CapacityFault, Faults
from tests.aws.plugin_env import public_image


@pytest.fixture(scope="module")
def vpc(emulated_aws: EmulatedAws) -> dict[str, str]:
    ec2 = emulated_aws.client("ec2", "us-east-1")
    vpc_id = ec2.create_vpc(CidrBlock="127.16.0.0/16")["Vpc"]["VpcId"]
    subnet_a = ec2.create_subnet(VpcId=vpc_id, CidrBlock="127.16.0.0/20", AvailabilityZone="us-east-1a")
    subnet_b = ec2.create_subnet(VpcId=vpc_id, CidrBlock="127.16.16.0/20", AvailabilityZone="us-east-1b")
    ami = public_image(ec2)
    template = ec2.create_launch_template(
        LaunchTemplateName="fault-layer-test", LaunchTemplateData={"ImageId": ami, "InstanceType": "c5.large"}
    )
    return {
        "a": subnet_a["Subnet"]["SubnetId"],
        "b": subnet_b["Subnet"]["SubnetId"],
        "ami": ami,
        "lt": template["LaunchTemplate"]["LaunchTemplateId"],
    }


def _fleet(ec2: Any, vpc: dict[str, str], token: str, count: int = 2) -> dict[str, Any]:
    result: dict[str, Any] = ec2.create_fleet(
        Type="instant",
        ClientToken=token,
        TargetCapacitySpecification={"TotalTargetCapacity": count, "DefaultTargetCapacityType": "on-demand"},
        LaunchTemplateConfigs=[
            {
                "LaunchTemplateSpecification": {"LaunchTemplateId": vpc["lt"], "Version": "$Latest"},
                "Overrides": [
                    {"InstanceType": "c5.large", "SubnetId": vpc["a"]},
                    {"InstanceType": "c5.large", "SubnetId": vpc["b"]},
                ],
            }
        ],
    )
    return result


def _ids(result: dict[str, Any]) -> list[str]:
    return [i for item in result.get("Instances", []) for i in item["InstanceIds"]]


def _terminate(ec2: Any, ids: list[str]) -> None:
    if ids:
        ec2.terminate_instances(InstanceIds=ids)


def test_instances_get_loopback_private_ips(aws: EmulatedAws, vpc: dict[str, str]) -> None:
    ec2 = aws.client("ec2")
    ids = _ids(_fleet(ec2, vpc, "loopback"))
    reservations = ec2.describe_instances(InstanceIds=ids)["Reservations"]
    ips = [i["PrivateIpAddress"] for r in reservations for i in r["Instances"]]
    assert len(ips) == 2 and all(ip.startswith("127.16.") for ip in ips)
    _terminate(ec2, ids)


def test_capacity_fault_in_one_az_is_reported_per_override(aws: EmulatedAws, vpc: dict[str, str]) -> None:
    aws.set_faults(Faults(capacity=(CapacityFault(availability_zone="us-east-1a"),)))
    ec2 = aws.client("ec2")
    result = _fleet(ec2, vpc, "ice-a")
    assert [e["ErrorCode"] for e in result["Errors"]] == ["InsufficientInstanceCapacity"]
    assert result["Errors"][0]["LaunchTemplateAndOverrides"]["Overrides"]["AvailabilityZone"] == "us-east-1a"
    ids = _ids(result)
    placed = ec2.describe_instances(InstanceIds=ids)["Reservations"]
    assert {i["Placement"]["AvailabilityZone"] for r in placed for i in r["Instances"]} == {"us-east-1b"}
    _terminate(ec2, ids)


def _reservations(ec2: Any, filters: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        r for page in ec2.get_paginator("describe_instances").paginate(Filters=filters) for r in page["Reservations"]
    ]


def test_capacity_fault_everywhere_launches_nothing(aws: EmulatedAws, vpc: dict[str, str]) -> None:
    aws.set_faults(Faults(capacity=(CapacityFault(instance_type="c5.large"),)))
    ec2 = aws.client("ec2")
    live = [{"Name": "instance-state-name", "Values": ["pending", "running"]}]
    before = _reservations(ec2, live)  # every page: the worker's other tests may have launched 100s
    result = _fleet(ec2, vpc, "ice-all")
    assert _ids(result) == [] and len(result["Errors"]) == 2
    assert len(_reservations(ec2, live)) == len(before)


def test_run_instances_capacity_error_fails_the_call(aws: EmulatedAws, vpc: dict[str, str]) -> None:
    aws.set_faults(
        Faults(capacity=(CapacityFault(availability_zone="us-east-1b", code="InsufficientInstanceCapacity"),))
    )
    ec2 = aws.client("ec2")
    with pytest.raises(ClientError) as error:
        ec2.run_instances(ImageId=vpc["ami"], MinCount=1, MaxCount=1, InstanceType="c5.large", SubnetId=vpc["b"])
    assert error.value.response["Error"]["Code"] == "InsufficientInstanceCapacity"


def test_client_token_retry_returns_the_first_launch(aws: EmulatedAws, vpc: dict[str, str]) -> None:
    ec2 = aws.client("ec2")
    first, again = _fleet(ec2, vpc, "same-token"), _fleet(ec2, vpc, "same-token")
    assert _ids(first) == _ids(again) and len(_ids(first)) == 2
    _terminate(ec2, _ids(first))


def test_lost_response_is_executed_and_retried_idempotently(aws: EmulatedAws, vpc: dict[str, str]) -> None:
    aws.set_faults(Faults(lose_responses={"CreateFleet": 1}))
    ec2 = aws.client("ec2")  # botocore's default retries resend the same ClientToken
    result = _fleet(ec2, vpc, "lost-once")
    assert aws.call_counts()["ec2:CreateFleet"] == 2
    tagged = ec2.describe_instances(
        Filters=[{"Name": "instance-state-name", "Values": ["pending", "running"]}], InstanceIds=_ids(result)
    )
    assert sum(len(r["Instances"]) for r in tagged["Reservations"]) == 2
    _terminate(ec2, _ids(result))


def test_throttling_answers_request_limit_exceeded(aws: EmulatedAws) -> None:
    aws.set_faults(Faults(throttle_every=1))
    plain = boto3.client(
        "ec2", region_name="us-east-1", endpoint_url=aws.url, config=Config(retries={"max_attempts": 1})
    )
    with pytest.raises(ClientError) as error:
        plain.describe_vpcs()
    assert error.value.response["Error"]["Code"] == "RequestLimitExceeded"


def test_call_counts_by_operation(aws: EmulatedAws) -> None:
    ec2 = aws.client("ec2")
    ec2.describe_vpcs()
    ec2.describe_vpcs()
    assert aws.call_counts() == {"ec2:DescribeVpcs": 2}


def test_run_instances_launches_up_to_max_count_when_capacity_is_there(aws: EmulatedAws, vpc: dict[str, str]) -> None:
    ec2 = aws.client("ec2")
    result = ec2.run_instances(ImageId=vpc["ami"], MinCount=1, MaxCount=3, InstanceType="c5.large", SubnetId=vpc["a"])
    ids = [i["InstanceId"] for i in result["Instances"]]
    assert len(ids) == 3
    _terminate(ec2, ids)
