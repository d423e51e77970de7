"""Cross-field validation of a parsed config: rules no single field can express.

`check(config)` is pure: it returns every problem as a `ConfigError(path, message)` so the CLI can print all of them,
one line each. Paths use the YAML shape, e.g. `clusters[0].partitions[1].pools[0].max_nodes`.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterator
from dataclasses import dataclass

from cluster_config.model import Cluster, ElasticSlurmConfig, ExistingNetwork, NewNetwork, Pool

# A node name is a DNS label: at most 63 characters.
MAX_NODE_NAME = 63
# AWS reserves 5 addresses in every subnet.
AWS_RESERVED_PER_SUBNET = 5
_GRAVITON_FAMILY = re.compile(r"^[a-z]+\d+[a-z-]*g[a-z-]*$")


@dataclass(frozen=True)
class ConfigError:
    """One problem: where it is and what is wrong."""

    path: str
    message: str

    def __str__(self) -> str:
        return f"{self.path}: {self.message}"


def architecture_of(instance_type: str) -> str:
    """Return `arm64` for Graviton instance types and `x86_64` otherwise, from the family name alone.

    Graviton families carry a `g` after the generation digit (c7g, m6gd, c7gn, g5g, hpc7g); `a1` is Graviton 1.
    """
    family = instance_type.split(".", 1)[0]
    if family == "a1" or _GRAVITON_FAMILY.match(family):
        return "arm64"
    return "x86_64"


def region_of_az(az: str) -> str:
    """`us-east-1a` → `us-east-1`."""
    return az[:-1]


def node_name(partition: str, pool: str, index: int) -> str:
    """The stable Slurm node name of a pool's node (1-based index)."""
    return f"{partition}-{pool}-{index}"


def subnet_capacities(cluster: Cluster) -> dict[str, int]:
    """Usable addresses per AZ over every network of the cluster (home and remote regions)."""
    capacities: dict[str, int] = {}
    for network in [cluster.network, *(r.network for r in cluster.remote_regions)]:
        if isinstance(network, NewNetwork):
            size = 2 ** (32 - network.compute_subnet_prefix) - AWS_RESERVED_PER_SUBNET
            for az in network.availability_zones:
                capacities[az] = capacities.get(az, 0) + size
        else:
            for subnet in network.subnets:
                size = ipaddress.ip_network(subnet.cidr).num_addresses - AWS_RESERVED_PER_SUBNET
                capacities[subnet.availability_zone] = capacities.get(subnet.availability_zone, 0) + max(size, 0)
    return capacities


def pool_azs(cluster: Cluster, pool: Pool) -> list[str]:
    """The AZs a pool may use, in priority order (default: every AZ of the home network)."""
    if pool.availability_zones is not None:
        return list(pool.availability_zones)
    return network_azs(cluster.network)


def network_azs(network: NewNetwork | ExistingNetwork) -> list[str]:
    """AZs a network has subnets in, in declaration order."""
    if isinstance(network, NewNetwork):
        return list(network.availability_zones)
    return list(dict.fromkeys(s.availability_zone for s in network.subnets))


def check(config: ElasticSlurmConfig) -> list[ConfigError]:
    """Every cross-field problem of `config` (empty when valid)."""
    errors = list(_check_clusters(config))
    errors += _check_accounting(config)
    errors += _check_licenses(config)
    errors += _check_federation(config)
    return errors


def _duplicates(names: list[str]) -> set[str]:
    seen: set[str] = set()
    return {n for n in names if n in seen or seen.add(n)}  # type: ignore[func-returns-value]


def _check_clusters(config: ElasticSlurmConfig) -> Iterator[ConfigError]:
    for name in _duplicates([c.name for c in config.clusters]):
        index = [c.name for c in config.clusters].index(name)
        yield ConfigError(f"clusters[{index}].name", f"duplicate cluster name '{name}'")
    for ci, cluster in enumerate(config.clusters):
        yield from _check_cluster(cluster, f"clusters[{ci}]")


