"""Login nodes: per login pool, a launch template (the compute image, login user data) and an Auto Scaling group.

A login node runs no slurmd and is no Slurm node: its boot (stacks/user_data.py, role `login`) installs the munge key,
mounts the shared file systems, reads the controllers' address from the conf-server parameter and starts Slurm's
`sackd`, which fetches the config into /run/slurm/conf (configless, as the compute nodes) and receives every
reconfigure; users' `sbatch`/`srun`/`squeue` read it there. The group keeps `count` nodes (replacing one that fails
EC2's status checks), launches them once the controllers are healthy and replaces them one at a time when their
launch template changes (a replaced controller changes it: the user data names the controllers' instance ids). They have their own role
(the compute nodes' node statements: munge key, the cluster's parameters, logs, file systems, custom action scripts;
nothing of EC2), the cluster's node security group (Slurm ports to the controllers, srun's ports from the compute
nodes) and its SSH group.
"""

from __future__ import annotations

import aws_cdk as cdk
from aws_cdk import aws_autoscaling as autoscaling
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_iam as iam
from constructs import Construct

from cluster_config.checks import architecture_of
from cluster_config.model import LoginPool
from stacks.launch_templates import ROOT_VOLUME_GIB, extra_security_groups, root_volume, user_data
from stacks.naming import TAG_LOGIN_POOL, TAG_ROLE, ami_parameter, image_flavor
from stacks.user_data import login_values


class LoginNodes(Construct):
    """One login pool: launch template + Auto Scaling group in the home region's subnets."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        cluster: str,
        pool: LoginPool,
        base_os: str,
        vpc: ec2.IVpc,
        subnets: list[ec2.ISubnet],
        profile: iam.IInstanceProfile,
        security_groups: list[ec2.ISecurityGroup],
        boot_env: dict[str, str],
        after: list[cdk.CfnWaitCondition],
    ) -> None:
        super().__init__(scope, construct_id)
        flavor = image_flavor(architecture_of(pool.instance_type), False)
        self.launch_template = ec2.LaunchTemplate(
            self,
            "Lt",
            launch_template_name=f"{cluster}-login-{pool.name}",
            machine_image=ec2.MachineImage.resolve_ssm_parameter_at_launch(ami_parameter(cluster, flavor)),
            instance_type=ec2.InstanceType(pool.instance_type),
            instance_profile=profile,
            security_group=security_groups[0],
            http_tokens=ec2.LaunchTemplateHttpTokens.REQUIRED,  # IMDSv2 only
            http_endpoint=True,
            http_put_response_hop_limit=1,
            instance_metadata_tags=True,
            block_devices=[root_volume(ROOT_VOLUME_GIB["compute"], base_os)],
            user_data=user_data("login", {**boot_env, **login_values(pool)}),
        )
        for group in security_groups[1:]:
            self.launch_template.connections.add_security_group(group)
        extra_security_groups(self, self.launch_template, "Extra", pool.security_groups)
        cdk.Tags.of(self.launch_template).add(TAG_ROLE, "login")
        cdk.Tags.of(self.launch_template).add(TAG_LOGIN_POOL, pool.name)
        self.group = autoscaling.AutoScalingGroup(
            self,
            "Group",
            vpc=vpc,
            vpc_subnets=ec2.SubnetSelection(subnets=subnets),
            launch_template=self.launch_template,
            min_capacity=pool.count,
            max_capacity=pool.count,
            # a new launch template version (type, security groups, user data) replaces the login nodes one at a time
            update_policy=autoscaling.UpdatePolicy.rolling_update(max_batch_size=1, min_instances_in_service=0),
        )
        cdk.Tags.of(self.group).add("Name", f"{cluster}-login-{pool.name}")
        # launched once the controllers are healthy: a login node's boot waits only a bounded time for their address
        for ready in after:
            self.group.node.add_dependency(ready)
