"""The emulated AWS's quicker moto serializer (localcloud/aws/moto_serializer.py) writes, byte for byte, what moto's
own writes: the same answers are read with and without it."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest
import xmltodict
from moto.core.serialize import AttributePicker, AttributePickerContext

from localcloud.aws import moto_serializer
from tests.aws.plugin_env import public_image
from tests.unit.moto_recorded import recorded_clients

REQUEST_ID = re.compile(rb"<(requestId|RequestId)>[^<]*</(requestId|RequestId)>")


@pytest.fixture()
def clients(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, Any]]:
    """In-process moto clients (no server) whose raw answers are kept, and moto's own picker and name check back
    in place afterwards."""
    own = (AttributePicker.__call__, xmltodict._validate_name)  # type: ignore[attr-defined]
    try:
        with recorded_clients(monkeypatch, "ec2", "sns") as (made, bodies):
            yield {"bodies": bodies, **made}
    finally:
        AttributePicker.__call__ = own[0]  # type: ignore[method-assign]
        xmltodict._validate_name = own[1]  # type: ignore[attr-defined]
        if "_elastic_slurm_cached_picker" in AttributePicker.__dict__:
            delattr(AttributePicker, "_elastic_slurm_cached_picker")


def _answers(clients: dict[str, Any], vpc: str, ami: str) -> list[bytes]:
    """The raw answers of reads that cover instances (with their transformers), volumes, images, network
    interfaces, a VPC peering and another service (SNS), without their request ids."""
    ec2, sns, bodies = clients["ec2"], clients["sns"], clients["bodies"]
    start = len(bodies)
    ec2.describe_instances()
    ec2.describe_volumes()
    ec2.describe_images(ImageIds=[ami])
    ec2.describe_network_interfaces()
    ec2.describe_subnets(Filters=[{"Name": "vpc-id", "Values": [vpc]}])
    ec2.describe_security_groups()
    ec2.describe_vpc_peering_connections()
    sns.list_topics()
    return [REQUEST_ID.sub(b"", body) for body in bodies[start:]]


def test_answers_are_byte_for_byte_moto_s_own_and_stay_so_when_moto_changes_a_transformer(
    clients: dict[str, Any],
) -> None:
    ec2, bodies = clients["ec2"], clients["bodies"]
    ami = public_image(ec2)
    vpc = ec2.create_vpc(CidrBlock="127.30.0.0/16")["Vpc"]["VpcId"]
    subnet = ec2.create_subnet(VpcId=vpc, CidrBlock="127.30.0.0/20")["Subnet"]["SubnetId"]
    spec = [{"ResourceType": "instance", "Tags": [{"Key": "elastic-slurm:cluster", "Value": "c1"}]}]
    ec2.run_instances(ImageId=ami, MinCount=3, MaxCount=3, SubnetId=subnet, TagSpecifications=spec)
    ec2.run_instances(ImageId=ami, MinCount=1, MaxCount=1)  # untagged: its empty tag set is dropped by a transformer
    clients["sns"].create_topic(Name="alerts")
    own = _answers(clients, vpc, ami)
    assert b"<instancesSet>" in own[0] and b"elastic-slurm:cluster" in own[0]

    moto_serializer.install()
    moto_serializer.install()  # once only
    assert AttributePicker.__call__.__qualname__.startswith("picked_value")
    assert _answers(clients, vpc, ami) == own
    assert _answers(clients, vpc, ami) == own  # from the kept names and transformers

    launched = len(bodies)  # RunInstances' own transformer (state "pending") in a kept answer
    ec2.run_instances(ImageId=ami, MinCount=1, MaxCount=1)
    assert b"<name>pending</name>" in bodies[launched]

    peer = ec2.create_vpc(CidrBlock="127.31.0.0/16")["Vpc"]["VpcId"]
    for _ in range(2):  # moto sets this transformer anew for each peering: each answer must show its own
        answered = len(bodies)
        pcx = ec2.create_vpc_peering_connection(VpcId=vpc, PeerVpcId=peer)["VpcPeeringConnection"]
        assert pcx["Status"]["Code"] == "initiating-request"
        assert b"<code>initiating-request</code>" in bodies[answered]


def test_a_picker_with_other_alias_providers_goes_to_moto_s_own_code() -> None:
    calls: list[str] = []

    def own(picker: Any, context: Any) -> str:
        calls.append(context.key)
        return "moto's"

    pick = moto_serializer.picked_value(own)
    picker = AttributePicker(alias_providers=[])
    context = AttributePickerContext(
        obj={"Key": 1},
        key="Key",
        shape=None,
        operation_model=None,
        service_model=None,
        key_path="X",  # type: ignore[arg-type]
    )
    assert pick(picker, context) == "moto's" and calls == ["Key"]
    assert pick(AttributePicker(), context) == 1 and calls == ["Key"]  # the default providers: the kept path


def test_a_bad_element_name_is_still_refused_after_good_ones_passed() -> None:
    checked: list[str] = []

    def own(value: Any, kind: str) -> None:
        checked.append(value)
        xmltodict._validate_name(value, kind)  # type: ignore[attr-defined]

    check = moto_serializer.validated_once(own)
    check("instanceId", "element")
    check("instanceId", "element")
    assert checked == ["instanceId"]  # the second time from the kept set
    for bad in ("a b", "<x>", "!x", 'q"'):
        with pytest.raises(ValueError, match="Invalid element name"):
            check(bad, "element")
    with pytest.raises(ValueError, match="Invalid element name"):
        check("a b", "element")  # a refused name is not kept
    with pytest.raises(ValueError, match="must be a string"):
        check(3, "element")
