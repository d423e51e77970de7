"""RunInstances answers read for the fields the plugin uses (slurm_plugin/powersave/ec2_answers.py) give the plugin
exactly what botocore's whole reading gives it, and anything else is left to botocore."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import Any

import botocore.session
import pytest
from botocore.parsers import ResponseParserFactory

from slurm_plugin.powersave import ec2_answers
from slurm_plugin.powersave.ec2 import Ec2, _instance, iso_timestamp
from tests.aws.plugin_env import public_image
from tests.unit.moto_recorded import REGION, recorded_clients


@pytest.fixture()
def ec2(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, Any]]:
    """An in-process moto EC2 with a subnet and an image, and a plain client whose raw answers are kept."""
    with recorded_clients(monkeypatch, "ec2") as (clients, bodies):
        client = clients["ec2"]
        vpc = client.create_vpc(CidrBlock="127.40.0.0/16")["Vpc"]["VpcId"]
        subnet = client.create_subnet(VpcId=vpc, CidrBlock="127.40.0.0/20")["Subnet"]["SubnetId"]
        yield {"client": client, "bodies": bodies, "subnet": subnet, "image": public_image(client)}


def _launch(ec2: dict[str, Any], count: int, tags: dict[str, str]) -> tuple[bytes, dict[str, Any]]:
    """A RunInstances of `count` tagged instances: its raw answer and what botocore read of it all."""
    spec = [{"ResourceType": "instance", "Tags": [{"Key": k, "Value": v} for k, v in tags.items()]}] if tags else []
    answer = ec2["client"].run_instances(
        ImageId=ec2["image"], MinCount=count, MaxCount=count, SubnetId=ec2["subnet"], InstanceType="c7i.large",
        TagSpecifications=spec,
    )  # fmt: skip
    return ec2["bodies"][-1], answer


def _read(body: bytes, status: int = 200) -> tuple[dict[str, Any], dict[str, Any]]:
    """What the handler leaves in the answer, and what it puts over botocore's reading."""
    response_dict: dict[str, Any] = {"body": body, "headers": {}, "status_code": status}
    customized: dict[str, Any] = {}
    ec2_answers.read_used_fields(iso_timestamp)(response_dict=response_dict, customized_response_dict=customized)
    return response_dict, customized


def _parsed(body: bytes) -> dict[str, Any]:
    """botocore's own reading of a RunInstances body, with the plugin's timestamp parser."""
    model = botocore.session.get_session().get_service_model("ec2").operation_model("RunInstances")
    factory = ResponseParserFactory()
    factory.set_parser_defaults(timestamp_parser=iso_timestamp)
    parser = factory.create_parser("ec2")
    parsed: dict[str, Any] = parser.parse({"body": body, "headers": {}, "status_code": 200}, model.output_shape)
    return parsed


