"""gres.conf of one cluster (pure): the config's global lines (`clusters[].gres_settings`, e.g. AutoDetect), then one
line per GPU pool (`nodes.gres_lines`, with the pool's `gres_settings` merged in).

Whether a pool has GPUs comes from the instance cache, which `validate` does not read: a pool's `gres_settings` on a
pool without GPUs is refused here, at render, with one line naming its YAML path.
"""

from __future__ import annotations

from cluster_config import Cluster, ElasticSlurmConfig
from cluster_config.slurm_settings import setting_lines
from slurm_plugin.render.manifest import RenderError
from slurm_plugin.render.nodes import PoolNodes, gres_lines


def gres_conf_lines(config: ElasticSlurmConfig, cluster: Cluster, pools: list[PoolNodes]) -> list[str]:
    """Every line of the cluster's gres.conf (empty: no gres.conf); RenderError for gres_settings without GPUs."""
    _refuse_settings_without_gpus(config, cluster, pools)
    lines = []
    if cluster.gres_settings:  # elastic-slurm writes no global line itself, so nothing of its own is replaced
        lines = ["# clusters[].gres_settings of the config", *setting_lines(cluster.gres_settings)]
    return lines + [line for nodes in pools for line in gres_lines(nodes)]


def _refuse_settings_without_gpus(config: ElasticSlurmConfig, cluster: Cluster, pools: list[PoolNodes]) -> None:
    index = next(i for i, c in enumerate(config.clusters) if c.name == cluster.name)
    rendered = {(nodes.partition, nodes.pool): nodes for nodes in pools}
    for pi, partition in enumerate(cluster.partitions):
        for qi, pool in enumerate(partition.pools):
            if pool.gres_settings and not rendered[(partition.name, pool.name)].size.gpus:
                raise RenderError(
                    f"clusters[{index}].partitions[{pi}].pools[{qi}].gres_settings: pool {partition.name}-{pool.name} "
                    f"has no GPUs ({', '.join(pool.instance_types)}), so no gres.conf line to add them to"
                )
