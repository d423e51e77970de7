"""The emulated AWS's quicker EC2 answer writing (localcloud/aws/moto_answer_walk.py walks the answer's shape,
localcloud/aws/moto_xml.py writes its XML) gives, byte for byte, what moto's own code gives; what it does not handle
goes to moto's or xmltodict's own code."""

from __future__ import annotations

import enum
import re
import types
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import xmltodict
from moto.core.responses import BaseResponse
from moto.core.serialize import AttributePicker, EC2Serializer

from localcloud.aws import moto_answer_walk, moto_serializer, moto_xml
from tests.aws.plugin_env import public_image
from tests.unit.moto_recorded import recorded_clients

REQUEST_ID = re.compile(rb"<(requestId|RequestId)>[^<]*</(requestId|RequestId)>")


@pytest.fixture()
def moto_own(monkeypatch: pytest.MonkeyPatch) -> Callable[[], None]:
    """moto's own serializer now and after the test; the returned function installs the quicker one."""
    monkeypatch.setattr(AttributePicker, "__call__", AttributePicker.__call__)
    monkeypatch.setattr(xmltodict, "_validate_name", xmltodict._validate_name)  # type: ignore[attr-defined]
    monkeypatch.setattr(EC2Serializer, "_serialize_result", EC2Serializer._serialize_result)
    monkeypatch.setattr(EC2Serializer, "_serialize_body", EC2Serializer._serialize_body)
    monkeypatch.setattr(BaseResponse, "_enrich_response", BaseResponse.__dict__["_enrich_response"])
    for owner, flag in ((AttributePicker, moto_serializer._INSTALLED), (EC2Serializer, moto_answer_walk._INSTALLED),
                        (EC2Serializer, moto_xml._INSTALLED)):  # fmt: skip
        monkeypatch.setattr(owner, flag, False, raising=False)  # removed again afterwards

    def install() -> None:
        for module in (moto_serializer, moto_answer_walk, moto_xml):
            module.install()
            module.install()  # once only

    return install


@pytest.fixture()
def ec2(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, Any]]:
    """In-process moto EC2 (no server) whose raw answers are kept, with instances tagged and untagged."""
    with recorded_clients(monkeypatch, "ec2") as (clients, bodies):
        client = clients["ec2"]
        ami = public_image(client)
        vpc = client.create_vpc(CidrBlock="127.41.0.0/16")["Vpc"]["VpcId"]
        subnet = client.create_subnet(VpcId=vpc, CidrBlock="127.41.0.0/20")["Subnet"]["SubnetId"]
        tags = [{"Key": "elastic-slurm:cluster", "Value": "c1 <&> \"'"}, {"Key": "empty", "Value": ""}]
        client.run_instances(ImageId=ami, MinCount=3, MaxCount=3, SubnetId=subnet,
                             TagSpecifications=[{"ResourceType": "instance", "Tags": tags}])  # fmt: skip
        client.run_instances(ImageId=ami, MinCount=1, MaxCount=1)  # untagged: a transformer drops its empty tag set
        client.create_launch_template(
            LaunchTemplateName="lt", LaunchTemplateData={"InstanceType": "c7i.large", "ImageId": ami}
        )
        yield {"client": client, "bodies": bodies, "ami": ami, "vpc": vpc}


def _answers(ec2: dict[str, Any]) -> list[bytes]:
    """Raw answers, without request ids, of reads that cover instances (with their transformers and timestamps),
    volumes, images, network interfaces, subnets, security groups, VPCs, instance types (GPUs, EFA), launch
    templates, zones, regions, route tables, instance status, spot prices and tags."""
    client, bodies = ec2["client"], ec2["bodies"]
    start = len(bodies)
    client.describe_instances()
    client.describe_volumes()
    client.describe_images(ImageIds=[ec2["ami"]])
    client.describe_network_interfaces()
    client.describe_subnets(Filters=[{"Name": "vpc-id", "Values": [ec2["vpc"]]}])
    client.describe_security_groups()
    client.describe_vpcs()
    client.describe_instance_types(InstanceTypes=["c7i.large", "g5.xlarge", "p5.48xlarge", "t3.micro"])
    client.describe_launch_templates()
    client.describe_availability_zones()
    client.describe_regions()
    client.describe_route_tables()
    client.describe_instance_status(IncludeAllInstances=True)
    client.describe_spot_price_history(MaxResults=200)
    client.describe_tags()
    return [REQUEST_ID.sub(b"", body) for body in bodies[start:]]


