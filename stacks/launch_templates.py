"""Launch templates: one per pool and region, shared by the home cluster stack and the remote-region stacks.

IMDSv2 required, instance metadata tags on (the node reads its Slurm name from its tags), encrypted gp3 root volume,
the Image Builder AMI resolved from SSM at launch time (a new image needs no redeploy), the compute boot script.

A pool with EFA (`pool_uses_efa`, docs/efa.md) gets the template's network interfaces instead of top-level security
groups: EC2 takes security groups per interface once a template has interfaces. The subnet is never in the template:
the plugin gives it per launch in CreateFleet's overrides (slurm_plugin/powersave/ec2.py launches EFA pools with
CreateFleet only, because RunInstances refuses an instance-level SubnetId next to a template's network interfaces).
"""

from __future__ import annotations

from typing import Any

import aws_cdk as cdk
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_iam as iam
from constructs import Construct

from cluster_config.checks import architecture_of
from cluster_config.efa import EFA_NETWORK_CARDS, efa_layout_type, pool_uses_efa
from cluster_config.model import Pool
from stacks.naming import TAG_POOL, TAG_ROLE, ami_parameter, image_flavor, root_device
from stacks.user_data import boot_commands, pool_values

ROOT_VOLUME_GIB = {"controller": 100, "compute": 50, "gpu": 200}


def efa_network_interfaces(instance_type: str, efa_group: str, primary_groups: list[str]) -> list[dict[str, Any]]:
    """The launch template's NetworkInterfaces for EFA on `instance_type` (CloudFormation property names).

    One network card: a single EFA (EFA with ENA) at network card 0, device index 0, carrying every security group.
    Several cards (EFA_NETWORK_CARDS): AWS's documented P5 layout "use case 1" — an ENA primary interface (card 0,
    device 0) with every security group, an EFA-only interface at card 0 device 1, and one EFA-only interface at
    device 0 of each further card (3,200 Gbps of EFA, one private IP). EFA-only interfaces carry only `efa_group`,
    the group whose self rules let EFA traffic through (stacks/network.py).
    """
    cards = EFA_NETWORK_CARDS.get(instance_type, 1)
    if cards == 1:
        return [_interface(0, 0, "efa", primary_groups)]
    interfaces = [_interface(0, 0, "interface", primary_groups), _interface(0, 1, "efa-only", [efa_group])]
    interfaces += [_interface(card, 0, "efa-only", [efa_group]) for card in range(1, cards)]
    return interfaces


def _interface(card: int, device: int, kind: str, groups: list[str]) -> dict[str, Any]:
    return {
        "NetworkCardIndex": card,
        "DeviceIndex": device,
        "InterfaceType": kind,
        "Groups": groups,
        "DeleteOnTermination": True,
    }


def root_volume(size_gib: int, base_os: str) -> ec2.BlockDevice:
    """An encrypted gp3 root volume, under the root device name of `base_os`'s images."""
    return ec2.BlockDevice(
        device_name=root_device(base_os),
        volume=ec2.BlockDeviceVolume.ebs(size_gib, encrypted=True, volume_type=ec2.EbsDeviceVolumeType.GP3),
    )


def user_data(role: str, env: dict[str, str], signal_url: str | None = None) -> ec2.UserData:
    """Boot script of a controller or compute node (stacks/user_data.py)."""
    data = ec2.UserData.for_linux()
    data.add_commands(*boot_commands(role, env, signal_url))
    return data


def extra_security_groups(scope: Construct, template: ec2.LaunchTemplate, name: str, group_ids: list[str]) -> None:
    """Add the config's own security groups (ids of the cluster's VPC) to a launch template."""
    for index, group_id in enumerate(group_ids):
        group = ec2.SecurityGroup.from_security_group_id(scope, f"{name}Sg{index}", group_id, mutable=False)
        template.connections.add_security_group(group)


def add_managed_policies(scope: Construct, role: iam.Role, name: str, arns: list[str]) -> None:
    """Attach the config's managed policies to a node role, acknowledging cdk-nag's AWS-managed-policy finding for
    each: the operator chose them (clusters[].iam_policies)."""
    for index, arn in enumerate(arns):
        role.add_managed_policy(iam.ManagedPolicy.from_managed_policy_arn(scope, f"{name}Policy{index}", arn))
        cdk.Validations.of(scope).acknowledge(
            cdk.Acknowledgment(
                id=f"AwsSolutions::AwsSolutions-IAM4[Policy::{arn}]",
                reason="Added by the operator in the config's clusters[].iam_policies.",
            )
        )


def pool_launch_template(
    scope: Construct,
    *,
    cluster: str,
    partition: str,
    pool: Pool,
    profile: iam.IInstanceProfile,
    security_group: ec2.ISecurityGroup,
    boot_env: dict[str, str],
    placement_group: ec2.PlacementGroup | None,
    base_os: str,
    home_region: str,
) -> ec2.LaunchTemplate:
    """The launch template the power-save plugin launches `pool`'s nodes from."""
    key = f"{partition}-{pool.name}"
    gpu = pool.gpu is not None
    efa = pool_uses_efa(pool)
    flavor = image_flavor(architecture_of(pool.instance_types[0]), gpu)
    image = ec2.MachineImage.resolve_ssm_parameter_at_launch(ami_parameter(cluster, flavor))
    if pool.ami_id is not None:  # a home-region pool's own AMI (the validator refuses it on other regions' pools)
        image = ec2.MachineImage.generic_linux({cdk.Stack.of(scope).region: pool.ami_id})
    template = ec2.LaunchTemplate(
        scope,
        f"Lt-{key}",
        launch_template_name=f"{cluster}-{key}",
        machine_image=image,
        instance_type=ec2.InstanceType(pool.instance_types[0]),  # the plugin overrides it per launch
        instance_profile=profile,
        security_group=None if efa else security_group,
        http_tokens=ec2.LaunchTemplateHttpTokens.REQUIRED,  # IMDSv2 only
        http_endpoint=True,
        http_put_response_hop_limit=1,
        instance_metadata_tags=True,
        block_devices=[root_volume(ROOT_VOLUME_GIB["gpu" if gpu else "compute"], base_os)],
        placement_group=placement_group,
        user_data=user_data("compute", {**boot_env, **pool_values(partition, pool)}),
    )
    extra = pool.security_groups if cdk.Stack.of(scope).region == home_region else []
    if efa:
        groups = [security_group.security_group_id, *extra]
        interfaces = efa_network_interfaces(efa_layout_type(pool), security_group.security_group_id, groups)
        cfn = template.node.default_child
        assert isinstance(cfn, ec2.CfnLaunchTemplate)
        cfn.add_property_override("LaunchTemplateData.NetworkInterfaces", interfaces)
    elif extra:
        extra_security_groups(scope, template, f"Lt{key}", extra)
    cdk.Tags.of(template).add(TAG_POOL, key)
    cdk.Tags.of(template).add(TAG_ROLE, "compute")
    return template
