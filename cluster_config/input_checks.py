"""Rules for inputs AWS or Slurm would refuse, or silently mis-handle, that no single field's type can say.

Pure functions over a parsed config; `input_problems(config)` returns every problem as a `ConfigError(path, message)`:

- availability zone letters (AWS names AZs a to f: no region has more than six);
- names Slurm reserves (a partition called `default` is read as the defaults line; the account `root` exists);
- partition- and node-level `slurm_settings` keys that are not parameters of that line (slurm.conf(5) of the pinned
  release, PARTITION and NODE CONFIGURATION; `slurm_line_keys`);
- the same QOS, account, user of an account, subnet or AZ given twice; subnets of one VPC that overlap;
- tags: the product's own `elastic-slurm:` keys, and more tags than AWS's 50 per resource leave room for;
- FSx capacity bounds AWS documents per file system kind and deployment type.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterator, Mapping

from cluster_config.checks import ConfigError
from cluster_config.model import Cluster, ElasticSlurmConfig, ExistingNetwork, NewNetwork
from cluster_config.slurm_line_keys import NODE_KEYS, PARTITION_KEYS

# AWS names an AZ by its region and a letter; us-east-1, the region with the most AZs, has six (a to f).
AZ_LETTERS = "abcdef"
# Names Slurm gives a meaning of its own (compared case-insensitively).
RESERVED_PARTITION_NAMES = {"default": "Slurm reads `PartitionName=DEFAULT` as the defaults of every partition"}
RESERVED_ACCOUNT_NAMES = {"root": "Slurm's accounting tree starts at the account root, which always exists"}
# The product tags every resource with keys under this prefix (elastic-slurm:cluster, :pool, :launch-request, ...);
# lookups, IAM conditions and teardown rely on them.
PRODUCT_TAG_PREFIX = "elastic-slurm:"
# AWS allows 50 user tags per resource (aws: tags do not count); the product puts up to 10 of its own on a resource.
MAX_USER_TAGS = 40
# FSx CreateFileSystem StorageCapacity, for the deployment types the stacks create (SINGLE_AZ_1): ONTAP 1,024 GiB to
# 196,608 GiB ("Updating storage capacity", FSx for ONTAP User Guide: "up to the maximum allowed value of 196,608 GiB");
# OpenZFS 64 GiB to 524,288 GiB (API reference). Lustre's steps are checked by aws_catalog.lustre_capacity; AWS
# documents no maximum for it beyond the account's quota.
FSX_CAPACITY_GIB = {"fsx_ontap": (1024, 196_608), "fsx_openzfs": (64, 524_288)}
_AZ_LETTER = re.compile(r"^(.*-\d)([a-z])$")


def input_problems(config: ElasticSlurmConfig) -> list[ConfigError]:
    """Every problem of this module's rules in `config` (empty when none)."""
    errors = list(_sacct_names(config))
    errors += _tags(config.tags, {}, "tags")
    for ci, cluster in enumerate(config.clusters):
        path = f"clusters[{ci}]"
        errors += _azs(cluster, path)
        errors += _networks(cluster, path)
        errors += _partitions(cluster, path)
        errors += _tags(cluster.tags, config.tags, f"{path}.tags")
        errors += _fsx_capacity(cluster, path)
    return errors


def az_problem(az: str) -> str | None:
    """Why `az` cannot be an availability zone name (it already has the shape of one), or None."""
    match = _AZ_LETTER.match(az)
    if match and match.group(2) not in AZ_LETTERS:
        return (
            f"availability zone '{az}' does not exist: AWS names a region's zones {match.group(1)}a to "
            f"{match.group(1)}f at most"
        )
    return None


def _azs(cluster: Cluster, path: str) -> Iterator[ConfigError]:
    networks = [(f"{path}.network", cluster.network)]
    networks += [(f"{path}.remote_regions[{ri}].network", r.network) for ri, r in enumerate(cluster.remote_regions)]
    for npath, network in networks:
        if isinstance(network, NewNetwork):
            named = [(f"{npath}.availability_zones[{i}]", az) for i, az in enumerate(network.availability_zones)]
        else:
            named = [
                (f"{npath}.subnets[{i}].availability_zone", s.availability_zone) for i, s in enumerate(network.subnets)
            ]
        for where, az in named:
            if problem := az_problem(az):
                yield ConfigError(where, problem)
        if isinstance(network, NewNetwork):
            azs = list(network.availability_zones)
            for index, az in enumerate(azs):
                if az in azs[:index]:
                    yield ConfigError(
                        f"{npath}.availability_zones[{index}]", f"availability zone '{az}' is listed twice"
                    )
    for pi, partition in enumerate(cluster.partitions):
        for qi, pool in enumerate(partition.pools):
            for ai, az in enumerate(pool.availability_zones or []):
                if problem := az_problem(az):
                    yield ConfigError(f"{path}.partitions[{pi}].pools[{qi}].availability_zones[{ai}]", problem)


