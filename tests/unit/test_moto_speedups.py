"""The emulated AWS's indexed moto lookups (localcloud/aws/moto_speedups.py) answer exactly what moto's own scans answer."""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from moto import mock_aws
from moto.ec2.exceptions import InvalidInstanceIdError
from moto.ec2.models import ec2_backends
from moto.ec2.models.amis import AmiBackend
from moto.ec2.models.core import TaggedEC2Resource
from moto.ec2.models.instances import InstanceBackend

from localcloud.aws import moto_speedups
from tests.aws.plugin_env import public_image

ACCOUNT = "123456789012"  # moto's default account
REGION = "us-east-1"


@pytest.fixture()
def ec2() -> Iterator[Any]:
    """An in-process moto EC2 client (no server), with dummy credentials."""
    keys = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_DEFAULT_REGION": REGION}
    saved = {k: os.environ.get(k) for k in keys}
    os.environ.update(keys)
    try:
        with mock_aws():
            yield boto3.client("ec2", region_name=REGION)
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


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


def test_image_by_id_answers_what_moto_answers_and_leaves_every_other_form_to_moto(ec2: Any) -> None:
    backend = ec2_backends[ACCOUNT][REGION]
    own = AmiBackend.describe_images
    calls: list[tuple[Any, ...]] = []

    def recording(backend: Any, *args: Any) -> list[Any]:
        calls.append(args)
        return own(backend, *args)

    fast = moto_speedups.image_by_id(recording)
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
    for form in other_forms:
        assert fast(backend, **form) == own(backend, **form)
    assert len(calls) == len(other_forms)  # each went to moto's own code


def test_install_patches_once_and_answers_stay_the_same(ec2: Any) -> None:
    originals = (TaggedEC2Resource.get_tags, InstanceBackend.get_instance, AmiBackend.describe_images)
    try:
        moto_speedups.install()
        moto_speedups.install()
        assert TaggedEC2Resource.get_tags is moto_speedups.indexed_tags
        assert InstanceBackend.get_instance is moto_speedups.indexed_instance
        assert AmiBackend.describe_images is not originals[2]  # wrapped once, not twice
        assert AmiBackend.describe_images.__closure__[0].cell_contents is originals[2]  # type: ignore[attr-defined]
        ids = _launch(ec2, 5, {"elastic-slurm:cluster": "c1", "elastic-slurm:pool": "cpu-a"})
        _launch(ec2, 2, {"elastic-slurm:cluster": "c2"})
        filters = [{"Name": "tag:elastic-slurm:cluster", "Values": ["c1"]}]
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
        if "_elastic_slurm_indexed" in TaggedEC2Resource.__dict__:
            delattr(TaggedEC2Resource, "_elastic_slurm_indexed")
