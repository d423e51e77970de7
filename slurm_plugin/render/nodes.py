"""Pure rendering of a cluster's nodes: NodeName lines (size, GPUs, features, weight) and gres.conf lines.

A pool is sized from the instance cache. A pool with several instance types gets the SMALLEST size of them, so a job
that fits the node fits whatever type is launched; a pool with `disable_hyperthreading` counts physical cores as CPUs
(its nodes take their sibling threads offline at boot, assets/bootstrap/elastic-slurm-smt-off). The NodeName line
gives the core layout too (`Sockets=1 CoresPerSocket=<cores> ThreadsPerCore=<threads>`, from DescribeInstanceTypes'
DefaultCores/DefaultThreadsPerCore in the cache), so `select/cons_tres` with CR_Core allocates whole cores as the
hardware has them. EC2 publishes no socket count: one socket of all cores keeps the totals Slurm compares at
registration (CPUs, sockets x cores) equal to the hardware's, while slurmd binds tasks to the layout it detects. A pool
whose types differ in threads per core, or a cache entry without cores (written before they were recorded), gets
`CPUs=` only, as Slurm then assumes one core per CPU. Weight prefers cheap
capacity: cheaper pools get lower weights (Slurm fills the lowest weight first); spot is cheaper than on-demand;
without a price, a vCPU-based estimate is used.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass, field

from cluster_config import Cluster, Partition, Pool, PurchaseOption, node_name, pool_azs, region_of_az
from cluster_config.node_layout import layout_problems
from cluster_config.slurm_settings import NODE_TOPOLOGY_KEYS, SettingValue, merge_line_settings
from slurm_plugin.hostlists import compress
from slurm_plugin.instance_cache import InstanceCache, InstanceTypeInfo

# Estimates used when the cache has no price (offline, or the Price List API was unreachable).
FALLBACK_USD_PER_VCPU_HOUR = 0.05
FALLBACK_SPOT_DISCOUNT = 0.4
# Weight = price in thousandths of a USD per hour (at least 1).
WEIGHT_PER_USD_HOUR = 1000
MAX_WEIGHT = 4_000_000_000
# RealMemory is the instance's memory less a reserve (docs/power-save.md, "Node size"). slurmd registers the memory
# the kernel reports (MemTotal): the nominal memory less what firmware and kernel keep (the page map alone is 1.6%;
# measured 63622 of 65536 MiB, 2.9%, on an m5.4xlarge), a larger share on small types. A node registering less than
# its RealMemory would be drained (Slurm tolerates 10% for CLOUD nodes, node_reg_mem_percent; we do not lean on it).
MEMORY_RESERVE_FRACTION = 0.05
MEMORY_RESERVE_MIN_MIB = 512


@dataclass(frozen=True)
class PoolSize:
    """What Slurm is told one node of a pool has."""

    cpus: int
    real_memory: int
    gpus: int
    architecture: str
    families: tuple[str, ...]
    # (cores, threads per core) of the smallest type, with cores * threads == cpus; None: CPUs= only
    topology: tuple[int, int] | None = None


@dataclass(frozen=True)
class PoolNodes:
    """A pool's rendered nodes."""

    partition: str
    pool: str
    names: list[str]
    size: PoolSize
    features: list[str]
    weight: int
    weight_source: str
    settings: dict[str, SettingValue] = field(default_factory=dict)  # the pool's slurm_settings
    gres_settings: dict[str, SettingValue] = field(default_factory=dict)  # the pool's gres_settings (gres.conf)
    notes: tuple[str, ...] = ()  # why the rendered line differs from the pool's settings (comments above it)

    @property
    def nodeset(self) -> str:
        """The NodeSet name of the pool (underscore: never a node name, which uses dashes)."""
        return f"{self.partition}_{self.pool}"

    @property
    def hostlist(self) -> str:
        """All node names of the pool, compressed."""
        return compress(self.names)


def pool_regions(cluster: Cluster, pool: Pool) -> list[str]:
    """The regions a pool may launch in, in priority order."""
    return list(dict.fromkeys(region_of_az(az) for az in pool_azs(cluster, pool)))


