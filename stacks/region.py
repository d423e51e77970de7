"""Remote-region stack: what a pool needs to launch into an extra region of its cluster.

The region's VPC and security groups come from a `NetworkStack` of their own; this stack adds the VPC peering to the
home VPC (requested from here; same-account peering is accepted without a peer role) with routes on the remote
side, a compute role and instance profile, one launch template per pool that has AZs in this region, and
EventBridge rules sending this region's EC2 events (spot interruptions, rebalance, state changes) to the home
region's default bus. It is deployed after the images stack: the AMI parameter its templates resolve must exist. The
home cluster stack reads the ids through CDK cross-region references and adds the home-side routes.
"""

from __future__ import annotations

from typing import Any

import aws_cdk as cdk
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_iam as iam
from constructs import Construct

from cluster_config.checks import pool_azs, region_of_az
from cluster_config.model import Cluster, NewNetwork
from stacks.federation import peer_routes
from stacks.iam_policies import ArnScope, to_cdk
from stacks.launch_templates import add_managed_policies, pool_launch_template
from stacks.monitoring import EC2_EVENTS, ec2_event_patterns
from stacks.naming import home_boot_env, launch_template_key
from stacks.network import NetworkStack
from stacks.node_policies import (
    LOG_FILES_BY_ROLE,
    custom_action_objects,
    file_system_statements,
    munge_secret_pattern,
    node_statements,
)
from stacks.user_data import directory_values, node_names_values


class RegionStack(cdk.Stack):
    """Peering, compute role and launch templates of one remote region."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        cluster: Cluster,
        network: NetworkStack,
        home_vpc_id: str,
        home_region: str,
        home_cidrs: tuple[str, ...],
        munge_owner: str | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(scope, construct_id, **kwargs)
        self.cluster_name = cluster.name
        self.peering = ec2.CfnVPCPeeringConnection(
            self, "Peering", vpc_id=network.vpc.vpc_id, peer_vpc_id=home_vpc_id, peer_region=home_region
        )
        peer_routes(self, "ToHome", network, home_cidrs, self.peering.ref)
        self.compute_role = iam.Role(
            self,
            "ComputeRole",
            assumed_by=iam.ServicePrincipal("ec2.amazonaws.com"),
        )
        # Names, not references: the home cluster stack depends on this stack, never the other way round.
        boot_env = {
            **home_boot_env(cluster.name, home_region, munge_owner, remote=True),
            **directory_values(cluster),
            **node_names_values(cluster),
        }
        home = ArnScope(self.partition, self.account, home_region)
        munge = munge_secret_pattern(home, munge_owner or cluster.name)
        actions = custom_action_objects(home, cluster)
        statements = node_statements(
            home,
            cluster.name,
            [home_region],
            munge,
            action_objects=actions,
            directory=cluster.directory,
            log_files=LOG_FILES_BY_ROLE["compute"],
        )
        for statement in to_cdk(statements):
            self.compute_role.add_to_policy(statement)
        add_managed_policies(self, self.compute_role, "Compute", cluster.iam_policies.compute)
        profile = iam.InstanceProfile(self, "ComputeProfile", role=self.compute_role)
        self.subnets = {s.availability_zone: s.subnet_id for s in network.compute_subnets}
        self.vpc_id = network.vpc.vpc_id
        remote_network = network.network
        self.cidrs = (
            (remote_network.vpc_cidr,)
            if isinstance(remote_network, NewNetwork)
            else tuple(s.cidr for s in remote_network.subnets)
        )
        self._forward_ec2_events(cluster.name, home_region)
        self.launch_templates: dict[str, ec2.LaunchTemplate] = {}
        for partition in cluster.partitions:
            for pool in partition.pools:
                if not any(region_of_az(az) == self.region for az in pool_azs(cluster, pool)):
                    continue
                key = launch_template_key(partition.name, pool.name, self.region)
                self.launch_templates[key] = pool_launch_template(
                    self,
                    cluster=cluster.name,
                    partition=partition.name,
                    pool=pool,
                    profile=profile,
                    security_group=network.security_groups.compute,
                    boot_env=boot_env,
                    placement_group=None,
                    base_os=cluster.images.base_os,
                    home_region=home_region,
                )

    def allow_mounts(self, file_system_arns: list[str]) -> None:
        """Let this region's compute nodes mount the home region's EFS file systems (IAM authorization, authorized
        in the file system's region; the storage stack calls this with its ARNs). No root access: nothing a
        compute node runs as root writes the shared file system."""
        for statement in to_cdk(file_system_statements(file_system_arns, root_access=True)):
            self.compute_role.add_to_policy(statement)

    def _forward_ec2_events(self, cluster: str, home_region: str) -> None:
        """EventBridge is regional: spot interruption warnings, rebalance recommendations and state changes of this
        region's nodes go to the home region's default bus, whose rules feed the cluster manager's queue."""
        home_bus = events.EventBus.from_event_bus_arn(
            self, "HomeBus", f"arn:{self.partition}:events:{home_region}:{self.account}:event-bus/default"
        )
        # the home rules' patterns (stacks/monitoring.py): an event no home rule would match is not sent across regions
        for name, pattern in ec2_event_patterns().items():
            events.Rule(
                self,
                f"{name}ToHome",
                description=f"{cluster}: {EC2_EVENTS[name][0]} of {self.region} to the home region ({home_region})",
                event_pattern=pattern,
                targets=[targets.EventBus(home_bus)],
            )
