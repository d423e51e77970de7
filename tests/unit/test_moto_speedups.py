"""The emulated AWS's indexed moto lookups (localcloud/aws/moto_speedups.py) answer exactly what moto's own scans answer."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from moto import mock_aws
from moto.ec2 import utils as ec2_utils
from moto.ec2.exceptions import InvalidInstanceIdError, InvalidVolumeIdError
from moto.ec2.models import ec2_backends
from moto.ec2.models import instances as instances_module
from moto.ec2.models.amis import AmiBackend
from moto.ec2.models.core import TaggedEC2Resource
from moto.ec2.models.elastic_block_store import EBSBackend
from moto.ec2.models.instances import InstanceBackend

from localcloud.aws import moto_speedups
from localcloud.aws.emulated_aws import DUMMY_CREDENTIALS
from tests.aws.plugin_env import public_image

ACCOUNT = "123456789012"  # moto's default account
REGION = "us-east-1"


@pytest.fixture()
def ec2(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """An in-process moto EC2 client (no server), with dummy credentials."""
    for key, value in {**DUMMY_CREDENTIALS, "AWS_DEFAULT_REGION": REGION}.items():
        monkeypatch.setenv(key, value)  # put back by monkeypatch
    with mock_aws():
        yield boto3.client("ec2", region_name=REGION)


def _launch(ec2: Any, count: int, tags: dict[str, str]) -> list[str]:
    ami = public_image(ec2)
    spec = [{"ResourceType": "instance", "Tags": [{"Key": k, "Value": v} for k, v in tags.items()]}]
    answer = ec2.run_instances(ImageId=ami, MinCount=count, MaxCount=count, TagSpecifications=spec)
    return [i["InstanceId"] for i in answer["Instances"]]


def _scanned_tags(resource: Any) -> list[dict[str, str]]:
    """moto's own lookup: describe_tags filtered by the resource id."""
    result: list[dict[str, str]] = resource.ec2_backend.describe_tags(filters={"resource-id": [resource.id]})
    return result


def test_indexed_tags_equal_describe_tags_for_instances_subnets_and_untagged(ec2: Any) -> None:
    ids = _launch(ec2, 3, {"elastic-slurm:cluster": "c1", "Name": "n1"})
    other = _launch(ec2, 2, {"elastic-slurm:cluster": "c2"})
    ec2.create_tags(Resources=[ids[0]], Tags=[{"Key": "extra", "Value": "x"}])
    ec2.delete_tags(Resources=[ids[1]], Tags=[{"Key": "Name"}])
    vpc = ec2.create_vpc(CidrBlock="127.20.0.0/16")["Vpc"]["VpcId"]
    subnet = ec2.create_subnet(VpcId=vpc, CidrBlock="127.20.0.0/20")["Subnet"]["SubnetId"]
    ec2.create_tags(Resources=[subnet], Tags=[{"Key": "Name", "Value": "s"}])
    backend = ec2_backends[ACCOUNT][REGION]
    resources: list[Any] = [backend.get_instance_by_id(i) for i in ids + other]
    resources += [backend.get_subnet(subnet), backend.vpcs[vpc]]  # the VPC has no tags
    for resource in resources:
        assert moto_speedups.indexed_tags(resource) == _scanned_tags(resource)
    assert [t["key"] for t in moto_speedups.indexed_tags(resources[0])] == ["elastic-slurm:cluster", "Name", "extra"]
    assert moto_speedups.indexed_tags(backend.vpcs[vpc]) == []
    assert vpc not in backend.tags  # reading an untagged resource adds no entry to moto's tag store


def test_indexed_instance_finds_what_the_scan_finds_across_launches(ec2: Any) -> None:
    backend = ec2_backends[ACCOUNT][REGION]
    first = _launch(ec2, 4, {"k": "1"})
    assert moto_speedups.indexed_instance(backend, first[2]) is InstanceBackend.get_instance(backend, first[2])
    second = _launch(ec2, 3, {"k": "2"})  # after the index was filled: new instances are found too
    for instance_id in first + second:
        assert moto_speedups.indexed_instance(backend, instance_id) is InstanceBackend.get_instance(
            backend, instance_id
        )
    ec2.terminate_instances(InstanceIds=[first[0]])
    assert moto_speedups.indexed_instance(backend, first[0]).state == "terminated"
    with pytest.raises(InvalidInstanceIdError):
        moto_speedups.indexed_instance(backend, "i-00000000000000000")


