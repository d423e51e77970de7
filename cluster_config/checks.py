"""Cross-field validation of a parsed config: rules no single field can express.

`check(config)` is pure: it returns every problem as a `ConfigError(path, message)` so the CLI can print all of them,
one line each. Paths use the YAML shape, e.g. `clusters[0].partitions[1].pools[0].max_nodes`.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterator
from dataclasses import dataclass

from cluster_config import slurm_release
from cluster_config.allocation_checks import allocation_problems
from cluster_config.efa import efa_problems
from cluster_config.model import Cluster, ElasticSlurmConfig, ExistingNetwork, NewNetwork, Pool, PurchaseOption
from cluster_config.model_site import MAX_ENCODED_ACTIONS, CustomActions
from cluster_config.onprem_checks import onprem_problems
from cluster_config.os_checks import os_problems
from cluster_config.rest_api_checks import rest_api_accounting_problems, rest_api_problems
from cluster_config.slurm_checks import slurm_problems
from cluster_config.topology_checks import topology_problems

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
    errors += (ConfigError(where, message) for where, message in rest_api_accounting_problems(config))
    errors += (ConfigError(where, message) for where, message in onprem_problems(config))
    errors += (ConfigError(where, message) for where, message in slurm_problems(config))
    return errors


def _repeats(names: list[str]) -> list[int]:
    """Indexes of the entries whose name already appeared earlier in the list."""
    seen: set[str] = set()
    repeats = []
    for index, name in enumerate(names):
        if name in seen:
            repeats.append(index)
        seen.add(name)
    return repeats


def _check_clusters(config: ElasticSlurmConfig) -> Iterator[ConfigError]:
    names = [c.name for c in config.clusters]
    for index in _repeats(names):
        yield ConfigError(f"clusters[{index}].name", f"duplicate cluster name '{names[index]}'")
    for ci, cluster in enumerate(config.clusters):
        yield from _check_cluster(cluster, f"clusters[{ci}]")


def _check_cluster(cluster: Cluster, path: str) -> Iterator[ConfigError]:
    yield from _check_network(cluster, path)
    yield from _check_storage(cluster, path)
    yield from _check_images(cluster, path)
    yield from (ConfigError(where, message) for where, message in topology_problems(cluster, path))
    yield from (ConfigError(where, message) for where, message in efa_problems(cluster, path))
    yield from (ConfigError(where, message) for where, message in os_problems(cluster, path, architecture_of))
    yield from (ConfigError(where, message) for where, message in rest_api_problems(cluster, path))
    regions = [r.region for r in cluster.remote_regions]
    for ri, region in enumerate(regions):
        if region == cluster.region or ri in _repeats(regions):
            yield ConfigError(
                f"{path}.remote_regions[{ri}].region", f"region '{region}' is already the home or another remote region"
            )
    yield from _check_actions_size(cluster.controller.custom_actions, f"{path}.controller.custom_actions")
    if cluster.controller.count == 2 and len(network_azs(cluster.network)) < 2:
        yield ConfigError(f"{path}.controller.count", "2 controllers need a network with at least 2 availability zones")
    defaults = [i for i, p in enumerate(cluster.partitions) if p.default]
    for index in defaults[1:]:
        yield ConfigError(f"{path}.partitions[{index}].default", "only one partition may be the default")
    part_names = [p.name for p in cluster.partitions]
    for index in _repeats(part_names):
        yield ConfigError(f"{path}.partitions[{index}].name", f"duplicate partition name '{part_names[index]}'")
    yield from _check_sharing(cluster, path)
    yield from (ConfigError(where, message) for where, message in allocation_problems(cluster, path))
    login_names = [p.name for p in cluster.login_nodes]
    for index in _repeats(login_names):
        yield ConfigError(f"{path}.login_nodes[{index}].name", f"duplicate login pool name '{login_names[index]}'")
    for index, login in enumerate(cluster.login_nodes):
        yield from _check_actions_size(login.custom_actions, f"{path}.login_nodes[{index}].custom_actions")
    capacities = subnet_capacities(cluster)
    total_max = 0
    pool_overflows = False
    for pi, partition in enumerate(cluster.partitions):
        ppath = f"{path}.partitions[{pi}]"
        pool_names = [p.name for p in partition.pools]
        for index in _repeats(pool_names):
            yield ConfigError(
                f"{ppath}.pools[{index}].name",
                f"duplicate pool name '{pool_names[index]}' in partition '{partition.name}'",
            )
        for qi, pool in enumerate(partition.pools):
            total_max += pool.max_nodes
            for error in _check_pool(cluster, partition.name, pool, f"{ppath}.pools[{qi}]", capacities):
                pool_overflows = pool_overflows or error.path.endswith(".max_nodes")
                yield error
    # Pools that each fit may still not fit together; say so only when no single pool already overflows.
    if total_max > sum(capacities.values()) and not pool_overflows:
        yield ConfigError(
            f"{path}.partitions",
            f"{total_max} nodes in all do not fit the {sum(capacities.values())} addresses of the cluster's subnets",
        )


def _check_sharing(cluster: Cluster, path: str) -> Iterator[ConfigError]:
    """Every partition has nodes: pools of its own or the pools of the partitions it shares (not transitively)."""
    with_pools = {p.name for p in cluster.partitions if p.pools}
    names = {p.name for p in cluster.partitions}
    for pi, partition in enumerate(cluster.partitions):
        ppath = f"{path}.partitions[{pi}]"
        if not partition.pools and not partition.share_nodes_of:
            yield ConfigError(f"{ppath}.pools", "a partition needs at least one pool, or share_nodes_of")
        shared = list(partition.share_nodes_of)
        repeats = set(_repeats(shared))
        for si, name in enumerate(shared):
            where = f"{ppath}.share_nodes_of[{si}]"
            if si in repeats:
                yield ConfigError(where, f"partition '{name}' is listed twice")
            elif name == partition.name:
                yield ConfigError(where, f"partition '{name}' cannot share its own nodes")
            elif name not in names:
                yield ConfigError(where, f"unknown partition '{name}' in cluster '{cluster.name}'")
            elif name not in with_pools:
                yield ConfigError(where, f"partition '{name}' has no pools of its own to share")


def _check_network(cluster: Cluster, path: str) -> Iterator[ConfigError]:
    networks = [(f"{path}.network", cluster.region, cluster.network)] + [
        (f"{path}.remote_regions[{ri}].network", r.region, r.network) for ri, r in enumerate(cluster.remote_regions)
    ]
    for npath, region, network in networks:
        field = "availability_zones" if isinstance(network, NewNetwork) else "subnets"
        for az in network_azs(network):
            if region_of_az(az) != region:
                yield ConfigError(f"{npath}.{field}", f"availability zone '{az}' is not in region '{region}'")
        if isinstance(network, NewNetwork):
            vpc = ipaddress.ip_network(network.vpc_cidr)
            azs, prefix = len(network.availability_zones), network.compute_subnet_prefix
            if prefix < vpc.prefixlen or azs * 2 ** (32 - prefix) > vpc.num_addresses:
                yield ConfigError(f"{npath}.compute_subnet_prefix", f"{azs} subnets of /{prefix} do not fit in {vpc}")
    vpcs = [(p, ipaddress.ip_network(n.vpc_cidr)) for p, _, n in networks if isinstance(n, NewNetwork)]
    for i, (_, a) in enumerate(vpcs):
        for later_path, b in vpcs[i + 1 :]:
            if a.overlaps(b):
                yield ConfigError(
                    f"{later_path}.vpc_cidr", f"VPC CIDRs {a} and {b} overlap (peering needs disjoint ranges)"
                )


def _check_storage(cluster: Cluster, path: str) -> Iterator[ConfigError]:
    storage = cluster.storage
    file_systems = [
        ("efs", storage.efs),
        ("fsx_lustre", storage.fsx_lustre),
        ("fsx_ontap", storage.fsx_ontap),
        ("fsx_openzfs", storage.fsx_openzfs),
    ]
    if all(fs is None for _key, fs in file_systems):
        yield ConfigError(
            f"{path}.storage",
            "needs a shared file system (efs, fsx_lustre, fsx_ontap or fsx_openzfs): it holds the users' files and tells "
            "booting compute nodes their node names",
        )
    elif cluster.remote_regions and storage.efs is None:
        yield ConfigError(
            f"{path}.storage.efs",
            "is needed with remote_regions: compute nodes there mount only the home EFS, where they find their node "
            "names (FSx is not mounted in remote regions)",
        )
    mounts = [(f"{path}.storage.{key}.mount_point", fs.mount_point) for key, fs in file_systems if fs is not None]
    mounts += [
        (f"{path}.storage.extra_mounts[{i}].mount_point", m.mount_point) for i, m in enumerate(storage.extra_mounts)
    ]
    seen: set[str] = set()
    for mpath, mount_point in mounts:
        if mount_point.rstrip("/") in seen:
            yield ConfigError(mpath, f"mount point '{mount_point}' is already used by another file system")
        seen.add(mount_point.rstrip("/"))


def _check_images(cluster: Cluster, path: str) -> Iterator[ConfigError]:
    images = cluster.images
    if images.slurm_version != slurm_release.VERSION and images.slurm_source is None:
        yield ConfigError(
            f"{path}.images.slurm_source",
            f"Slurm {images.slurm_version} has no pinned source (the pinned release is {slurm_release.VERSION}):"
            " give its url and sha256",
        )


def _check_pool(
    cluster: Cluster, partition: str, pool: Pool, path: str, capacities: dict[str, int]
) -> Iterator[ConfigError]:
    if pool.min_nodes > pool.max_nodes:
        yield ConfigError(
            f"{path}.min_nodes", f"min_nodes ({pool.min_nodes}) is greater than max_nodes ({pool.max_nodes})"
        )
    longest = node_name(partition, pool.name, pool.max_nodes)
    if len(longest) > MAX_NODE_NAME:
        yield ConfigError(f"{path}.name", f"node name '{longest}' is longer than {MAX_NODE_NAME} characters")
    arches = {architecture_of(t) for t in pool.instance_types}
    if len(arches) > 1:
        yield ConfigError(f"{path}.instance_types", f"instance types mix architectures ({', '.join(sorted(arches))})")
    types = list(pool.instance_types)
    for index in _repeats(types):
        yield ConfigError(f"{path}.instance_types[{index}]", f"instance type '{types[index]}' is listed twice")
    azs = pool_azs(cluster, pool)
    where = f"{path}.availability_zones"
    for index in _repeats(list(pool.availability_zones or [])):  # the network's own repeats are reported there
        yield ConfigError(f"{where}[{index}]", f"availability zone '{azs[index]}' is listed twice")
    for az in dict.fromkeys(azs):
        if az not in capacities:
            yield ConfigError(where, f"availability zone '{az}' has no subnet in the cluster's networks")
    yield from _check_placement_group(cluster, pool, path, azs)
    if pool.placement_group and pool.spread_jobs_across_azs:
        yield ConfigError(f"{path}.spread_jobs_across_azs", "a pool with a placement group keeps its jobs in one AZ")
    yield from _check_reservation(pool, azs, path)
    yield from _check_actions_size(pool.custom_actions, f"{path}.custom_actions")
    remote = sorted({region_of_az(az) for az in azs} - {cluster.region})
    for key, value in (("ami_id", pool.ami_id), ("security_groups", pool.security_groups)):
        if value and remote:
            yield ConfigError(
                f"{path}.{key}",
                f"{key} is set for the home region '{cluster.region}' only, but the pool also launches in "
                f"{', '.join(remote)}",
            )
    room = sum(capacities.get(az, 0) for az in set(azs))
    if pool.max_nodes > room and all(az in capacities for az in azs):
        yield ConfigError(
            f"{path}.max_nodes", f"max_nodes ({pool.max_nodes}) exceeds the {room} addresses of its subnets"
        )


def _check_placement_group(cluster: Cluster, pool: Pool, path: str, azs: list[str]) -> Iterator[ConfigError]:
    """A cluster placement group lives in one AZ (AWS), and the stacks create a pool's group in the home region."""
    if not pool.placement_group:
        return
    distinct = list(dict.fromkeys(azs))
    if len(distinct) > 1:
        yield ConfigError(
            f"{path}.placement_group",
            f"a cluster placement group is confined to one availability zone, but the pool may use {len(distinct)} "
            f"({', '.join(distinct)}): give the pool a single availability zone",
        )
    elif distinct and region_of_az(distinct[0]) != cluster.region:
        yield ConfigError(
            f"{path}.placement_group",
            f"the pool's placement group is created in the home region '{cluster.region}', so its availability zone "
            f"cannot be '{distinct[0]}' of region '{region_of_az(distinct[0])}'",
        )


