"""What each pool's instance types are and where EC2 offers them: GPU pools, and offerings per region and AZ.

Facts come from an instance cache when `validate --cache` gives one (`TypeFacts`, built from DescribeInstanceTypes by
`elastic-slurm instance-cache refresh`); without one, a GPU is recognised by the instance family alone (`nvidia_family`)
and offerings are not judged: only what can be proven is refused (docs/validate.md).

- A pool whose instance types have NVIDIA GPUs needs `gpu:` (else its nodes boot the CPU image: no driver, no GRES).
- A pool with `gpu:` needs NVIDIA GPUs in every type (the GPU image installs NVIDIA's driver and CUDA only).
- With a cache: a type the cache lacks in a region the pool launches in, where the cache covers that region, is refused
  (EC2 did not offer it there when the cache was built — `instance-cache refresh` stops on such a type — or the cache
  was built for another config; render would refuse that cache either way); and a type the cache says EC2 offers in
  none of the pool's AZs of a region is refused (a type missing from only some of them is a warning,
  `type-not-in-every-az`: the plugin skips those AZs for it).
- With a cache: a pool's own node layout (`slurm_settings` Sockets, CoresPerSocket, ...) must make the pool's CPUs —
  the smallest type's vCPUs, or its cores on a `disable_hyperthreading` pool — as render gives them
  (cluster_config/node_layout.py: else Slurm resets the nodes' CPUs to the layout's product or drains them).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field

from cluster_config.checks import ConfigError, pool_azs, region_of_az
from cluster_config.model import ElasticSlurmConfig, Pool
from cluster_config.node_layout import layout_problems

# NVIDIA GPU families: p2 ... p6-b200, g3, g3s, g4dn, g5, g5g, g6, g6e, g6f, gr6, gr6f, g7e. Not g4ad (AMD Radeon),
# nor inf/trn (Neuron), dl1 (Gaudi), f1/f2 (FPGA), vt1 (Xilinx).
_NVIDIA_FAMILY = re.compile(r"^(p\d+[a-z]*|g\d+[a-z]*|gr\d+[a-z]*)(-[a-z0-9]+)?$")
_NOT_NVIDIA = frozenset({"g4ad"})
NVIDIA = "NVIDIA"


@dataclass(frozen=True)
class TypeInfo:
    """The facts of one instance type that the checks use."""

    gpu_count: int = 0
    gpu_maker: str = ""
    architecture: str = "x86_64"
    vcpus: int = 0
    cores: int | None = None  # physical cores; None: not recorded
    memory_mib: int = 0
    azs: tuple[str, ...] | None = None  # the region's AZs that offer it; None: not recorded (every AZ assumed)


@dataclass(frozen=True)
class TypeFacts:
    """Instance type facts per region (an instance cache); `source` names it in messages."""

    source: str
    regions: Mapping[str, Mapping[str, TypeInfo]] = field(default_factory=dict)

    def find(self, instance_type: str) -> TypeInfo | None:
        """The facts of a type from any region (sizes and GPUs do not vary by region)."""
        return next((types[instance_type] for types in self.regions.values() if instance_type in types), None)


def nvidia_family(instance_type: str) -> bool:
    """Whether the type's family has NVIDIA GPUs, from its name alone."""
    family = instance_type.split(".", 1)[0]
    return bool(_NVIDIA_FAMILY.match(family)) and family not in _NOT_NVIDIA


def has_nvidia_gpu(instance_type: str, facts: TypeFacts | None) -> bool:
    """From the cache's facts when it has the type, else from the family name."""
    info = facts.find(instance_type) if facts is not None else None
    if info is not None:
        return info.gpu_count > 0 and info.gpu_maker.upper() == NVIDIA
    return nvidia_family(instance_type)


def instance_problems(config: ElasticSlurmConfig, facts: TypeFacts | None) -> list[ConfigError]:
    """Every problem of this module's rules (empty when none)."""
    return list(_problems(config, facts))


