"""Pure construction of the runtime manifest of one cluster from its config and the deployed infrastructure ids.

Before deploy (or offline), `placeholder_infra` gives ids that are plainly not real (`subnet-PLACEHOLDER-…`), so render
can run anywhere; the plugin would fail on them at launch, never silently launch somewhere else.
"""

from __future__ import annotations

from cluster_config import Cluster, Pool, pool_azs, region_of_az
from cluster_config.efa import pool_uses_efa
from slurm_plugin.instance_cache import InstanceCache
from slurm_plugin.manifest import DeployedInfra, Location, Manifest, PoolManifest


def shared_mount(cluster: Cluster) -> str | None:
    """Mount point of the first shared file system every node mounts (EFS first), or None."""
    storage = cluster.storage
    for fs in (storage.efs, storage.fsx_openzfs, storage.fsx_ontap, storage.fsx_lustre):
        if fs is not None:
            return fs.mount_point
    return None


def node_names_dir(cluster: Cluster) -> str | None:
    """Where resume tells booting instances their node names (slurm_plugin/powersave/node_names.py): on the shared
    file system every node mounts (EFS first, which remote regions mount too)."""
    mount = shared_mount(cluster)
    return f"{mount.rstrip('/')}/slurm/nodes/{cluster.name}" if mount else None


PLACEHOLDER = "PLACEHOLDER"


class RenderError(Exception):
    """The inputs of render do not fit together (one-line message naming what is missing)."""


def launch_template_key(partition: str, pool: str, region: str) -> str:
    """Key of DeployedInfra.launch_templates: `{partition}-{pool}@{region}`."""
    return f"{partition}-{pool}@{region}"


def placeholder_infra(cluster: Cluster) -> DeployedInfra:
    """Clearly fake ids for every AZ and pool of the cluster (render before deploy)."""
    subnets: dict[str, str] = {}
    templates: dict[str, str] = {}
    groups: dict[str, str] = {}
    for partition in cluster.partitions:
        for pool in partition.pools:
            for az in pool_azs(cluster, pool):
                subnets[az] = f"subnet-{PLACEHOLDER}-{az}"
                key = launch_template_key(partition.name, pool.name, region_of_az(az))
                templates[key] = f"lt-{PLACEHOLDER}-{key.replace('@', '-')}"
            if pool.placement_group:
                groups[f"{partition.name}-{pool.name}"] = f"pg-{PLACEHOLDER}-{partition.name}-{pool.name}"
    return DeployedInfra(subnets=subnets, launch_templates=templates, placement_groups=groups)


def not_offered(pool: Pool, azs: list[str], cache: InstanceCache | None) -> dict[str, list[str]]:
    """Instance type -> those of `azs` where the cache says EC2 does not offer it (types whose AZs it lacks: none)."""
    result: dict[str, list[str]] = {}
    for itype in pool.instance_types:
        for az in azs:
            info = cache.regions.get(region_of_az(az), {}).get(itype) if cache is not None else None
            if info is not None and info.availability_zones is not None and az not in info.availability_zones:
                result.setdefault(itype, []).append(az)
    return result


def pool_manifest(
    cluster: Cluster, partition: str, pool: Pool, infra: DeployedInfra, cache: InstanceCache | None = None
) -> PoolManifest:
    """One pool's manifest entry; RenderError when the infra lacks a subnet or launch template it needs."""
    locations = []
    for az in pool_azs(cluster, pool):
        region = region_of_az(az)
        key = launch_template_key(partition, pool.name, region)
        if az not in infra.subnets:
            raise RenderError(f"infra: no subnet for availability zone {az} (pool {partition}-{pool.name})")
        if key not in infra.launch_templates:
            raise RenderError(f"infra: no launch template '{key}' (pool {partition}-{pool.name})")
        locations.append(
            Location(
                region=region,
                availability_zone=az,
                subnet_id=infra.subnets[az],
                launch_template_id=infra.launch_templates[key],
            )
        )
    group = None
    if pool.placement_group:
        group = infra.placement_groups.get(f"{partition}-{pool.name}")
        if group is None:
            raise RenderError(f"infra: no placement group for pool {partition}-{pool.name}")
    return PoolManifest(
        partition=partition,
        pool=pool.name,
        node_prefix=f"{partition}-{pool.name}-",
        min_nodes=pool.min_nodes,
        max_nodes=pool.max_nodes,
        instance_types=list(pool.instance_types),
        purchase_option=pool.purchase_option.value,
        locations=locations,
        placement_group=group,
        spread_jobs_across_azs=pool.spread_jobs_across_azs,
        resume_timeout=cluster.slurm.resume_timeout,
        capacity_reservation_id=pool.capacity_reservation.id if pool.capacity_reservation else None,
        capacity_block=pool.capacity_reservation.capacity_block if pool.capacity_reservation else False,
        network_topology=pool.network_topology,
        efa=pool_uses_efa(pool),
        not_offered=not_offered(pool, pool_azs(cluster, pool), cache),
    )


def build_manifest(
    cluster: Cluster,
    infra: DeployedInfra,
    *,
    instance_cache_path: str,
    state_dir: str,
    log_file: str,
    slurm_bin_dir: str,
    slurm_conf: str | None,
    tags: dict[str, str],
    cache: InstanceCache | None = None,
) -> Manifest:
    """The whole runtime manifest of `cluster` (`cache`: which AZs offer which type)."""
    pools = [
        pool_manifest(cluster, part.name, pool, infra, cache) for part in cluster.partitions for pool in part.pools
    ]
    return Manifest(
        cluster=cluster.name,
        home_region=cluster.region,
        aws_endpoint_url=infra.aws_endpoint_url,
        instance_cache_path=instance_cache_path,
        state_dir=state_dir,
        log_file=log_file,
        node_names_dir=node_names_dir(cluster),
        slurm_bin_dir=slurm_bin_dir,
        slurm_conf=slurm_conf,
        capacity_cooldown_seconds=cluster.slurm.capacity_cooldown,
        boot_failure_limit=cluster.slurm.boot_failure_limit,
        impaired_threshold_seconds=cluster.health_checks.impaired_threshold,
        tags={**tags, **cluster.tags},
        pools=pools,
    )
