"""Cross-field rule of `pools[].network_topology` (docs/topology.md): it owns slurm.conf's TopologyPlugin."""

from __future__ import annotations

from collections.abc import Iterator

from cluster_config.model import Cluster


def topology_problems(cluster: Cluster, path: str) -> Iterator[tuple[str, str]]:
    """(YAML path, message) per problem: network_topology writes TopologyPlugin=topology/tree and its topology.conf,
    so a user's TopologyPlugin would have slurmctld read that tree as another plugin's file."""
    if not any(pool.network_topology for part in cluster.partitions for pool in part.pools):
        return
    for key in cluster.slurm_settings:
        if key.lower() == "topologyplugin":
            yield (
                f"{path}.slurm_settings.{key}",
                "a pool has network_topology, which sets TopologyPlugin=topology/tree: remove one of them",
            )