def _check_actions_size(actions: CustomActions, path: str) -> Iterator[ConfigError]:
    """The actions travel in the launch template's user data, which EC2 limits to 16 KB with the boot script."""
    size = len(actions.encoded()) if not actions.empty() else 0
    if size > MAX_ENCODED_ACTIONS:
        yield ConfigError(
            path,
            f"the actions take {size} bytes of the 16 KB EC2 user data (at most {MAX_ENCODED_ACTIONS}): use fewer or "
            "shorter arguments, or one script that runs the others",
        )


def _check_reservation(pool: Pool, azs: list[str], path: str) -> Iterator[ConfigError]:
    """A capacity reservation holds one instance type in one AZ, On-Demand (a Capacity Block too)."""
    if pool.capacity_reservation is None:
        return
    where = f"{path}.capacity_reservation"
    if len(pool.instance_types) != 1:
        yield ConfigError(
            where, f"a capacity reservation holds one instance type; the pool lists {len(pool.instance_types)}"
        )
    if len(dict.fromkeys(azs)) != 1:
        yield ConfigError(
            where, f"a capacity reservation is in one availability zone; the pool may use {len(set(azs))}"
        )
    if pool.purchase_option != PurchaseOption.ON_DEMAND:
        yield ConfigError(
            where, f"capacity reservations are On-Demand capacity; purchase_option is '{pool.purchase_option.value}'"
        )


