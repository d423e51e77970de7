"""Checks the synthesized stacks would otherwise fail on (cdk-nag, CloudFormation), run at validate time.

`elastic-slurm validate` and the CDK app load configs through the same `load()`, so every rule here fails a config
before synth, with the field's path, instead of as a cdk-nag finding or a failed deploy. Pure functions over the
parsed config (names are looked up in `aws_catalog`, which reads botocore's data files); `deploy_checks(config)`
returns every problem.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterator

from cluster_config import aws_catalog
from cluster_config.address_space import address_space
from cluster_config.checks import ConfigError
from cluster_config.model import ElasticSlurmConfig, ExistingNetwork, NewNetwork

Network = NewNetwork | ExistingNetwork


def munge_owner(config: ElasticSlurmConfig) -> str | None:
    """The federation member whose munge key every member uses: the accounting host when it is a member, else the
    first member; None without a federation."""
    fed = config.federation
    if fed is None:
        return None
    host = config.accounting_host
    return host if host in fed.clusters else fed.clusters[0]


def deploy_checks(config: ElasticSlurmConfig) -> list[ConfigError]:
    """Every problem synth or deploy would hit for `config` (empty when none)."""
    return [*_open_ingress(config), *_federation_networks(config), *_aws_names(config), *_lustre_throughput(config)]


def _open_ingress(config: ElasticSlurmConfig) -> Iterator[ConfigError]:
    """SSH from the internet. The whole of it never: cdk-nag's AwsSolutions-EC23 fails the synth on a 0.0.0.0/0 or
    ::/0 ingress. Public address space only with `ssh_allow_public_cidrs` (private and documentation ranges need no
    opt-in: cluster_config/address_space.py)."""
    for ci, cluster in enumerate(config.clusters):
        for index, cidr in enumerate(cluster.ssh_allowed_cidrs):
            where = f"clusters[{ci}].ssh_allowed_cidrs[{index}]"
            if ipaddress.ip_network(cidr, strict=False).prefixlen == 0:
                yield ConfigError(
                    where,
                    f"'{cidr}' opens SSH to the whole internet; list your own address ranges (or use SSM Session "
                    "Manager, which needs no ingress)",
                )
            elif address_space(cidr) == "public" and not cluster.ssh_allow_public_cidrs:
                yield ConfigError(
                    where,
                    f"'{cidr}' is public address space: set clusters[{ci}].ssh_allow_public_cidrs: true to let it reach "
                    "SSH, or list private ranges (RFC 1918, 100.64.0.0/10, fc00::/7) or use SSM Session Manager",
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


def _aws_names(config: ElasticSlurmConfig) -> Iterator[ConfigError]:
    """Regions and instance types AWS does not have: the deploy (or every launch of the pool) would fail on them."""
    for ci, cluster in enumerate(config.clusters):
        path = f"clusters[{ci}]"
        regions = [(f"{path}.region", cluster.region)]
        regions += [(f"{path}.remote_regions[{ri}].region", r.region) for ri, r in enumerate(cluster.remote_regions)]
        types = [(f"{path}.controller.instance_type", cluster.controller.instance_type)]
        types += [
            (f"{path}.login_nodes[{li}].instance_type", p.instance_type) for li, p in enumerate(cluster.login_nodes)
        ]
        for pi, partition in enumerate(cluster.partitions):
            for qi, pool in enumerate(partition.pools):
                where = f"{path}.partitions[{pi}].pools[{qi}].instance_types"
                types += [(f"{where}[{ti}]", itype) for ti, itype in enumerate(pool.instance_types)]
        for where, region in regions:
            if problem := aws_catalog.unknown_region(region):
                yield ConfigError(where, problem)
        for where, itype in types:
            if problem := aws_catalog.unknown_instance_type(itype):
                yield ConfigError(where, problem)


def _lustre_throughput(config: ElasticSlurmConfig) -> Iterator[ConfigError]:
    """FSx takes PerUnitStorageThroughput only for persistent file systems (FSx API reference,
    CreateFileSystemLustreConfiguration: "Required with PERSISTENT_1 and PERSISTENT_2 deployment types"; for
    PERSISTENT_2 the stack passes 125 when it is not set)."""
    for ci, cluster in enumerate(config.clusters):
        lustre = cluster.storage.fsx_lustre
        if lustre is not None and lustre.deployment_type == "SCRATCH_2" and lustre.per_unit_storage_throughput:
            yield ConfigError(
                f"clusters[{ci}].storage.fsx_lustre.per_unit_storage_throughput",
                "only PERSISTENT_2 file systems take a per-unit storage throughput (SCRATCH_2 throughput is fixed): "
                "remove it or use deployment_type PERSISTENT_2",
            )