def _problems(config: ElasticSlurmConfig, facts: TypeFacts | None) -> Iterator[ConfigError]:
    how = f"the instance cache {facts.source} says" if facts is not None else "its family says"
    for ci, cluster in enumerate(config.clusters):
        for pi, partition in enumerate(cluster.partitions):
            for qi, pool in enumerate(partition.pools):
                path = f"clusters[{ci}].partitions[{pi}].pools[{qi}]"
                gpu = [t for t in pool.instance_types if has_nvidia_gpu(t, facts)]
                cpu = [t for t in pool.instance_types if t not in gpu]
                if pool.gpu is None and gpu:
                    yield ConfigError(
                        f"{path}.gpu",
                        f"'{gpu[0]}' has NVIDIA GPUs ({how}): add `gpu: {{}}` so its nodes boot the GPU image (driver, "
                        "CUDA) and Slurm schedules the GPUs",
                    )
                elif pool.gpu is not None and cpu:
                    yield ConfigError(
                        f"{path}.gpu",
                        f"'{cpu[0]}' has no NVIDIA GPU ({how}): the GPU image drives NVIDIA GPUs only; remove `gpu` or "
                        "the type",
                    )
                if facts is not None:
                    yield from _offerings(facts, pool_azs(cluster, pool), pool.instance_types, path)
                    yield from _layout(facts, pool, path)


def pool_cpus(facts: TypeFacts, pool: Pool) -> int | None:
    """The CPUs render gives the pool's nodes (slurm_plugin/render/nodes.py pool_size), None when a type's size is
    not in the cache."""
    infos = [facts.find(t) for t in pool.instance_types]
    counts = [(i.cores if pool.disable_hyperthreading else i.vcpus) if i is not None else None for i in infos]
    known = [c for c in counts if c]
    return min(known) if known and len(known) == len(counts) else None


def _layout(facts: TypeFacts, pool: Pool, path: str) -> Iterator[ConfigError]:
    cpus = pool_cpus(facts, pool)
    if cpus is None or any(layout_problems(pool.slurm_settings)):
        return  # unknown size, or already refused whatever the size (cluster_config/slurm_checks.py)
    for problem in layout_problems(pool.slurm_settings, cpus):
        yield ConfigError(f"{path}.slurm_settings", f"{problem} (the instance cache {facts.source})")


def azs_by_region(azs: list[str]) -> dict[str, list[str]]:
    """Region -> the AZs of `azs` in it, in order."""
    grouped: dict[str, list[str]] = {}
    for az in azs:
        grouped.setdefault(region_of_az(az), []).append(az)
    return grouped


def missing_azs(facts: TypeFacts, region: str, itype: str, azs: list[str]) -> list[str]:
    """Those of `azs` (of `region`) where the cache says EC2 does not offer `itype` (empty when not recorded)."""
    info = facts.regions.get(region, {}).get(itype)
    if info is None or info.azs is None:
        return []
    return [az for az in azs if az not in info.azs]


def _offerings(facts: TypeFacts, pool_zones: list[str], types: list[str], path: str) -> Iterator[ConfigError]:
    for region, azs in azs_by_region(pool_zones).items():
        offered = facts.regions.get(region)
        if offered is None:
            continue  # the cache does not cover the region: nothing proven (a warning says so)
        for ti, itype in enumerate(types):
            if itype not in offered:
                yield ConfigError(
                    f"{path}.instance_types[{ti}]",
                    f"'{itype}' is not in the instance cache {facts.source} for {region}: EC2 does not offer it there, "
                    "or the cache was built for another config (`elastic-slurm instance-cache refresh` asks EC2)",
                )
            elif len(missing_azs(facts, region, itype, azs)) == len(azs):
                where = ", ".join(offered[itype].azs or ()) or "no AZ"
                yield ConfigError(
                    f"{path}.instance_types[{ti}]",
                    f"'{itype}' is offered in none of the pool's AZs of {region} ({', '.join(azs)}), the instance "
                    f"cache {facts.source} says: EC2 offers it in {where}",
                )
