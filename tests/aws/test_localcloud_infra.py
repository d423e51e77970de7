"""`local up`'s stand-in for the CDK stacks, against the emulated AWS: loopback VPCs, subnets per AZ, launch templates."""

from __future__ import annotations

import ipaddress
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from cluster_config import load, parse
from localcloud.aws.aws_setup import create_infra
from localcloud.aws.emulated_aws import EmulatedAws
from slurm_plugin.manifest import TAG_CLUSTER

EXAMPLES = Path(__file__).resolve().parents[2] / "cluster_config" / "examples"


@pytest.fixture(scope="module")
def aws(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmulatedAws]:
    handle = EmulatedAws.start(tmp_path_factory.mktemp("aws"))
    try:
        yield handle
    finally:
        handle.stop()


def test_local_demo_gets_a_loopback_subnet_in_each_az_and_a_template_per_pool(aws: EmulatedAws) -> None:
    cluster = load(EXAMPLES / "local-demo.yaml").clusters[0]
    infra = create_infra(cluster, lambda region: aws.client("ec2", region), aws.url)
    assert sorted(infra.subnets) == ["us-east-1a", "us-east-1b", "us-east-1c", "us-west-2a"]
    assert set(infra.launch_templates) >= {"cpu-big@us-east-1", "cpu-small@us-east-1", "cpu-small@us-west-2"}
    assert infra.aws_endpoint_url == aws.url
    ec2 = aws.client("ec2", "us-east-1")
    home = [subnet_id for az, subnet_id in infra.subnets.items() if az.startswith("us-east-1")]
    subnets = ec2.describe_subnets(SubnetIds=home)["Subnets"]
    for subnet in subnets:
        assert infra.subnets[subnet["AvailabilityZone"]] == subnet["SubnetId"]
        assert ipaddress.ip_network(subnet["CidrBlock"]).subnet_of(ipaddress.ip_network("127.16.0.0/16"))
    home_templates = [t for key, t in infra.launch_templates.items() if key.endswith("@us-east-1")]
    templates = ec2.describe_launch_templates(LaunchTemplateIds=home_templates)
    for template in templates["LaunchTemplates"]:
        assert {"Key": TAG_CLUSTER, "Value": "local"} in template["Tags"]


def test_a_remote_region_gets_its_own_vpc_and_templates(aws: EmulatedAws) -> None:
    data = yaml.safe_load((EXAMPLES / "local-demo.yaml").read_text())
    data["clusters"][0]["name"] = "tworegions"  # the module's emulated AWS already has the `local` templates
    cluster = parse(data).clusters[0]
    infra = create_infra(cluster, lambda region: aws.client("ec2", region), aws.url)
    remote = cluster.remote_regions[0].region
    assert any(key.endswith(f"@{remote}") for key in infra.launch_templates)
    remote_subnets = aws.client("ec2", remote).describe_subnets()["Subnets"]
    assert "127.17.0.0/20" in {s["CidrBlock"] for s in remote_subnets}
    assert infra.subnets["us-west-2a"] in {s["SubnetId"] for s in remote_subnets}