def _fields(raws: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    """The plugin's view of instances (ec2._instance), every field compared (tags, launch time and state too)."""
    return [dataclasses.astuple(_instance(raw, REGION)) for raw in raws]


@pytest.mark.parametrize("tags", [{"elastic-slurm:cluster": "c1", "Name": "cpu-1", "empty": ""}, {}])
def test_the_plugin_sees_what_botocore_s_whole_reading_gives(ec2: dict[str, Any], tags: dict[str, str]) -> None:
    body, whole = _launch(ec2, 3, tags)
    response_dict, customized = _read(body)
    rest = _parsed(response_dict["body"])
    instances = customized["Instances"]
    assert _fields(instances) == _fields(whole["Instances"])
    assert len(instances) == 3 and all(i["State"] == {"Code": 0, "Name": "pending"} for i in instances)
    assert all(
        i.get("Tags", []) == ([{"Key": k, "Value": v} for k, v in tags.items()] if tags else []) for i in instances
    )
    assert {k: rest[k] for k in ("ReservationId", "OwnerId")} == {k: whole[k] for k in ("ReservationId", "OwnerId")}
    assert rest["Instances"] == [] and len(response_dict["body"]) < len(body) / 3  # the instances are not read twice


# EC2's own layout (indented, as the API reference shows it): an instance without tags and without an address yet
AWS_ANSWER = b"""<?xml version="1.0" encoding="UTF-8"?>
<RunInstancesResponse xmlns="http://ec2.amazonaws.com/doc/2016-11-15/">
    <requestId>a1b2c3d4-5678-90ab-cdef-EXAMPLE11111</requestId>
    <reservationId>r-1234567890abcdef0</reservationId>
    <ownerId>123456789012</ownerId>
    <groupSet/>
    <instancesSet>
        <item>
            <instanceId>i-1234567890abcdef0</instanceId>
            <imageId>ami-0abcdef1234567890</imageId>
            <instanceState>
                <code>0</code>
                <name>pending</name>
            </instanceState>
            <privateDnsName/>
            <amiLaunchIndex>0</amiLaunchIndex>
            <instanceType>g5.xlarge</instanceType>
            <launchTime>2026-11-30T16:40:01.000Z</launchTime>
            <placement>
                <availabilityZone>us-east-1b</availabilityZone>
                <groupName/>
                <tenancy>default</tenancy>
            </placement>
            <monitoring><state>disabled</state></monitoring>
            <networkInterfaceSet>
                <item><networkInterfaceId>eni-0</networkInterfaceId><privateIpAddress>127.40.0.9</privateIpAddress>
                <tagSet><item><key>eni</key><value>x</value></item></tagSet></item>
            </networkInterfaceSet>
        </item>
    </instancesSet>
</RunInstancesResponse>"""


def test_ec2_s_own_layout_without_tags_or_address_reads_as_botocore_reads_it() -> None:
    response_dict, customized = _read(AWS_ANSWER)
    whole = _parsed(AWS_ANSWER)
    assert _fields(customized["Instances"]) == _fields(whole["Instances"])
    assert customized["Instances"] == [{
        "InstanceId": "i-1234567890abcdef0", "InstanceType": "g5.xlarge", "Placement": {"AvailabilityZone": "us-east-1b"},
        "LaunchTime": whole["Instances"][0]["LaunchTime"], "State": {"Code": 0, "Name": "pending"},
    }]  # fmt: skip
    assert _parsed(response_dict["body"])["ReservationId"] == "r-1234567890abcdef0"


GARBLED = {  # what botocore refuses or reads otherwise in a used field: left to botocore as a whole
    "empty state code": (b"<code>0</code>", b"<code/>"),
    "state code no number": (b"<code>0</code>", b"<code>zero</code>"),
    "empty launch time": (b"<launchTime>2026-11-30T16:40:01.000Z</launchTime>", b"<launchTime/>"),
    "tag without value": (b"<monitoring>", b"<tagSet><item><key>k</key></item></tagSet><monitoring>"),
    "another child of instancesSet": (b"</instancesSet>", b"<extra/></instancesSet>"),
    "not UTF-8": (b'encoding="UTF-8"?>', b'encoding="ISO-8859-1"?><!-- \xe9 -->'),
}


@pytest.mark.parametrize("case", sorted(GARBLED))
def test_a_used_field_botocore_would_refuse_or_read_otherwise_leaves_the_answer_to_botocore(case: str) -> None:
    old, new = GARBLED[case]
    body = AWS_ANSWER.replace(old, new, 1)
    assert body != AWS_ANSWER
    response_dict, customized = _read(body)
    assert response_dict["body"] is body and customized == {}


def test_an_answer_it_cannot_or_need_not_read_is_left_to_botocore(ec2: dict[str, Any]) -> None:
    body, _ = _launch(ec2, 1, {})
    for untouched, status in (
        (b"<!doctype html><html><title>500</title>", 200),  # no XML: botocore reports it (ec2.NO_ANSWER)
        (b"<html><title>proxy</title></html>", 200),  # XML without instances: botocore reads it as before
        (body, 503),  # an error answer
    ):
        response_dict, customized = _read(untouched, status)
        assert response_dict["body"] is untouched and customized == {}


def test_the_plugin_s_clients_read_run_instances_so_and_nothing_else(ec2: dict[str, Any]) -> None:
    adapter = Ec2(state_dir=None)
    client = adapter.client(REGION)
    assert client is adapter.client(REGION)  # installed once, on the cached client
    launched = client.run_instances(
        ImageId=ec2["image"], MinCount=2, MaxCount=2, SubnetId=ec2["subnet"], InstanceType="c7i.large",
        TagSpecifications=[{"ResourceType": "instance", "Tags": [{"Key": "elastic-slurm:pool", "Value": "p"}]}],
    )["Instances"]  # fmt: skip
    assert {key for raw in launched for key in raw} <= {
        "InstanceId", "PrivateIpAddress", "InstanceType", "Placement", "Tags", "LaunchTime", "State",
    }  # fmt: skip
    described = client.describe_instances(InstanceIds=[raw["InstanceId"] for raw in launched])
    whole = [raw for reservation in described["Reservations"] for raw in reservation["Instances"]]
    assert "NetworkInterfaces" in whole[0]  # DescribeInstances is read whole (the cluster manager reads more)
    same = [(*row[:6], row[7]) for row in _fields(launched)]  # its state aside: moto's instances run at once
    assert same == [(*row[:6], "pending") for row in _fields(whole)]
