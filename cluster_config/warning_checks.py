"""Warnings: what is legal but suspicious in a config that validates. Each has a stable code (`WARNINGS`), is printed
by `elastic-slurm validate` (exit code 0 still) and can be silenced by code with `--ignore-warning CODE`.

Pure: `config_warnings(config, facts)` returns every warning as a `ConfigWarning(path, code, message)`; the facts of
an instance cache (`validate --cache`) enable the warnings that need them. docs/validate.md lists the codes.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterator
from dataclasses import dataclass

from cluster_config.checks import pool_azs
from cluster_config.instance_checks import TypeFacts, azs_by_region, missing_azs
from cluster_config.model import Cluster, ElasticSlurmConfig, PurchaseOption

# code -> what it means (docs/validate.md shows this table; a test keeps the two in step)
WARNINGS = {
    "short-suspend-time": "slurm.suspend_time under 120 s: idle nodes power down and boot again between jobs",
    "single-spot-type": "a spot pool with one instance type: one spot shortage stops the pool",
    "spot-placement-group": "a spot pool in a cluster placement group: capacity in one spot rack is scarce",
    "wide-ssh-cidr": "an SSH CIDR wider than /16",
    "burstable-controller": "a burstable (t*) controller: slurmctld slows down once its CPU credits run out",
    "uneven-pool-types": "a pool's instance types differ in vCPUs or memory: Slurm gives every node the smallest",
    "cache-lacks-region": "the instance cache does not cover a region a pool launches in: offerings not checked",
    "type-not-in-every-az": "EC2 does not offer a pool's instance type in some of its AZs: it launches elsewhere",
}
SHORT_SUSPEND_TIME = 120
WIDEST_SSH_PREFIX = {4: 16, 6: 48}  # a wider range than a /16 (IPv4) or a site's /48 (IPv6) warns
BURSTABLE_FAMILIES = ("t2", "t3", "t3a", "t4g")


@dataclass(frozen=True)
class ConfigWarning:
    """One warning: where, its stable code, and what is suspicious."""

    path: str
    code: str
    message: str

    def __str__(self) -> str:
        return f"{self.path}: warning[{self.code}]: {self.message}"


def config_warnings(config: ElasticSlurmConfig, facts: TypeFacts | None = None) -> list[ConfigWarning]:
    """Every warning of `config`, in file order."""
    return [w for ci, cluster in enumerate(config.clusters) for w in _cluster(cluster, f"clusters[{ci}]", facts)]


def _cluster(cluster: Cluster, path: str, facts: TypeFacts | None) -> Iterator[ConfigWarning]:
    if cluster.slurm.suspend_time < SHORT_SUSPEND_TIME:
        yield ConfigWarning(
            f"{path}.slurm.suspend_time",
            "short-suspend-time",
            f"{cluster.slurm.suspend_time} s: a node idle that long is powered down and the next job waits minutes for "
            f"a new one to boot (at least {SHORT_SUSPEND_TIME} s is usual)",
        )
    for index, cidr in enumerate(cluster.ssh_allowed_cidrs):
        network = ipaddress.ip_network(cidr)
        if 0 < network.prefixlen < WIDEST_SSH_PREFIX[network.version]:
            yield ConfigWarning(
                f"{path}.ssh_allowed_cidrs[{index}]",
                "wide-ssh-cidr",
                f"'{cidr}' lets {network.num_addresses:,} addresses reach SSH: list your own ranges",
            )
    controller = cluster.controller.instance_type
    if controller.split(".", 1)[0] in BURSTABLE_FAMILIES:
        yield ConfigWarning(
            f"{path}.controller.instance_type",
            "burstable-controller",
            f"'{controller}' is burstable: slurmctld slows down once its CPU credits run out (c7i.large is the default)",
        )
    uncovered: set[str] = set()
    for pi, partition in enumerate(cluster.partitions):
        for qi, pool in enumerate(partition.pools):
            ppath = f"{path}.partitions[{pi}].pools[{qi}]"
            spot = pool.purchase_option != PurchaseOption.ON_DEMAND
            if pool.purchase_option == PurchaseOption.SPOT and len(pool.instance_types) == 1:
                yield ConfigWarning(
                    f"{ppath}.instance_types",
                    "single-spot-type",
                    f"a spot pool with the one type '{pool.instance_types[0]}': when EC2 has no spot capacity of it, "
                    "the pool launches nothing; list several similar types",
                )
            if spot and pool.placement_group:
                yield ConfigWarning(
                    f"{ppath}.placement_group",
                    "spot-placement-group",
                    "spot capacity inside one cluster placement group is scarce: launches often fail or come short",
                )
            if facts is None:
                continue
            sizes = {(i.vcpus, i.memory_mib) for t in pool.instance_types if (i := _size(facts, t)) is not None}
            if len(sizes) > 1:
                yield ConfigWarning(
                    f"{ppath}.instance_types",
                    "uneven-pool-types",
                    "the types differ in vCPUs or memory; Slurm gives every node of the pool the smallest, so the "
                    "larger types' extra stays unused: make a pool per size",
                )
            zones = azs_by_region(pool_azs(cluster, pool))
            for ti, itype in enumerate(pool.instance_types):
                for region, azs in zones.items():
                    missing = missing_azs(facts, region, itype, azs)
                    if missing and len(missing) < len(azs):  # in none of them: an error (instance_checks)
                        yield ConfigWarning(
                            f"{ppath}.instance_types[{ti}]",
                            "type-not-in-every-az",
                            f"EC2 does not offer '{itype}' in {', '.join(missing)} (the instance cache "
                            f"{facts.source}): the pool launches it in its other AZs only",
                        )
            for region in zones:
                if region not in facts.regions and region not in uncovered:
                    uncovered.add(region)
                    yield ConfigWarning(
                        f"{ppath}.availability_zones",
                        "cache-lacks-region",
                        f"the instance cache {facts.source} has no {region}: offerings there were not checked",
                    )


@dataclass(frozen=True)
class _Size:
    vcpus: int
    memory_mib: int


def _size(facts: TypeFacts, instance_type: str) -> _Size | None:
    info = facts.find(instance_type)
    return _Size(info.vcpus, info.memory_mib) if info is not None and info.vcpus else None
