"""Create, in the emulated AWS, what the CDK stacks would create for one cluster: VPCs, subnets, AMI, launch templates.

Every VPC uses a loopback range (home region 127.16.0.0/16, remote regions 127.17.0.0/16, 127.18.0.0/16, ...) with
one /20 subnet per AZ, so every instance's private IP is a 127.x address this host can reach. The result is the
same `DeployedInfra` the real deployment hands to `render`.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from cluster_config.checks import network_azs
from cluster_config.model import Cluster
from slurm_plugin.manifest import TAG_CLUSTER, DeployedInfra

HOME_VPC_SECOND_OCTET = 16
SUBNET_PREFIX = 20

Ec2ClientFactory = Callable[[str], Any]


@dataclass(frozen=True)
class RegionPlan:
    """The emulated network of one region (pure)."""

    region: str
    vpc_cidr: str
    subnets: dict[str, str]  # AZ -> CIDR


def plan_networks(cluster: Cluster) -> list[RegionPlan]:
    """Loopback VPC and subnet CIDRs for the home region and each remote region, in that order."""
    networks = [(cluster.region, cluster.network), *((r.region, r.network) for r in cluster.remote_regions)]
    plans = []
    for offset, (region, network) in enumerate(networks):
        vpc = ipaddress.ip_network(f"127.{HOME_VPC_SECOND_OCTET + offset}.0.0/16")
        blocks = vpc.subnets(new_prefix=SUBNET_PREFIX)
        plans.append(RegionPlan(region, str(vpc), {az: str(next(blocks)) for az in network_azs(network)}))
    return plans


def _tags(cluster: Cluster, name: str) -> list[dict[str, Any]]:
    tags = {**cluster.tags, TAG_CLUSTER: cluster.name, "Name": name}
    return [{"ResourceType": "", "Tags": [{"Key": k, "Value": v} for k, v in tags.items()]}]


def _tag_spec(resource: str, cluster: Cluster, name: str) -> list[dict[str, Any]]:
    spec = _tags(cluster, name)
    spec[0]["ResourceType"] = resource
    return spec


def compute_image(ec2: Any, cluster: Cluster) -> str:
    """Register a stand-in compute AMI (the image the Image Builder pipeline would bake)."""
    name = f"elastic-slurm-{cluster.name}-compute-local"
    found = ec2.describe_images(Filters=[{"Name": "name", "Values": [name]}], Owners=["self"])["Images"]
    if found:
        return str(found[0]["ImageId"])
    image = ec2.register_image(
        Name=name,
        Architecture="x86_64",
        RootDeviceName="/dev/xvda",
        VirtualizationType="hvm",
        BlockDeviceMappings=[{"DeviceName": "/dev/xvda", "Ebs": {"VolumeSize": 8}}],
    )
    return str(image["ImageId"])


def create_infra(cluster: Cluster, client: Ec2ClientFactory, endpoint_url: str) -> DeployedInfra:
    """Create VPC/subnets per region and one launch template per pool per region it may use."""
    subnets: dict[str, str] = {}
    templates: dict[str, str] = {}
    for plan in plan_networks(cluster):
        ec2 = client(plan.region)
        vpc_id = ec2.create_vpc(
            CidrBlock=plan.vpc_cidr, TagSpecifications=_tag_spec("vpc", cluster, f"{cluster.name}-{plan.region}")
        )["Vpc"]["VpcId"]
        for az, cidr in plan.subnets.items():
            subnet = ec2.create_subnet(
                VpcId=vpc_id,
                CidrBlock=cidr,
                AvailabilityZone=az,
                TagSpecifications=_tag_spec("subnet", cluster, f"{cluster.name}-compute-{az}"),
            )
            subnets[az] = subnet["Subnet"]["SubnetId"]
        image_id = compute_image(ec2, cluster)
        for partition in cluster.partitions:
            for pool in partition.pools:
                key = f"{partition.name}-{pool.name}"
                template = ec2.create_launch_template(
                    LaunchTemplateName=f"{cluster.name}-{key}-{plan.region}",
                    LaunchTemplateData={
                        "ImageId": image_id,
                        "InstanceType": pool.instance_types[0],
                        "TagSpecifications": _tag_spec("instance", cluster, key),
                    },
                    TagSpecifications=_tag_spec("launch-template", cluster, key),
                )
                templates[f"{key}@{plan.region}"] = template["LaunchTemplate"]["LaunchTemplateId"]
    groups = _placement_groups(cluster)
    return DeployedInfra(
        subnets=subnets, launch_templates=templates, placement_groups=groups, aws_endpoint_url=endpoint_url
    )


def _placement_groups(cluster: Cluster) -> dict[str, str]:
    """A placement group name per pool that asks for one (moto has no CreatePlacementGroup: names only)."""
    groups: dict[str, str] = {}
    for partition in cluster.partitions:
        for pool in partition.pools:
            if not pool.placement_group:
                continue
            key = f"{partition.name}-{pool.name}"
            name = f"{cluster.name}-{key}"
            groups[key] = name
    return groups