def _networks(cluster: Cluster, path: str) -> Iterator[ConfigError]:
    """A subnet is listed once in the whole cluster; subnets of one VPC do not overlap (AWS refuses both)."""
    seen: dict[str, str] = {}
    imported = [(f"{path}.network", cluster.network)]
    imported += [(f"{path}.remote_regions[{ri}].network", r.network) for ri, r in enumerate(cluster.remote_regions)]
    for npath, network in imported:
        if not isinstance(network, ExistingNetwork):
            continue
        ranges: list[tuple[str, ipaddress.IPv4Network | ipaddress.IPv6Network]] = []
        for si, subnet in enumerate(network.subnets):
            where = f"{npath}.subnets[{si}]"
            if subnet.subnet_id in seen:
                yield ConfigError(
                    f"{where}.subnet_id", f"subnet '{subnet.subnet_id}' is already {seen[subnet.subnet_id]}"
                )
                continue
            seen[subnet.subnet_id] = where
            cidr = ipaddress.ip_network(subnet.cidr, strict=False)
            clash = next((other for other, net in ranges if net.overlaps(cidr)), None)
            if clash is not None:
                yield ConfigError(f"{where}.cidr", f"{cidr} overlaps {clash}'s CIDR: subnets of one VPC are disjoint")
            ranges.append((where, cidr))


def _partitions(cluster: Cluster, path: str) -> Iterator[ConfigError]:
    for pi, partition in enumerate(cluster.partitions):
        ppath = f"{path}.partitions[{pi}]"
        reason = RESERVED_PARTITION_NAMES.get(partition.name.lower())
        if reason:
            yield ConfigError(f"{ppath}.name", f"'{partition.name}' is reserved: {reason}; choose another name")
        yield from _line_keys(partition.slurm_settings, PARTITION_KEYS, "partition", f"{ppath}.slurm_settings")
        for qi, pool in enumerate(partition.pools):
            yield from _line_keys(pool.slurm_settings, NODE_KEYS, "node", f"{ppath}.pools[{qi}].slurm_settings")


def _line_keys(settings: Mapping[str, object], allowed: frozenset[str], line: str, path: str) -> Iterator[ConfigError]:
    lookup = {key.lower() for key in allowed}
    for key in settings:
        if key.lower() not in lookup:
            yield ConfigError(
                f"{path}.{key}",
                f"'{key}' is not a {line} parameter of Slurm (slurm.conf(5), {line.upper()} CONFIGURATION); a "
                "slurm.conf parameter goes in clusters[].slurm_settings",
            )


def _sacct_names(config: ElasticSlurmConfig) -> Iterator[ConfigError]:
    for kind, items in (("QOS", config.qos), ("account", config.accounts)):
        names = [item.name for item in items]
        where = "qos" if kind == "QOS" else "accounts"
        for index, name in enumerate(names):
            if name in names[:index]:
                yield ConfigError(f"{where}[{index}].name", f"duplicate {kind} name '{name}'")
    for index, account in enumerate(config.accounts):
        reason = RESERVED_ACCOUNT_NAMES.get(account.name.lower())
        if reason:
            yield ConfigError(f"accounts[{index}].name", f"'{account.name}' is reserved: {reason}")
        users = list(account.users)
        for ui, user in enumerate(users):
            if user in users[:ui]:
                yield ConfigError(f"accounts[{index}].users[{ui}]", f"user '{user}' is listed twice")


def _tags(tags: dict[str, str], inherited: dict[str, str], path: str) -> Iterator[ConfigError]:
    for key in tags:
        if key.lower().startswith(PRODUCT_TAG_PREFIX):
            yield ConfigError(
                f"{path}.{key}",
                f"tag keys starting with '{PRODUCT_TAG_PREFIX}' are the product's own (lookups, IAM conditions and "
                "teardown rely on them)",
            )
    total = len({**inherited, **tags})
    if total > MAX_USER_TAGS:
        yield ConfigError(
            path,
            f"{total} tags{' with the file-level ones' if inherited else ''}: at most {MAX_USER_TAGS} (AWS allows 50 "
            "per resource and elastic-slurm adds its own)",
        )


def _fsx_capacity(cluster: Cluster, path: str) -> Iterator[ConfigError]:
    for key, (low, high) in FSX_CAPACITY_GIB.items():
        fs = getattr(cluster.storage, key)
        if fs is not None and not low <= fs.storage_capacity_gib <= high:
            yield ConfigError(
                f"{path}.storage.{key}.storage_capacity_gib",
                f"{fs.storage_capacity_gib} GiB: AWS takes {low} to {high} GiB for this file system",
            )
