"""Checks the synthesized stacks would otherwise fail on (cdk-nag, CloudFormation), run at validate time.

`elastic-slurm validate` and the CDK app load configs through the same `load()`, so every rule here fails a config
before synth, with the field's path, instead of as a cdk-nag finding or a failed deploy. Pure functions over the
parsed config; `deploy_checks(config)` returns every problem.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterator

from cluster_config.checks import ConfigError
from cluster_config.model import ElasticSlurmConfig, ExistingNetwork, NewNetwork

Network = NewNetwork | ExistingNetwork


def deploy_checks(config: ElasticSlurmConfig) -> list[ConfigError]:
    """Every problem synth or deploy would hit for `config` (empty when none)."""
    return [*_open_ingress(config), *_federation_networks(config)]


def _open_ingress(config: ElasticSlurmConfig) -> Iterator[ConfigError]:
    """SSH from the whole internet: cdk-nag's AwsSolutions-EC23 fails the synth on a 0.0.0.0/0 or ::/0 ingress."""
    for ci, cluster in enumerate(config.clusters):
        for index, cidr in enumerate(cluster.ssh_allowed_cidrs):
            if ipaddress.ip_network(cidr, strict=False).prefixlen == 0:
                yield ConfigError(
                    f"clusters[{ci}].ssh_allowed_cidrs[{index}]",
                    f"'{cidr}' opens SSH to the whole internet; list your own address ranges (or use SSM Session "
                    "Manager, which needs no ingress)",
                )


def address_ranges(network: Network) -> list[ipaddress.IPv4Network | ipaddress.IPv6Network]:
    """The address ranges of a network: its VPC CIDR, or its imported subnets' CIDRs."""
    if isinstance(network, NewNetwork):
        return [ipaddress.ip_network(network.vpc_cidr)]
    return [ipaddress.ip_network(s.cidr, strict=False) for s in network.subnets]


def same_vpc(region_a: str, a: Network, region_b: str, b: Network) -> bool:
    """Both networks import the same VPC (members in one VPC need no peering)."""
    if not (isinstance(a, ExistingNetwork) and isinstance(b, ExistingNetwork)):
        return False
    return region_a == region_b and a.vpc_id == b.vpc_id


def _federation_networks(config: ElasticSlurmConfig) -> Iterator[ConfigError]:
    """Federation members are joined by VPC peering (docs/deploy.md): their home VPCs must not overlap."""
    if config.federation is None:
        return
    index = {c.name: i for i, c in enumerate(config.clusters)}
    members = [name for name in dict.fromkeys(config.federation.clusters) if name in index]
    for i, first in enumerate(members):
        for second in members[i + 1 :]:
            a = config.clusters[index[first]]
            b = config.clusters[index[second]]
            if same_vpc(a.region, a.network, b.region, b.network):
                continue  # one shared imported VPC: no peering needed
            if any(x.overlaps(y) for x in address_ranges(a.network) for y in address_ranges(b.network)):
                yield ConfigError(
                    f"clusters[{index[second]}].network",
                    f"overlaps the network of federation member '{first}'; federation members are joined by VPC "
                    "peering, which needs disjoint address ranges",
                )
