"""A full emulated subnet reuses its terminated instances' addresses (localcloud/aws/moto_subnet_ips.py); before it
is full, no address is reused."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from moto import mock_aws
from moto.ec2.models.subnets import Subnet

from localcloud.aws import moto_subnet_ips
from localcloud.aws.emulated_aws import DUMMY_CREDENTIALS
from tests.aws.plugin_env import public_image

REGION = "us-east-1"
USABLE = 251  # a /24: 256 less the network, broadcast and AWS's three reserved addresses


@pytest.fixture()
def ec2(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """An in-process moto EC2 client with dummy credentials; moto's Subnet as it was afterwards."""
    for key, value in {**DUMMY_CREDENTIALS, "AWS_DEFAULT_REGION": REGION}.items():
        monkeypatch.setenv(key, value)  # put back by monkeypatch
    original = Subnet.get_available_subnet_ip
    try:
        with mock_aws():
            yield boto3.client("ec2", region_name=REGION)
    finally:
        Subnet.get_available_subnet_ip = original  # type: ignore[method-assign]
        if "_elastic_slurm_reclaims_ips" in Subnet.__dict__:
            delattr(Subnet, "_elastic_slurm_reclaims_ips")


def _subnet(ec2: Any) -> str:
    vpc = ec2.create_vpc(CidrBlock="127.22.0.0/16")["Vpc"]["VpcId"]
    subnet: str = ec2.create_subnet(VpcId=vpc, CidrBlock="127.22.0.0/24")["Subnet"]["SubnetId"]
    return subnet


def _launch(ec2: Any, subnet: str, count: int) -> dict[str, str]:
    answer = ec2.run_instances(ImageId=public_image(ec2), MinCount=count, MaxCount=count, SubnetId=subnet)
    return {i["InstanceId"]: i["PrivateIpAddress"] for i in answer["Instances"]}


def test_moto_alone_runs_out_once_every_address_was_used_once(ec2: Any) -> None:
    subnet = _subnet(ec2)
    first = _launch(ec2, subnet, USABLE)
    ec2.terminate_instances(InstanceIds=list(first))
    with pytest.raises(StopIteration):  # in-process moto; its server answers an HTML 500
        _launch(ec2, subnet, 1)


def test_a_full_subnet_reuses_terminated_addresses_and_a_live_one_never(ec2: Any) -> None:
    moto_subnet_ips.install()
    moto_subnet_ips.install()  # idempotent: wrapped once
    subnet = _subnet(ec2)
    early = _launch(ec2, subnet, 10)
    ec2.terminate_instances(InstanceIds=list(early))
    rest = _launch(ec2, subnet, USABLE - 10)  # not full yet: fresh addresses, none of the terminated ten
    assert not set(rest.values()) & set(early.values())
    keep = list(rest)[:5]  # still running: their addresses stay theirs
    ec2.terminate_instances(InstanceIds=list(rest)[5:])
    again = _launch(ec2, subnet, 20)  # full: the terminated instances' addresses come back
    assert len(set(again.values())) == 20
    assert set(again.values()) <= set(early.values()) | {rest[i] for i in list(rest)[5:]}
    assert not set(again.values()) & {rest[i] for i in keep}
    with pytest.raises(StopIteration):  # nothing terminated is left to reclaim beyond what the subnet holds
        _launch(ec2, subnet, USABLE)
