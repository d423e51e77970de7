"""Federation network: VPC peering between the federation's host cluster (slurmdbd, accounting database) and each
other member's home VPC, so every member's slurmctld reaches slurmdbd and the other members' slurmctld.

Why peering: members live in different regions (a transit gateway would need one per region plus a peering
attachment between them, at a fixed hourly cost each), and their VPC CIDRs are disjoint (validated). Members that
import the same VPC need nothing. The security groups of both sides open the Slurm ports to the peer's CIDR
(`NetworkStack(peer_cidrs=...)`); the accounting database itself stays reachable from the host's nodes only.

`FederationPeeringStack` lives in the member's region: the peering connection (requested from the member, accepted
automatically in one account) and the member-side routes. `FederationRoutesStack` lives in the host's region: the
host-side routes, reading the peering id through a CDK cross-region reference. A member's cluster stack depends on
both stacks of its peering with the accounting host (its controller's boot waits for slurmdbd over that peering), so
`cdk deploy es-west-cluster` alone deploys the peering first (tests/contracts/test_stack_dependencies.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

import aws_cdk as cdk
from aws_cdk import aws_ec2 as ec2
from constructs import Construct

from cluster_config.deploy_checks import address_ranges, munge_owner, same_vpc
from cluster_config.model import ElasticSlurmConfig
from stacks.naming import TAG_CLUSTER, stack_name
from stacks.network import NetworkStack


class MemberStacks(Protocol):
    """What the federation needs of a member's stacks (app_builder.ClusterStacks)."""

    @property
    def network(self) -> NetworkStack: ...

    @property
    def cluster(self) -> cdk.Stack: ...


def munge_sharing(config: ElasticSlurmConfig, cluster: str) -> tuple[str | None, tuple[str, ...]]:
    """(owner whose key `cluster` reads, or None for its own key; regions its own key is replicated to)."""
    owner = munge_owner(config)
    if owner is None or config.federation is None or cluster not in config.federation.clusters:
        return None, ()
    if cluster != owner:
        return owner, ()
    home = config.cluster(owner).region
    members = (config.cluster(m).region for m in config.federation.clusters)
    return None, tuple(sorted({r for r in members if r != home}))


def peered_members(config: ElasticSlurmConfig) -> list[tuple[str, str]]:
    """Pairs (earlier, later member) whose home VPCs are joined by peering: every pair not sharing one VPC."""
    if config.federation is None:
        return []
    members = list(dict.fromkeys(config.federation.clusters))
    pairs = []
    for i, first in enumerate(members):
        for second in members[i + 1 :]:
            a, b = config.cluster(first), config.cluster(second)
            if not same_vpc(a.region, a.network, b.region, b.network):
                pairs.append((first, second))
    return pairs


def cidrs_of(config: ElasticSlurmConfig, cluster: str) -> tuple[str, ...]:
    """The address ranges of a cluster's home network."""
    return tuple(str(r) for r in address_ranges(config.cluster(cluster).network))


def federation_peer_cidrs(config: ElasticSlurmConfig, cluster: str) -> tuple[str, ...]:
    """The address ranges of the members `cluster` is peered with (its security groups open Slurm ports to them)."""
    peers = [b if a == cluster else a for a, b in peered_members(config) if cluster in (a, b)]
    return tuple(str(r) for peer in peers for r in address_ranges(config.cluster(peer).network))


def peer_routes(
    scope: Construct, prefix: str, network: NetworkStack, cidrs: tuple[str, ...], peering_id: str
) -> list[ec2.CfnRoute]:
    """A route to each of `cidrs` through `peering_id` in every compute subnet of a created VPC (imported subnets'
    route tables are the operator's, docs/deploy.md)."""
    if not network.creates_vpc:
        return []
    return [
        ec2.CfnRoute(
            scope,
            f"{prefix}{index}x{cidr_index}",
            route_table_id=subnet.route_table.route_table_id,
            destination_cidr_block=cidr,
            vpc_peering_connection_id=peering_id,
        )
        for index, subnet in enumerate(network.compute_subnets)
        for cidr_index, cidr in enumerate(cidrs)
    ]


class FederationPeeringStack(cdk.Stack):
    """Member side: the peering connection to the host cluster's VPC and the routes to it."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        member: NetworkStack,
        host: NetworkStack,
        host_cidrs: tuple[str, ...],
        **kwargs: Any,
    ) -> None:
        super().__init__(scope, construct_id, **kwargs)
        self.peering = ec2.CfnVPCPeeringConnection(
            self, "Peering", vpc_id=member.vpc.vpc_id, peer_vpc_id=host.vpc.vpc_id, peer_region=host.region
        )
        peer_routes(self, "ToHost", member, host_cidrs, self.peering.ref)


class FederationRoutesStack(cdk.Stack):
    """Host side: routes from the host cluster's subnets to one member's VPC."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        host: NetworkStack,
        member_cidrs: tuple[str, ...],
        peering: FederationPeeringStack,
        **kwargs: Any,
    ) -> None:
        super().__init__(scope, construct_id, **kwargs)
        peer_routes(self, "ToMember", host, member_cidrs, peering.peering.ref)


def add_federation_stacks(
    app: cdk.App, config: ElasticSlurmConfig, clusters: Mapping[str, MemberStacks]
) -> dict[str, list[cdk.Stack]]:
    """Peering stacks between federation members, by cluster; members' cluster stacks deploy after the owner's, and a
    member peered with the accounting host deploys after both stacks of that peering: its controller's boot reaches
    slurmdbd on the host's controller 0 through them (slurm_plugin/controller_hosts.py, then a 900 s
    wait for slurmdbd that fails the boot without a route, stacks/user_data.py)."""
    owner = munge_owner(config)
    if owner is None or config.federation is None:
        return {}
    slurmdbd_host = config.accounting_host if config.accounting.mode != "none" else None
    for member in config.federation.clusters:
        if member != owner:
            clusters[member].cluster.add_stack_dependency(clusters[owner].cluster, "reads the owner's munge key")
    made: dict[str, list[cdk.Stack]] = {}
    for first, second in peered_members(config):
        host, member = clusters[first].network, clusters[second].network
        peering = FederationPeeringStack(
            app,
            stack_name(second, f"federation-{first}"),
            member=member,
            host=host,
            host_cidrs=cidrs_of(config, first),
            env=cdk.Environment(account=member.account, region=member.region),
            cross_region_references=True,
            description=f"Federation {config.federation.name}: peering from {second} to {first}",
        )
        routes = FederationRoutesStack(
            app,
            stack_name(first, f"federation-{second}"),
            host=host,
            member_cidrs=cidrs_of(config, second),
            peering=peering,
            env=cdk.Environment(account=host.account, region=host.region),
            cross_region_references=True,
            description=f"Federation {config.federation.name}: routes from {first} to {second}",
        )
        for reader, other in ((first, second), (second, first)):
            if other == slurmdbd_host:
                for stack in (peering, routes):  # both directions: the member's routes and the host's way back
                    clusters[reader].cluster.add_stack_dependency(
                        stack, f"its controller reaches slurmdbd on {other}'s controller over this peering"
                    )
        for stack, cluster in ((peering, second), (routes, first)):
            cdk.Tags.of(stack).add(TAG_CLUSTER, cluster)
            made.setdefault(cluster, []).append(stack)
            if peering.region != routes.region:
                stack.template_options.metadata = {"cfn-lint": {"config": {"ignore_checks": ["W3005"]}}}
    return made
