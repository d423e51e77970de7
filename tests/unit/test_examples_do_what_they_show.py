"""Every feature an example shows does something: preemption has a higher tier to preempt from, and no pool mixes
instance shapes (Slurm defines a pool's nodes by its smallest type, so a bigger type would sit half idle)."""

from __future__ import annotations

from pathlib import Path

import pytest

from cluster_config import load
from cluster_config.checks import pool_azs, region_of_az
from tests.unit.cache_fixture import fixture_cache

EXAMPLES = sorted((Path(__file__).resolve().parents[2] / "cluster_config" / "examples").glob("*.yaml"))


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.stem)
def test_partition_priority_preemption_has_a_higher_tier_over_shared_nodes(path: Path) -> None:
    for cluster in load(path).clusters:
        if cluster.preemption.type != "partition_priority":
            continue
        tiers = {p.name: p.priority_tier for p in cluster.partitions}
        preemptors = [
            (p.name, shared)
            for p in cluster.partitions
            for shared in p.share_nodes_of
            if p.priority_tier > tiers[shared]
        ]
        assert preemptors, f"{path.name}: {cluster.name} configures preemption that can never preempt"


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.stem)
def test_every_pool_has_one_instance_shape(path: Path) -> None:
    cache = fixture_cache()
    for cluster in load(path).clusters:
        for partition in cluster.partitions:
            for pool in partition.pools:
                regions = sorted({region_of_az(az) for az in pool_azs(cluster, pool)})
                shapes = set()
                for itype in pool.instance_types:
                    info = cache.find(itype, regions)
                    shapes.add((info.vcpus, info.gpus.count if info.gpus else 0))
                assert len(shapes) == 1, f"{path.name}: pool {partition.name}-{pool.name} mixes {sorted(shapes)}"