def _check_cluster(cluster: Cluster, path: str) -> Iterator[ConfigError]:
    yield from _check_network(cluster, path)
    regions = [r.region for r in cluster.remote_regions]
    if cluster.region in regions or _duplicates(regions):
        yield ConfigError(f"{path}.remote_regions", "each remote region must be listed once and differ from the home region")
    if cluster.controller.count == 2 and len(network_azs(cluster.network)) < 2:
        yield ConfigError(f"{path}.controller.count", "2 controllers need a network with at least 2 availability zones")
    defaults = [i for i, p in enumerate(cluster.partitions) if p.default]
    if len(defaults) > 1:
        yield ConfigError(f"{path}.partitions[{defaults[1]}].default", "only one partition may be the default")
    for name in _duplicates([p.name for p in cluster.partitions]):
        index = [p.name for p in cluster.partitions].index(name)
        yield ConfigError(f"{path}.partitions[{index}].name", f"duplicate partition name '{name}'")
    capacities = subnet_capacities(cluster)
    total_max = 0
    for pi, partition in enumerate(cluster.partitions):
        ppath = f"{path}.partitions[{pi}]"
        for name in _duplicates([p.name for p in partition.pools]):
            index = [p.name for p in partition.pools].index(name)
            yield ConfigError(f"{ppath}.pools[{index}].name", f"duplicate pool name '{name}' in partition '{partition.name}'")
        for qi, pool in enumerate(partition.pools):
            total_max += pool.max_nodes
            yield from _check_pool(cluster, partition.name, pool, f"{ppath}.pools[{qi}]", capacities)
    if total_max > sum(capacities.values()):
        yield ConfigError(
            f"{path}.partitions",
            f"{total_max} nodes in all do not fit the {sum(capacities.values())} addresses of the cluster's subnets",
        )


def _check_network(cluster: Cluster, path: str) -> Iterator[ConfigError]:
    home = cluster.network
    for az in network_azs(home):
        if region_of_az(az) != cluster.region:
            field = "availability_zones" if isinstance(home, NewNetwork) else "subnets"
            yield ConfigError(f"{path}.network.{field}", f"availability zone '{az}' is not in region '{cluster.region}'")
    for ri, remote in enumerate(cluster.remote_regions):
        for az in network_azs(remote.network):
            if region_of_az(az) != remote.region:
                yield ConfigError(
                    f"{path}.remote_regions[{ri}].network", f"availability zone '{az}' is not in region '{remote.region}'"
                )
    cidrs = [n.vpc_cidr for n in [home, *(r.network for r in cluster.remote_regions)] if isinstance(n, NewNetwork)]
    nets = [ipaddress.ip_network(c) for c in cidrs]
    for i, a in enumerate(nets):
        for b in nets[i + 1 :]:
            if a.overlaps(b):
                yield ConfigError(f"{path}.remote_regions", f"VPC CIDRs {a} and {b} overlap (peering needs disjoint ranges)")
    if isinstance(home, NewNetwork):
        vpc = ipaddress.ip_network(home.vpc_cidr)
        needed = len(home.availability_zones) * 2 ** (32 - home.compute_subnet_prefix)
        if home.compute_subnet_prefix < vpc.prefixlen or needed > vpc.num_addresses:
            yield ConfigError(
                f"{path}.network.compute_subnet_prefix",
                f"{len(home.availability_zones)} subnets of /{home.compute_subnet_prefix} do not fit in {vpc}",
            )