def test_ec2_answers_are_byte_for_byte_moto_s_own(ec2: dict[str, Any], moto_own: Callable[[], None]) -> None:
    own = _answers(ec2)
    assert b"<instancesSet>" in own[0] and b"c1 &lt;&amp;&gt;" in own[0] and len(own) == 15
    moto_own()
    assert EC2Serializer._serialize_result.__qualname__.startswith("walked_result")
    assert EC2Serializer._serialize_body.__qualname__.startswith("written_body")
    assert _answers(ec2) == own
    assert _answers(ec2) == own  # from the names kept

    client, bodies = ec2["client"], ec2["bodies"]
    launched = len(bodies)  # RunInstances' own transformer (state "pending")
    client.run_instances(ImageId=ec2["ami"], MinCount=1, MaxCount=1)
    assert b"<name>pending</name>" in bodies[launched]
    peer = client.create_vpc(CidrBlock="127.42.0.0/16")["Vpc"]["VpcId"]
    for _ in range(2):  # moto sets this transformer anew for each peering: each answer shows its own
        pcx = client.create_vpc_peering_connection(VpcId=ec2["vpc"], PeerVpcId=peer)["VpcPeeringConnection"]
        assert pcx["Status"]["Code"] == "initiating-request"
    with pytest.raises(client.exceptions.ClientError, match="InvalidInstanceID"):  # an error: moto's own path
        client.describe_instances(InstanceIds=["i-00000000000000000"])