def _wrapped_recording(wrap: Any, own: Any) -> tuple[Any, list[tuple[Any, ...]]]:
    """`wrap` around moto's own method `own`, with the arguments of each call that reaches `own` noted."""
    calls: list[tuple[Any, ...]] = []

    def recording(backend: Any, *args: Any) -> list[Any]:
        calls.append(args)
        return own(backend, *args)  # type: ignore[no-any-return]

    return wrap(recording), calls


def _each_goes_to_moto(
    fast: Any, own: Any, backend: Any, forms: list[dict[str, Any]], calls: list[tuple[Any, ...]]
) -> None:
    """Each of `forms` gets moto's own answer from `fast`, through moto's own code (one recorded call each)."""
    before = len(calls)
    for form in forms:
        assert fast(backend, **form) == own(backend, **form)
    assert len(calls) - before == len(forms)


def test_image_by_id_answers_what_moto_answers_and_leaves_every_other_form_to_moto(ec2: Any) -> None:
    backend = ec2_backends[ACCOUNT][REGION]
    own = AmiBackend.describe_images
    fast, calls = _wrapped_recording(moto_speedups.image_by_id, own)
    ami = public_image(ec2)
    for value in (ami, [ami], "ami-00000000", ["ami-00000000"]):  # one plain id, as a string or a one-item list
        assert fast(backend, filters={"image-id": value}) == own(backend, filters={"image-id": value})
    assert calls == []  # answered without moto's scan
    assert [a.id for a in fast(backend, filters={"image-id": ami})] == [ami]
    other_forms: list[dict[str, Any]] = [
        {"filters": {"image-id": ami[:-2] + "*"}},  # a pattern: fnmatch's, not ours
        {"filters": {"image-id": [ami, "ami-00000000"]}},  # two ids
        {"filters": {"image-id": ami, "architecture": "x86_64"}},  # another filter too
        {"ami_ids": [ami]},
        {"owners": ["amazon"], "filters": {"image-id": ami}},
    ]
    _each_goes_to_moto(fast, own, backend, other_forms, calls)


def test_volume_by_id_answers_what_moto_answers_and_leaves_every_other_form_to_moto(ec2: Any) -> None:
    backend = ec2_backends[ACCOUNT][REGION]
    own = EBSBackend.describe_volumes
    fast, calls = _wrapped_recording(moto_speedups.volume_by_id, own)
    _launch(ec2, 3, {"k": "1"})  # each with its root volume
    volumes = list(backend.volumes)
    assert len(volumes) == 3
    for volume_id in volumes:
        assert fast(backend, [volume_id]) == own(backend, [volume_id])
        assert fast(backend, volume_ids=[volume_id])[0].id == volume_id
    assert calls == []  # answered without moto's scan
    for unknown in (fast, own):
        with pytest.raises(InvalidVolumeIdError, match="vol-00000000"):
            unknown(backend, ["vol-00000000"])
    other_forms: list[dict[str, Any]] = [
        {"volume_ids": volumes[:2]},  # two ids
        {"volume_ids": volumes[:1], "filters": {"status": ["in-use"]}},  # a filter too
        {"filters": {"status": ["in-use"]}},
        {},
    ]
    _each_goes_to_moto(fast, own, backend, other_forms, calls)


