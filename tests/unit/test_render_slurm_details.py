"""What an experienced Slurm admin expects of the rendered slurm.conf (issue 31 item 7): a site's SlurmctldParameters
merged with the product's, AccountingStorageTRES=gres/gpu with GPU pools, the core layout on NodeName lines, and the
partition GraceTime only where Slurm reads it."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from cluster_config import parse
from slurm_plugin.instance_cache import InstanceCache, InstanceTypeInfo
from slurm_plugin.render.base import BaseSettings, render_base_conf
from slurm_plugin.render.cluster import RenderOptions, render_cluster
from slurm_plugin.render.manifest import placeholder_infra
from slurm_plugin.render.nodes import core_layout
from tests.unit.cache_fixture import fixture_cache

CPU_POOL = {"name": "c7i", "instance_types": ["c7i.2xlarge"], "max_nodes": 2}
GPU_POOL = {"name": "g5", "instance_types": ["g5.12xlarge"], "max_nodes": 2, "gpu": {}}
CLUSTER: dict[str, Any] = {
    "name": "small",
    "region": "us-east-1",
    "storage": {"efs": {}},
    "network": {"mode": "create", "availability_zones": ["us-east-1a"]},
    "partitions": [{"name": "cpu", "default": True, "pools": [CPU_POOL]}],
}


def render(
    pools: list[dict[str, Any]] | None = None, accounting: str = "create", in_base: bool = True, **changes: Any
) -> tuple[list[str], list[str]]:
    """(base slurm.conf lines, fragment lines) the controller's boot writes, as production renders them."""
    cluster = copy.deepcopy(CLUSTER) | changes
    if pools is not None:
        cluster["partitions"][0]["pools"] = pools
    qos = [{"name": "high", "preempt": ["normal"]}]
    config = parse({"clusters": [cluster], "accounting": {"mode": accounting}, "qos": qos}, "details.yaml")
    options = RenderOptions(slurmctld_parameters_in_base=in_base)
    out = render_cluster(config, "small", placeholder_infra(config.cluster("small")), fixture_cache(), options)
    settings = BaseSettings(
        controller_hosts=("ip-1-2-3-4",), slurmdbd_host="ip-1-2-3-4" if accounting != "none" else None
    )
    base = render_base_conf(config, "small", settings)
    return base.splitlines(), out.slurm_conf.splitlines()


def values(lines: list[str], key: str) -> list[str]:
    """Every value of `key` the lines set (Slurm keeps the last)."""
    return [line.split("=", 1)[1] for line in lines if line.split("=", 1)[0].lower() == key.lower()]


# ---- SlurmctldParameters: the site's list merged with the product's ------------------------------------------------


def test_site_slurmctld_parameters_are_merged_with_the_products_on_the_controller() -> None:
    site = "conmgr_threads=8,enable_rpc_queue"
    base, fragments = render(slurm_settings={"SlurmctldParameters": site})
    # one line in all: the base gives way, the fragments' custom part carries the merged list
    assert values(base, "SlurmctldParameters") == []
    assert values(fragments, "SlurmctldParameters") == [
        "conmgr_threads=8,enable_rpc_queue,enable_configless,idle_on_node_suspend,power_save_interval=1"
    ]


def test_without_a_base_the_fragment_merges_only_its_own_parameters() -> None:
    _, fragments = render(
        in_base=False, slurm_settings={"slurmctldparameters": "enable_rpc_queue,power_save_interval=1"}
    )
    assert values(fragments, "SlurmctldParameters") == ["enable_rpc_queue,power_save_interval=1,idle_on_node_suspend"]


def test_without_site_parameters_the_base_writes_the_products_alone() -> None:
    base, fragments = render()
    assert values(base, "SlurmctldParameters") == ["enable_configless,idle_on_node_suspend,power_save_interval=1"]
    assert values(fragments, "SlurmctldParameters") == []


# ---- AccountingStorageTRES=gres/gpu ------------------------------------------------------------------------------


def test_gpu_pools_with_accounting_record_gpu_use() -> None:
    base, fragments = render(pools=[CPU_POOL, GPU_POOL])
    assert values(base + fragments, "AccountingStorageTRES") == ["gres/gpu"]


@pytest.mark.parametrize(("pools", "accounting"), [([CPU_POOL], "create"), ([CPU_POOL, GPU_POOL], "none")])
def test_no_gpu_tres_without_gpus_or_without_slurmdbd(pools: list[dict[str, Any]], accounting: str) -> None:
    base, fragments = render(pools=pools, accounting=accounting)
    assert values(base + fragments, "AccountingStorageTRES") == []