def test_each_answer_of_launches_and_changes_is_moto_s_own_for_the_same_result(
    ec2: dict[str, Any], moto_own: Callable[[], None], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Answers that cannot be read twice (RunInstances, CreateFleet, CreateVolume, a peering: each call makes new
    resources) are written both ways from the same result and compared, for every EC2 answer of the test."""
    own_result, own_body = EC2Serializer._serialize_result, EC2Serializer._serialize_body
    moto_own()
    serialize = EC2Serializer.serialize  # moto's own, which calls the installed walk and writer
    compared: list[str] = []

    def both(serializer: Any, result: Any) -> Any:
        answer = serialize(serializer, result)
        twin = EC2Serializer(serializer.operation_model, serializer.context, serializer.pretty_print,
                             serializer._value_picker)  # fmt: skip
        twin._serialize_result = types.MethodType(own_result, twin)  # type: ignore[method-assign]
        twin._serialize_body = types.MethodType(own_body, twin)  # type: ignore[method-assign]
        assert answer == serialize(twin, result)
        compared.append(serializer.operation_name)
        return answer

    monkeypatch.setattr(EC2Serializer, "serialize", both)
    client, ami = ec2["client"], ec2["ami"]
    subnet = client.describe_subnets(Filters=[{"Name": "vpc-id", "Values": [ec2["vpc"]]}])["Subnets"][0]["SubnetId"]
    tags = [{"ResourceType": "instance", "Tags": [{"Key": "elastic-slurm:pool", "Value": "p & q"}]}]
    ids = [i["InstanceId"] for i in client.run_instances(ImageId=ami, MinCount=2, MaxCount=2, SubnetId=subnet,
                                                         TagSpecifications=tags)["Instances"]]  # fmt: skip
    client.run_instances(ImageId=ami, MinCount=1, MaxCount=1)
    client.create_tags(Resources=ids, Tags=[{"Key": "Name", "Value": "cpu-1"}])
    template = client.describe_launch_templates()["LaunchTemplates"][0]["LaunchTemplateId"]
    client.create_fleet(Type="instant", TargetCapacitySpecification={"TotalTargetCapacity": 2,
                        "DefaultTargetCapacityType": "on-demand"},
                        LaunchTemplateConfigs=[{"LaunchTemplateSpecification": {"LaunchTemplateId": template,
                                                "Version": "$Default"}, "Overrides": [{"SubnetId": subnet}]}])  # fmt: skip
    client.describe_instances(Filters=[{"Name": "tag:elastic-slurm:pool", "Values": ["p & q"]}])
    client.create_volume(AvailabilityZone="us-east-1a", Size=8)
    client.create_key_pair(KeyName="k")
    peer = client.create_vpc(CidrBlock="127.43.0.0/16")["Vpc"]["VpcId"]
    for _ in range(2):
        client.create_vpc_peering_connection(VpcId=ec2["vpc"], PeerVpcId=peer)
    client.describe_vpc_peering_connections()
    client.terminate_instances(InstanceIds=ids)
    client.describe_instance_status(IncludeAllInstances=True)
    for needed in ("RunInstances", "CreateFleet", "CreateVolume", "CreateKeyPair", "CreateVpcPeeringConnection",
                   "TerminateInstances", "DescribeInstances"):  # fmt: skip
        assert needed in compared


def test_other_serializers_and_pickers_take_moto_s_own_walk() -> None:
    calls: list[str] = []

    def own(serializer: Any, resp: Any, result: Any) -> str:
        calls.append(type(serializer).__name__)
        return "moto's"

    walk = moto_answer_walk.walked_result(own)

    class Sub(EC2Serializer):
        pass

    class Picker(AttributePicker):
        pass

    odd = [Sub.__new__(Sub), EC2Serializer.__new__(EC2Serializer), EC2Serializer.__new__(EC2Serializer)]
    odd[0]._value_picker = AttributePicker()
    odd[1]._value_picker = Picker()
    odd[2]._value_picker = AttributePicker(alias_providers=[])
    assert [walk(s, {}, None) for s in odd] == ["moto's"] * 3
    assert calls == ["Sub", "EC2Serializer", "EC2Serializer"]


WRITTEN = [  # what moto's answers hold, and the corners of xmltodict's rules
    {"R": {"@xmlns": "http://ec2.amazonaws.com/doc/2016-11-15/", "a": "x", "b": ""}},
    {"R": {"a": None, "b": True, "c": False, "d": 3, "e": 2.5, "f": b"\xff-bytes", "g": [], "h": ["", None, "z"]}},
    {"R": {"item": [{"k": "1 < 2 & 3 > 2", "v": "\"q\" 'a'"}, {"k": "\u00e9\u4e2d"}], "@id": 'a"b<c>&'}},
    {"R": {"#text": "t & t", "@n": None, "c": {"#text": "", "@m": 1}, "d": {"#text": None}, "e": [[1, 2], {"x": []}]}},
    {"R": "just text"},
    {"R": ""},
    {"R": [{"a": "1"}]},
    {"R": []},
]
LEFT_TO_XMLTODICT = [
    {"R": {"#comment": "c", "a": "1"}},
    {"R": {"@xmlns": {"p": "urn:x"}, "a": "1"}},
    {"R": {"t": ("a", "b")}},
    {"R": {"bad name": "1"}},
    {"R": {3: "1"}},
    {"R": [{"a": "1"}, {"a": "2"}]},
    {"R": "1", "S": "2"},
    {},
]


@pytest.mark.parametrize("body", WRITTEN)
def test_the_xml_writer_writes_what_xmltodict_writes(body: dict[str, Any]) -> None:
    assert moto_xml.xml_document(body) == xmltodict.unparse(body, full_document=True, short_empty_elements=True)


@pytest.mark.parametrize("body", LEFT_TO_XMLTODICT)
def test_what_the_xml_writer_leaves_xmltodict_writes_or_refuses(body: dict[str, Any]) -> None:
    with pytest.raises(moto_xml.Unwritten):
        moto_xml.xml_document(body)

    def own(serializer: Any, answer: Any) -> str:
        return str(xmltodict.unparse(answer, full_document=True, short_empty_elements=True))

    write = moto_xml.written_body(own)
    serializer = type("S", (), {"pretty_print": False})()
    try:
        expected: Any = own(serializer, body)
    except ValueError as refused:
        expected = type(refused)
    try:
        assert write(serializer, body) == expected
    except ValueError as refused:
        assert type(refused) is expected


def test_the_request_id_is_still_written_where_an_answer_names_it() -> None:
    own = BaseResponse._enrich_response
    enrich = moto_xml.request_id_where_named(own)
    named = "<R><RequestId>x</RequestId><a>1</a></R>"
    for body in (named, "<R><requestId>x</requestId></R>", b"<R><RequestId>x</RequestId></R>", ""):
        headers: dict[str, Any] = {"status": 200}
        own_headers: dict[str, Any] = {"status": 200}
        got, own_got = enrich(headers, body), own(own_headers, body)
        assert headers["status"] == "200" and len(headers["x-amzn-requestid"]) == 52
        assert set(headers) == set(own_headers)
        if isinstance(body, str) and "<RequestId>" in body:
            assert got[1] == named.replace(">x<", f">{headers['x-amzn-requestid']}<") and got[1] != body
        else:
            assert got[1] is body and own_got[1] == body  # no match: moto's substitution returns the body as it was


class _Kind(str, enum.Enum):  # noqa: UP042  # a str mixin, not StrEnum: its format() is not its value
    A = "a"


def test_a_str_subclass_is_written_as_its_value_as_xmltodict_writes_it() -> None:
    body = {"R": {"k": _Kind.A, "l": [_Kind.A], "#text": _Kind.A, "@m": _Kind.A}}
    assert moto_xml.xml_document(body) == xmltodict.unparse(body, full_document=True, short_empty_elements=True)
    assert "<k>a</k>" in moto_xml.xml_document(body)
    with pytest.raises(moto_xml.Unwritten):  # a str subclass as a name: xmltodict's own writing
        moto_xml.xml_document({"R": {_Kind.A: "1"}})