def _check_pool(
    cluster: Cluster, partition: str, pool: Pool, path: str, capacities: dict[str, int]
) -> Iterator[ConfigError]:
    if pool.min_nodes > pool.max_nodes:
        yield ConfigError(f"{path}.min_nodes", f"min_nodes ({pool.min_nodes}) is greater than max_nodes ({pool.max_nodes})")
    longest = node_name(partition, pool.name, pool.max_nodes)
    if len(longest) > MAX_NODE_NAME:
        yield ConfigError(f"{path}.name", f"node name '{longest}' is longer than {MAX_NODE_NAME} characters")
    arches = {architecture_of(t) for t in pool.instance_types}
    if len(arches) > 1:
        yield ConfigError(f"{path}.instance_types", f"instance types mix architectures ({', '.join(sorted(arches))})")
    if _duplicates(list(pool.instance_types)):
        yield ConfigError(f"{path}.instance_types", "an instance type is listed twice")
    azs = pool_azs(cluster, pool)
    for az in azs:
        if az not in capacities:
            yield ConfigError(f"{path}.availability_zones", f"availability zone '{az}' has no subnet in the cluster's networks")
    if _duplicates(azs):
        yield ConfigError(f"{path}.availability_zones", "an availability zone is listed twice")
    if pool.placement_group and len({region_of_az(az) for az in azs}) > 1:
        yield ConfigError(f"{path}.placement_group", "a placement group cannot span regions")
    room = sum(capacities.get(az, 0) for az in set(azs))
    if pool.max_nodes > room and all(az in capacities for az in azs):
        yield ConfigError(f"{path}.max_nodes", f"max_nodes ({pool.max_nodes}) exceeds the {room} addresses of its subnets")


def _check_accounting(config: ElasticSlurmConfig) -> Iterator[ConfigError]:
    acct = config.accounting
    names = [c.name for c in config.clusters]
    if acct.mode == "existing" and (acct.endpoint is None or acct.secret_arn is None):
        yield ConfigError("accounting", "mode 'existing' needs both endpoint and secret_arn")
    if acct.mode != "existing" and (acct.endpoint is not None or acct.secret_arn is not None):
        yield ConfigError("accounting.endpoint", "endpoint/secret_arn are only used with mode 'existing'")
    if acct.host_cluster is not None and acct.host_cluster not in names:
        yield ConfigError("accounting.host_cluster", f"unknown cluster '{acct.host_cluster}'")


def _check_licenses(config: ElasticSlurmConfig) -> Iterator[ConfigError]:
    names = {c.name for c in config.clusters}
    if config.licenses and config.accounting.mode == "none":
        yield ConfigError("licenses", "remote licenses need accounting (mode 'create' or 'existing')")
    for name in _duplicates([lic.name for lic in config.licenses]):
        index = [lic.name for lic in config.licenses].index(name)
        yield ConfigError(f"licenses[{index}].name", f"duplicate license name '{name}'")
    for li, lic in enumerate(config.licenses):
        path = f"licenses[{li}]"
        if lic.sync_schedule is not None and (lic.server is None or lic.server_type == "static"):
            yield ConfigError(f"{path}.sync_schedule", "a synced license needs a server and server_type flexlm or rlm")
        if lic.server_type != "static" and lic.server is None:
            yield ConfigError(f"{path}.server", f"server_type '{lic.server_type}' needs a server (port@host)")
        for cluster, percent in lic.clusters.items():
            if cluster not in names:
                yield ConfigError(f"{path}.clusters.{cluster}", f"unknown cluster '{cluster}'")
            if not 0 <= percent <= 100:
                yield ConfigError(f"{path}.clusters.{cluster}", f"percent must be 0..100, got {percent}")


def _check_federation(config: ElasticSlurmConfig) -> Iterator[ConfigError]:
    fed = config.federation
    if fed is None:
        return
    names = {c.name for c in config.clusters}
    for i, member in enumerate(fed.clusters):
        if member not in names:
            yield ConfigError(f"federation.clusters[{i}]", f"unknown cluster '{member}'")
    if _duplicates(list(fed.clusters)):
        yield ConfigError("federation.clusters", "a cluster is listed twice")
    if config.accounting.mode == "none":
        yield ConfigError("federation", "a federation needs shared accounting (mode 'create' or 'existing')")