def _check_accounting(config: ElasticSlurmConfig) -> Iterator[ConfigError]:
    acct = config.accounting
    for key, value in (("endpoint", acct.endpoint), ("secret_arn", acct.secret_arn)):
        if acct.mode == "existing" and value is None:
            yield ConfigError(f"accounting.{key}", f"mode 'existing' needs {key}")
        if acct.mode != "existing" and value is not None:
            yield ConfigError(f"accounting.{key}", f"{key} is only used with mode 'existing' (mode is '{acct.mode}')")
    if acct.host_cluster is not None and acct.host_cluster not in {c.name for c in config.clusters}:
        yield ConfigError("accounting.host_cluster", f"unknown cluster '{acct.host_cluster}'")
        return
    # slurmdbd checks every slurmctld's munge credential with its host's key, over the network: only federation
    # members share that key and get peered VPCs (stacks/federation.py)
    members = set(config.federation.clusters) if config.federation else set()
    apart = [c.name for c in config.clusters if c.name not in members]
    if acct.mode != "none" and len(config.clusters) > 1 and apart:
        yield ConfigError(
            "federation.clusters" if config.federation else "accounting",
            f"cluster(s) {', '.join(apart)} would share slurmdbd (on '{config.accounting_host}') without its munge "
            "key or a network route to it: list every cluster in `federation.clusters`, or give each its own file",
        )


