"""Launch templates: one per pool and region, shared by the home cluster stack and the remote-region stacks.

IMDSv2 required, instance metadata tags on (the node reads its Slurm name from its tags), encrypted gp3 root volume,
the Image Builder AMI resolved from SSM at launch time (a new image needs no redeploy), the compute boot script.
"""

from __future__ import annotations

import aws_cdk as cdk
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_iam as iam
from constructs import Construct

from cluster_config.checks import architecture_of
from cluster_config.model import Pool
from stacks.naming import TAG_POOL, TAG_ROLE, ami_parameter, image_flavor, root_device
from stacks.user_data import boot_commands

ROOT_VOLUME_GIB = {"controller": 100, "compute": 50, "gpu": 200}


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
) -> ec2.LaunchTemplate:
    """The launch template the power-save plugin launches `pool`'s nodes from."""
    key = f"{partition}-{pool.name}"
    gpu = pool.gpu is not None
    flavor = image_flavor(architecture_of(pool.instance_types[0]), gpu)
    template = ec2.LaunchTemplate(
        scope,
        f"Lt-{key}",
        launch_template_name=f"{cluster}-{key}",
        machine_image=ec2.MachineImage.resolve_ssm_parameter_at_launch(ami_parameter(cluster, flavor)),
        instance_type=ec2.InstanceType(pool.instance_types[0]),  # the plugin overrides it per launch
        instance_profile=profile,
        security_group=security_group,
        http_tokens=ec2.LaunchTemplateHttpTokens.REQUIRED,  # IMDSv2 only
        http_endpoint=True,
        http_put_response_hop_limit=1,
        instance_metadata_tags=True,
        block_devices=[root_volume(ROOT_VOLUME_GIB["gpu" if gpu else "compute"], base_os)],
        placement_group=placement_group,
        user_data=user_data("compute", {**boot_env, "ES_POOL": key}),
    )
    cdk.Tags.of(template).add(TAG_POOL, key)
    cdk.Tags.of(template).add(TAG_ROLE, "compute")
    return template
