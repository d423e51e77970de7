"""render_cluster with `share_nodes_of`: a partition lists the nodes of the partitions it shares, which stay theirs."""

from __future__ import annotations

from typing import Any

from cluster_config import parse
from slurm_plugin.render.cluster import Rendered, render_cluster
from slurm_plugin.render.manifest import placeholder_infra
from tests.unit.cache_fixture import fixture_cache

BATCH: dict[str, Any] = {
    "name": "batch",
    "default": True,
    "pools": [
        {"name": "c7i", "instance_types": ["c7i.large"], "min_nodes": 1, "max_nodes": 4},
        {"name": "spot", "instance_types": ["c7i.xlarge"], "purchase_option": "spot", "max_nodes": 2},
    ],
}


def render_with(interactive: dict[str, Any]) -> Rendered:
    cluster = {
        "name": "share",
        "region": "us-east-1",
        "storage": {"efs": {}},
        "network": {"mode": "create", "availability_zones": ["us-east-1a"]},
        "partitions": [BATCH, {"name": "interactive", "interactive": True, "priority_tier": 10, **interactive}],
        "preemption": {"type": "partition_priority", "mode": "requeue"},
    }
    config = parse({"clusters": [cluster]}, "share.yaml")
    return render_cluster(config, "share", placeholder_infra(config.cluster("share")), fixture_cache())


def test_partition_without_pools_lists_the_nodesets_of_the_partition_it_shares() -> None:
    rendered = render_with({"share_nodes_of": ["batch"]})
    assert rendered.fragments["partitions"].splitlines() == [
        "# ---- partitions",
        "# a job no partition it names could ever run (too many nodes, CPUs, memory or time) is refused at submit",
        "EnforcePartLimits=ANY",
        "NodeSet=batch_c7i Nodes=batch-c7i-[1-4]",
        "NodeSet=batch_spot Nodes=batch-spot-[1-2]",
        "# DefMemPerCPU: a job without --mem gets this much per CPU (the smallest node's share), so jobs share nodes",
        "PartitionName=batch Nodes=batch_c7i,batch_spot Default=YES MaxTime=INFINITE PriorityTier=1 DefMemPerCPU=1792 "
        "State=UP",
        "PartitionName=interactive Nodes=batch_c7i,batch_spot Default=NO MaxTime=INFINITE PriorityTier=10 "
        "DefMemPerCPU=1792 State=UP",
    ]
    assert rendered.fragments["preemption"].splitlines()[1:] == [
        "PreemptType=preempt/partition_prio",
        "PreemptMode=REQUEUE",
    ]


def test_partition_with_own_pool_lists_its_own_nodes_first_then_the_shared_ones() -> None:
    own = {"pools": [{"name": "m7i", "instance_types": ["m7i.large"], "max_nodes": 2}], "share_nodes_of": ["batch"]}
    lines = render_with(own).fragments["partitions"].splitlines()
    assert "NodeSet=interactive_m7i Nodes=interactive-m7i-[1-2]" in lines
    assert lines[-1] == (
        "PartitionName=interactive Nodes=interactive_m7i,batch_c7i,batch_spot Default=NO MaxTime=INFINITE "
        "PriorityTier=10 DefMemPerCPU=1792 State=UP"
    )


def test_shared_nodes_stay_with_the_owning_pool_in_nodes_manifest_and_power_save() -> None:
    shared = render_with({"share_nodes_of": ["batch"]})
    alone = render_with({"pools": [{"name": "m7i", "instance_types": ["m7i.large"], "max_nodes": 2}]})
    assert [p.key for p in shared.manifest.pools] == ["batch-c7i", "batch-spot"]
    assert [p.key for p in alone.manifest.pools] == ["batch-c7i", "batch-spot", "interactive-m7i"]
    batch_nodes = [line for line in shared.fragments["nodes"].splitlines() if line.startswith("NodeName=")]
    assert batch_nodes == [line for line in alone.fragments["nodes"].splitlines() if line.startswith("NodeName=batch")]
    assert shared.fragments["power_save"] == alone.fragments["power_save"]
    assert "SuspendExcNodes=batch-c7i-1" in shared.fragments["power_save"].splitlines()