def real_memory_mib(nominal_mib: int) -> int:
    """RealMemory of an instance with `nominal_mib` MiB: less 5%, and at least 512 MiB less (a quarter on tiny types)."""
    reserve = max(math.ceil(nominal_mib * MEMORY_RESERVE_FRACTION), min(MEMORY_RESERVE_MIN_MIB, nominal_mib // 4))
    return max(1, nominal_mib - reserve)


def pool_size(infos: list[InstanceTypeInfo], types: list[str], one_thread_per_core: bool = False) -> PoolSize:
    """The smallest size over a pool's types (CPUs, memory and GPUs each the minimum); CPUs are physical cores when
    the pool's nodes run one thread per core."""
    gpus = min((i.gpus.count if i.gpus else 0) for i in infos)
    families = tuple(dict.fromkeys(t.split(".", 1)[0] for t in types))
    cpus = min((i.physical_cores if one_thread_per_core else i.vcpus) for i in infos)
    return PoolSize(
        cpus=cpus,
        real_memory=real_memory_mib(min(i.memory_mib for i in infos)),
        gpus=gpus,
        architecture=infos[0].architecture,
        families=families,
        topology=core_layout(infos, cpus, one_thread_per_core),
    )


def core_layout(infos: list[InstanceTypeInfo], cpus: int, one_thread_per_core: bool) -> tuple[int, int] | None:
    """(cores, threads per core) the pool's NodeName line gives, or None (CPUs= only): every type's cores and threads
    must be known and its threads per core the same (1 where the nodes run one thread per core), and cores x threads
    must make the pool's CPUs."""
    known = [(i.cores, i.threads_per_core) for i in infos if i.cores is not None and i.threads_per_core is not None]
    if len(known) != len(infos):
        return None
    threads = {1 if one_thread_per_core else per_core for _, per_core in known}
    if len(threads) != 1:
        return None
    (per_core,) = threads
    cores = min(count for count, _ in known)
    return (cores, per_core) if cores * per_core == cpus else None


def pool_cost(pool: Pool, infos: list[InstanceTypeInfo], azs: list[str]) -> tuple[float, str]:
    """(USD/hour, source) of one node of the pool, priced at its preferred (first) instance type."""
    first = infos[0]
    if pool.purchase_option in (PurchaseOption.SPOT, PurchaseOption.SPOT_THEN_ON_DEMAND):
        in_azs = [first.prices.spot[az] for az in azs if az in first.prices.spot]
        if in_azs:
            return min(in_azs), "spot price"
        return first.vcpus * FALLBACK_USD_PER_VCPU_HOUR * FALLBACK_SPOT_DISCOUNT, "vCPU estimate (spot)"
    if first.prices.on_demand is not None:
        return first.prices.on_demand, "on-demand price"
    return first.vcpus * FALLBACK_USD_PER_VCPU_HOUR, "vCPU estimate (on-demand)"


def weight_of(cost_usd_hour: float) -> int:
    """Slurm Weight of a node costing this much (cheaper → lower)."""
    return min(MAX_WEIGHT, max(1, round(cost_usd_hour * WEIGHT_PER_USD_HOUR)))


def market_feature(option: PurchaseOption) -> str:
    """The market feature: spot, ondemand or spotfirst (spot, then on-demand when spot is short)."""
    return {
        PurchaseOption.SPOT: "spot",
        PurchaseOption.ON_DEMAND: "ondemand",
        PurchaseOption.SPOT_THEN_ON_DEMAND: "spotfirst",
    }[option]


def render_pool(cluster: Cluster, partition: Partition, pool: Pool, cache: InstanceCache) -> PoolNodes:
    """A pool's nodes, sized and weighted from the cache (CacheError when the cache lacks a type). A pool's own node
    layout that does not make its CPUs (cluster_config/node_layout.py; `validate --cache` refuses it) is replaced by
    the product's, with a comment saying why: Slurm would give every node the layout's CPU count or drain it, and a
    controller's boot must not fail on a config that was deployed before the check existed."""
    regions = pool_regions(cluster, pool)
    infos = [cache.find(t, regions) for t in pool.instance_types]
    size = pool_size(infos, pool.instance_types, pool.disable_hyperthreading)
    settings = dict(pool.slurm_settings)
    notes = [
        f"slurm_settings {problem}: the product's layout is written instead"
        for problem in layout_problems(settings, size.cpus)
    ]
    if notes:
        settings = {k: v for k, v in settings.items() if k.lower() not in {t.lower() for t in NODE_TOPOLOGY_KEYS}}
    cost, source = pool_cost(pool, infos, pool_azs(cluster, pool))
    weight, source = (pool.weight, "set in config") if pool.weight is not None else (weight_of(cost), source)
    # A family is a feature only when every type of the pool has it: a constraint must hold on whatever launches.
    family = list(size.families) if len(size.families) == 1 else []
    features = [*family, f"{partition.name}-{pool.name}", size.architecture, market_feature(pool.purchase_option)]
    features += pool.features
    names = [node_name(partition.name, pool.name, i) for i in range(1, pool.max_nodes + 1)]
    return PoolNodes(
        partition=partition.name,
        pool=pool.name,
        names=names,
        size=size,
        features=list(dict.fromkeys(features)),
        weight=weight,
        weight_source=source,
        settings=settings,
        gres_settings=dict(pool.gres_settings),
        notes=tuple(notes),
    )


def node_attributes(nodes: PoolNodes) -> str:
    """The attributes after `NodeName=...` (shared by every node of the pool)."""
    pairs = [("CPUs", str(nodes.size.cpus)), *_topology_pairs(nodes), ("RealMemory", str(nodes.size.real_memory))]
    if nodes.size.gpus:
        pairs.append(("Gres", f"gpu:{nodes.size.gpus}"))
    pairs += [("Features", ",".join(nodes.features)), ("Weight", str(nodes.weight)), ("State", "CLOUD")]
    return " ".join(merge_line_settings(pairs, nodes.settings))


def _topology_pairs(nodes: PoolNodes) -> list[tuple[str, str]]:
    """Sockets/CoresPerSocket/ThreadsPerCore of the pool, unless it has no known layout or its slurm_settings set a
    topology key themselves (then the site gives the whole layout: a half-replaced one would not add up)."""
    mine = {key.lower() for key in nodes.settings}
    if nodes.size.topology is None or any(key.lower() in mine for key in NODE_TOPOLOGY_KEYS):
        return []
    cores, threads = nodes.size.topology
    return [("Sockets", "1"), ("CoresPerSocket", str(cores)), ("ThreadsPerCore", str(threads))]


def node_lines(nodes: PoolNodes, types: list[str], ports: dict[str, int] | None) -> Iterator[str]:
    """Comment + NodeName line(s) of a pool; one line per node when each node has its own slurmd port."""
    yield f"# pool {nodes.partition}-{nodes.pool}: {', '.join(types)}; weight from {nodes.weight_source}"
    if len(types) > 1:
        yield "# several instance types: the node size is the SMALLEST of them, so a job fits whatever launches"
    yield from (f"# {note}" for note in nodes.notes)
    attributes = node_attributes(nodes)
    if ports is None:
        yield f"NodeName={nodes.hostlist} {attributes}"
        return
    for name in nodes.names:
        yield f"NodeName={name} Port={ports[name]} {attributes}"


def gres_lines(nodes: PoolNodes) -> Iterator[str]:
    """gres.conf line of a GPU pool (NVIDIA device files /dev/nvidia0..N-1, then its gres_settings); nothing for CPU
    pools."""
    count = nodes.size.gpus
    if not count:
        return
    files = "/dev/nvidia0" if count == 1 else f"/dev/nvidia[0-{count - 1}]"
    pairs = [("NodeName", nodes.hostlist), ("Name", "gpu"), ("File", files)]
    yield " ".join(merge_line_settings(pairs, nodes.gres_settings))