def test_a_sites_tres_list_keeps_its_entries_and_gains_gpus() -> None:
    site = {"AccountingStorageTRES": "license/matlab,gres/gpu:a100"}
    base, fragments = render(pools=[CPU_POOL, GPU_POOL], slurm_settings=site)
    assert values(base + fragments, "AccountingStorageTRES") == ["license/matlab,gres/gpu:a100,gres/gpu"]
    # a site that already lists it gets it once
    base, fragments = render(pools=[CPU_POOL, GPU_POOL], slurm_settings={"AccountingStorageTRES": "gres/gpu,fs/lustre"})
    assert values(base + fragments, "AccountingStorageTRES") == ["gres/gpu,fs/lustre"]


# ---- NodeName core layout ----------------------------------------------------------------------------------------


def node_line(fragments: list[str]) -> str:
    (line,) = [x for x in fragments if x.startswith("NodeName=")]
    return line


def test_node_lines_give_sockets_cores_and_threads_from_the_cache() -> None:
    _, fragments = render()
    # c7i.2xlarge: 8 vCPUs = 4 cores x 2 threads (DescribeInstanceTypes DefaultCores/DefaultThreadsPerCore)
    assert " CPUs=8 Sockets=1 CoresPerSocket=4 ThreadsPerCore=2 RealMemory=" in node_line(fragments)
    _, fragments = render(pools=[{"name": "arm", "instance_types": ["c7g.xlarge"], "max_nodes": 1}])
    assert " CPUs=4 Sockets=1 CoresPerSocket=4 ThreadsPerCore=1 RealMemory=" in node_line(fragments)


def test_a_pool_that_sets_its_own_layout_gets_none_of_the_products() -> None:
    pool = CPU_POOL | {"slurm_settings": {"Sockets": 2, "CoresPerSocket": 4}}  # 8 CPUs: one thread per core
    line = node_line(render(pools=[pool])[1])
    assert "ThreadsPerCore" not in line and line.count("Sockets=") == 1
    assert line.endswith(" Sockets=2 CoresPerSocket=4")


def info(cores: int | None, threads: int | None, vcpus: int = 8) -> InstanceTypeInfo:
    return InstanceTypeInfo(vcpus=vcpus, cores=cores, threads_per_core=threads, memory_mib=16384, architecture="x86_64")


@pytest.mark.parametrize(
    ("infos", "cpus", "one_thread", "layout"),
    [
        ([info(4, 2)], 8, False, (4, 2)),
        ([info(4, 2)], 4, True, (4, 1)),  # disable_hyperthreading: the cores are the CPUs
        ([info(4, 2), info(2, 2, vcpus=4)], 4, False, (2, 2)),  # the smallest type
        ([info(4, 2), info(8, 1)], 8, False, None),  # threads per core differ: CPUs= only
        ([info(None, None)], 8, False, None),  # a cache written before cores were recorded
        ([info(3, 2)], 8, False, None),  # cores x threads do not make the CPUs
    ],
)
def test_core_layout_only_where_every_type_agrees(
    infos: list[InstanceTypeInfo], cpus: int, one_thread: bool, layout: tuple[int, int] | None
) -> None:
    assert core_layout(infos, cpus, one_thread) == layout


def test_an_old_cache_without_cores_renders_cpus_only() -> None:
    cache = fixture_cache()
    old = InstanceCache(
        generated_at=cache.generated_at,
        regions={
            region: {t: i.model_copy(update={"cores": None, "threads_per_core": None}) for t, i in types.items()}
            for region, types in cache.regions.items()
        },
    )
    config = parse({"clusters": [CLUSTER]}, "old.yaml")
    out = render_cluster(config, "small", placeholder_infra(config.cluster("small")), old)
    line = node_line(out.slurm_conf.splitlines())
    assert " CPUs=8 RealMemory=" in line and "Sockets" not in line


# ---- preemption grace time: on the partition with partition_priority, on the QOS with qos -------------------------


@pytest.mark.parametrize(("kind", "grace"), [("partition_priority", ["GraceTime=45"]), ("qos", [])])
def test_partition_grace_time_only_where_slurm_reads_it(kind: str, grace: list[str]) -> None:
    _, fragments = render(preemption={"type": kind, "grace_time": 45}, accounting="create")
    partitions = [x for x in fragments if x.startswith("PartitionName=")]
    assert [w for line in partitions for w in line.split() if w.startswith("GraceTime=")] == grace
