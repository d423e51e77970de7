"""Cross-field rules of a partition's `allocation` (shared | exclusive): what an exclusive partition conflicts with.

An exclusive partition is rendered with whole-node allocation (`OverSubscribe=EXCLUSIVE`, or `Exclusive=NODE` from
Slurm 26.05) and a partition SelectTypeParameters without memory (`CR_Core`, or `CR_Socket`), so its jobs get whole
nodes and slurmctld tracks no memory for them (docs/scheduling.md). Refused, each as (YAML path, message):
- the partition's own `slurm_settings` keys that set the same things (OverSubscribe, Exclusive*, SelectTypeParameters)
  or a memory default or limit (DefMemPer*, MaxMemPer*), which would mean memory is tracked there;
- a cluster-wide SelectTypeParameters with which Slurm ignores a partition's (only CR_Core/CR_Socket[_Memory] allow it,
  select/cons_tres `_setup_cr_type`), which would leave memory tracked;
- suspend preemption: a suspended job keeps its memory, which nothing would count on an exclusive partition's nodes.
`checks.check` turns each into a ConfigError.
"""

from __future__ import annotations

from collections.abc import Iterator

from cluster_config.model import Cluster

# partition keys allocation: exclusive writes or decides (compared case-insensitively)
SHARING_KEYS = ("OverSubscribe", "Shared", "Exclusive", "ExclusiveUser", "ExclusiveTopo")
MEMORY_KEYS = ("DefMemPerCPU", "DefMemPerNode", "DefMemPerGPU", "MaxMemPerCPU", "MaxMemPerNode")
# cluster-wide SelectTypeParameters values under which Slurm honours a partition's own SelectTypeParameters
PARTITION_CR_ALLOWED = frozenset({"cr_core", "cr_core_memory", "cr_socket", "cr_socket_memory"})


def allocation_problems(cluster: Cluster, path: str) -> Iterator[tuple[str, str]]:
    """(path, message) for every option of `cluster` (at YAML path `path`) that conflicts with an exclusive partition."""
    exclusive = [(pi, part) for pi, part in enumerate(cluster.partitions) if part.allocation == "exclusive"]
    if not exclusive:
        return
    for pi, part in exclusive:
        for key in part.slurm_settings:
            reason = _partition_key_conflict(key)
            if reason:
                yield (
                    f"{path}.partitions[{pi}].slurm_settings.{key}",
                    f"'{key}' conflicts with allocation 'exclusive': {reason}",
                )
    names = ", ".join(f"'{part.name}'" for _, part in exclusive)
    for key, value in cluster.slurm_settings.items():
        if key.lower() == "selecttypeparameters" and not _honours_partition_cr_type(str(value)):
            yield (
                f"{path}.slurm_settings.{key}",
                f"'{value}' makes Slurm ignore the SelectTypeParameters of exclusive partition(s) {names}, so memory "
                "would stay tracked: use CR_Core, CR_Core_Memory, CR_Socket or CR_Socket_Memory",
            )
    if cluster.preemption.type != "none" and cluster.preemption.mode == "suspend":
        yield (
            f"{path}.preemption.mode",
            f"suspend keeps a preempted job's memory in use, which nothing counts on the nodes of exclusive "
            f"partition(s) {names} (memory is not tracked there): use requeue or cancel",
        )


def socket_unit(cluster: Cluster) -> bool:
    """Whether the cluster's SelectTypeParameters (clusters[].slurm_settings) allocate sockets rather than cores."""
    return any(
        key.lower() == "selecttypeparameters" and bool(_tokens(str(value)) & {"cr_socket", "cr_socket_memory"})
        for key, value in cluster.slurm_settings.items()
    )


def _partition_key_conflict(key: str) -> str | None:
    lower = key.lower()
    if lower in {k.lower() for k in SHARING_KEYS}:
        return "it already gives each job whole nodes, one job per node (allocation 'shared' lets you set this key)"
    if lower == "selecttypeparameters":
        return "it sets the partition's SelectTypeParameters (cores or sockets, memory not tracked)"
    if lower in {k.lower() for k in MEMORY_KEYS}:
        return "its jobs get whole nodes and memory is not tracked there"
    return None


def _honours_partition_cr_type(value: str) -> bool:
    return bool(_tokens(value) & PARTITION_CR_ALLOWED)


def _tokens(value: str) -> set[str]:
    return {token.strip().lower() for token in value.split(",")}
