"""A pool with `disable_hyperthreading` (docs/hyperthreading.md): Slurm is told the smallest physical core count of
its types as CPUs, the partition's default memory per CPU follows, and only that pool's launch template values carry
ES_SMT_OFF."""

from __future__ import annotations

from typing import Any

from cluster_config import parse
from slurm_plugin.render.cluster import render_cluster
from slurm_plugin.render.manifest import placeholder_infra
from stacks.user_data import pool_values
from tests.unit.cache_fixture import fixture_cache


def one_partition(pools: list[dict[str, Any]]) -> dict[str, Any]:
    """A config of one cluster `ht` whose default partition `cpu` has `pools`."""
    cluster = {
        "name": "ht",
        "region": "us-east-1",
        "storage": {"efs": {}},
        "network": {"mode": "create", "availability_zones": ["us-east-1a"]},
        "partitions": [{"name": "cpu", "default": True, "pools": pools}],
    }
    return {"clusters": [cluster]}


def rendered(pool: dict[str, Any]) -> tuple[str, str]:
    """(NodeName line, PartitionName line) of a one-pool cluster."""
    config = parse(one_partition([{"name": "c7i", "max_nodes": 2, **pool}]), "ht.yaml")
    out = render_cluster(config, "ht", placeholder_infra(config.cluster("ht")), fixture_cache())
    (node,) = [x for x in out.fragments["nodes"].splitlines() if x.startswith("NodeName=")]
    (part,) = [x for x in out.fragments["partitions"].splitlines() if x.startswith("PartitionName=")]
    return node, part


def test_cpus_are_the_physical_cores_and_memory_per_cpu_follows() -> None:
    # c7i.2xlarge: 8 vCPUs = 4 cores x 2 threads, RealMemory 15564 MiB
    threads_node, threads_part = rendered({"instance_types": ["c7i.2xlarge"]})
    cores_node, cores_part = rendered({"instance_types": ["c7i.2xlarge"], "disable_hyperthreading": True})
    assert " CPUs=8 Sockets=1 CoresPerSocket=4 ThreadsPerCore=2 RealMemory=15564 " in threads_node
    assert "DefMemPerCPU=1945" in threads_part.split()
    # one thread per core: the layout says so, or slurmd's 8 CPUs would not match the 4 online
    assert " CPUs=4 Sockets=1 CoresPerSocket=4 ThreadsPerCore=1 RealMemory=15564 " in cores_node
    assert "DefMemPerCPU=3891" in cores_part.split()


def test_a_multi_type_pool_gets_its_smallest_core_count() -> None:
    node, _ = rendered({"instance_types": ["c7i.2xlarge", "c6i.xlarge"], "disable_hyperthreading": True})
    assert " CPUs=2 " in node  # c6i.xlarge: 2 cores


def test_mem_spec_limit_is_kept_out_of_the_memory_per_core() -> None:
    _, part = rendered(
        {"instance_types": ["c7i.2xlarge"], "disable_hyperthreading": True, "slurm_settings": {"MemSpecLimit": 1024}}
    )
    assert "DefMemPerCPU=3635" in part.split()  # (15564 - 1024) // 4


def test_only_such_a_pools_launch_template_values_turn_the_threads_off() -> None:
    data = one_partition(
        [
            {"name": "off", "instance_types": ["c7i.large"], "max_nodes": 1, "disable_hyperthreading": True},
            {"name": "on", "instance_types": ["c7i.large"], "max_nodes": 1},
        ]
    )
    off, on = parse(data, "ht.yaml").clusters[0].partitions[0].pools
    assert pool_values("cpu", off) == {"ES_POOL": "cpu-off", "ES_SMT_OFF": "1"}
    assert pool_values("cpu", on) == {"ES_POOL": "cpu-on"}