def _check_licenses(config: ElasticSlurmConfig) -> Iterator[ConfigError]:
    names = set(config.slurm_cluster_names())  # an on-prem cluster may have a share too
    if config.licenses and config.accounting.mode == "none":
        yield ConfigError("licenses", "remote licenses need accounting (mode 'create' or 'existing')")
    lic_names = [lic.name for lic in config.licenses]
    for index in _repeats(lic_names):
        yield ConfigError(f"licenses[{index}].name", f"duplicate license name '{lic_names[index]}'")
    for li, lic in enumerate(config.licenses):
        path = f"licenses[{li}]"
        if lic.sync_schedule is not None and lic.server_type == "static":
            yield ConfigError(f"{path}.sync_schedule", "a synced license needs a server and server_type flexlm or rlm")
        if lic.server_type != "static" and lic.server is None:
            yield ConfigError(f"{path}.server", f"server_type '{lic.server_type}' needs a server (port@host)")
        for cluster, percent in lic.clusters.items():
            if cluster not in names:
                yield ConfigError(f"{path}.clusters.{cluster}", f"unknown cluster '{cluster}'")
            if not 0 <= percent <= 100:
                yield ConfigError(f"{path}.clusters.{cluster}", f"percent must be 0..100, got {percent}")
        if sum(lic.clusters.values()) > 100:
            total = sum(lic.clusters.values())
            yield ConfigError(f"{path}.clusters", f"the clusters' percentages add up to {total} (at most 100)")


def _check_federation(config: ElasticSlurmConfig) -> Iterator[ConfigError]:
    fed = config.federation
    if fed is None:
        return
    names = {c.name for c in config.clusters}
    members = list(fed.clusters)
    onprem = {o.name for o in config.onprem_clusters}
    for i, member in enumerate(members):
        if member in onprem:
            yield ConfigError(
                f"federation.clusters[{i}]", f"'{member}' is on-prem: it bursts with `sbatch -M` (burst_to)"
            )
        elif member not in names:
            yield ConfigError(f"federation.clusters[{i}]", f"unknown cluster '{member}'")
    for index in _repeats(members):
        yield ConfigError(f"federation.clusters[{index}]", f"cluster '{members[index]}' is listed twice")
    if config.accounting.mode == "none":
        yield ConfigError("federation", "a federation needs shared accounting (mode 'create' or 'existing')")