def test_tag_prefiltered_finds_what_moto_s_filter_finds(ec2: Any) -> None:
    backend = ec2_backends[ACCOUNT][REGION]
    c1 = _launch(ec2, 3, {"elastic-slurm:cluster": "c1", "elastic-slurm:pool": "cpu-a"})
    c2 = _launch(ec2, 2, {"elastic-slurm:cluster": "c2", "elastic-slurm:pool": "cpu-a"})
    bare = _launch(ec2, 1, {"other": "x"})
    ec2.terminate_instances(InstanceIds=c1[:1])
    own = instances_module.filter_reservations
    fast = moto_speedups.tag_prefiltered(own)
    cases: list[dict[str, list[str]]] = [
        {"tag:elastic-slurm:cluster": ["c1"]},
        {"tag:elastic-slurm:cluster": ["c1", "c2"], "tag:elastic-slurm:pool": ["cpu-a"]},
        {"tag:elastic-slurm:cluster": ["c1"], "instance-state-name": ["running"]},
        {"tag:elastic-slurm:cluster": ["c*"]},  # a pattern: moto's own filter alone
        {"tag:elastic-slurm:cluster": ["C1"]},  # case counts, as in moto
        {"tag:missing": ["c1"]},
        {"tag-key": ["other"]},
        {"instance-state-name": ["terminated"]},
    ]
    found = []
    for filters in cases:
        ours = fast([copy.copy(r) for r in backend.reservations.values()], filters)
        theirs = own([copy.copy(r) for r in backend.reservations.values()], filters)
        assert [(r.id, [i.id for i in r.instances]) for r in ours] == [
            (r.id, [i.id for i in r.instances]) for r in theirs
        ], filters
        found.append(sorted(i.id for r in ours for i in r.instances))
    assert found[0] == sorted(c1) and found[1] == sorted(c1 + c2) and found[2] == sorted(c1[1:])
    assert found[3] == sorted(c1 + c2) and found[4] == found[5] == [] and found[6] == bare and found[7] == c1[:1]


def test_install_patches_once_and_answers_stay_the_same(ec2: Any) -> None:
    originals = (TaggedEC2Resource.get_tags, InstanceBackend.get_instance, AmiBackend.describe_images)
    own_volumes = EBSBackend.describe_volumes
    own_translate = ec2_utils.simple_aws_filter_to_re
    own_filter = instances_module.filter_reservations
    try:
        moto_speedups.install()
        moto_speedups.install()
        assert TaggedEC2Resource.get_tags is moto_speedups.indexed_tags
        assert InstanceBackend.get_instance is moto_speedups.indexed_instance
        assert AmiBackend.describe_images is not originals[2]  # wrapped once, not twice
        assert AmiBackend.describe_images.__closure__[0].cell_contents is originals[2]  # type: ignore[attr-defined]
        assert EBSBackend.describe_volumes.__closure__[0].cell_contents is own_volumes  # type: ignore[attr-defined]
        assert ec2_utils.simple_aws_filter_to_re.__wrapped__ is own_translate  # type: ignore[attr-defined]
        assert instances_module.filter_reservations.__closure__[0].cell_contents is own_filter  # type: ignore[attr-defined]
        for value in ("c1", "c*", "c?", r"c\*", "[c]1", ""):  # the kept translation is moto's own
            assert ec2_utils.simple_aws_filter_to_re(value) == own_translate(value)
        ids = _launch(ec2, 5, {"elastic-slurm:cluster": "c1", "elastic-slurm:pool": "cpu-a"})
        _launch(ec2, 2, {"elastic-slurm:cluster": "c2"})
        filters = [{"Name": "tag:elastic-slurm:cluster", "Values": ["c1"]}]
        patterns = [{"Name": "tag:elastic-slurm:cluster", "Values": ["c*"]}]
        assert len([i for r in ec2.describe_instances(Filters=patterns)["Reservations"] for i in r["Instances"]]) == 7
        found = [i for r in ec2.describe_instances(Filters=filters)["Reservations"] for i in r["Instances"]]
        assert sorted(i["InstanceId"] for i in found) == sorted(ids)
        assert all({"Key": "elastic-slurm:pool", "Value": "cpu-a"} in i["Tags"] for i in found)
        ec2.terminate_instances(InstanceIds=ids[:2])  # ends them through the indexed instance lookup
        after = [i for r in ec2.describe_instances(InstanceIds=ids)["Reservations"] for i in r["Instances"]]
        assert {i["Architecture"] for i in after} == {"x86_64"}  # read from the image through image_by_id
        assert sorted(i["State"]["Name"] for i in after) == ["running"] * 3 + ["terminated"] * 2
    finally:
        TaggedEC2Resource.get_tags, InstanceBackend.get_instance = originals[:2]  # type: ignore[method-assign]
        AmiBackend.describe_images = originals[2]  # type: ignore[method-assign]
        EBSBackend.describe_volumes = own_volumes  # type: ignore[method-assign]
        ec2_utils.simple_aws_filter_to_re = own_translate
        instances_module.filter_reservations = own_filter
        if "_elastic_slurm_indexed" in TaggedEC2Resource.__dict__:
            delattr(TaggedEC2Resource, "_elastic_slurm_indexed")
