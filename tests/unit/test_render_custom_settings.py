"""Custom Slurm settings (cluster_config/slurm_settings.py): merged into the rendered files at cluster, partition and
pool level, replacing the product's same keys; keys the product owns are refused with a line naming the key."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

from cluster_config import ConfigInvalid, load, parse
from cluster_config.slurm_settings import (
    CGROUP_OWNED,
    CLUSTER_OWNED,
    DBD_OWNED,
    GRES_OWNED,
    GRES_POOL_OWNED,
    PARTITION_OWNED,
    POOL_OWNED,
)
from slurm_plugin.render.base import BaseSettings, render_base_conf, render_cgroup_conf
from slurm_plugin.render.cluster import render_cluster
from slurm_plugin.render.manifest import placeholder_infra
from tests.unit.cache_fixture import fixture_cache

POOL = {"name": "c7i", "instance_types": ["c7i.large"], "max_nodes": 4}
CLUSTER: dict[str, Any] = {
    "name": "small",
    "region": "us-east-1",
    "storage": {"efs": {}},
    "network": {"mode": "create", "availability_zones": ["us-east-1a"]},
    "partitions": [{"name": "cpu", "default": True, "pools": [POOL]}],
}


def cluster_with(**changes: Any) -> dict[str, Any]:
    cluster = copy.deepcopy(CLUSTER)
    partition = cluster["partitions"][0]
    for key, value in changes.items():
        target, _, field = key.rpartition("__")
        {"": cluster, "partition": partition, "pool": partition["pools"][0]}[target][field] = value
    return cluster


def rendered(**changes: Any) -> tuple[Any, str, str]:
    config = parse({"clusters": [cluster_with(**changes)]}, "custom.yaml")
    cluster = config.cluster("small")
    out = render_cluster(config, "small", placeholder_infra(cluster), fixture_cache())
    base = render_base_conf(config, "small", BaseSettings(controller_hosts=("ip-1-2-3-4",)))
    return out, base, render_cgroup_conf(None, cluster.cgroup_settings)


def test_pool_settings_are_added_to_the_node_line() -> None:
    out, _, _ = rendered(pool__slurm_settings={"MemSpecLimit": 1024, "TmpDisk": 20000})
    (line,) = [x for x in out.fragments["nodes"].splitlines() if x.startswith("NodeName=")]
    assert line.endswith(" Weight=89 State=CLOUD MemSpecLimit=1024 TmpDisk=20000")


def test_partition_settings_add_keys_and_a_default_memory_of_another_kind_replaces_the_products() -> None:
    out, _, _ = rendered(partition__slurm_settings={"MaxNodes": 2, "DefMemPerNode": 2048, "ExclusiveUser": True})
    (line,) = [x for x in out.fragments["partitions"].splitlines() if x.startswith("PartitionName=")]
    assert line == (
        "PartitionName=cpu Nodes=cpu_c7i Default=YES MaxTime=INFINITE PriorityTier=1 State=UP "
        "MaxNodes=2 DefMemPerNode=2048 ExclusiveUser=yes"
    )


def test_cluster_settings_come_last_and_replace_the_products_lines_in_base_and_fragments() -> None:
    settings = {
        "SchedulerParameters": "bf_continue,bf_window=4320",
        "SlurmctldDebug": "debug",
        "EnforcePartLimits": "NO",
    }
    out, base, _ = rendered(slurm_settings=settings)
    assert "SlurmctldDebug=info" not in base.splitlines()
    assert "SlurmdDebug=info" in base.splitlines()
    assert "EnforcePartLimits=ANY" not in out.fragments["partitions"].splitlines()
    assert list(out.fragments)[-1] == "custom"
    assert out.slurm_conf.splitlines()[-3:] == [
        # the product's appended
        "SchedulerParameters=bf_continue,bf_window=4320,batch_sched_delay=0,nohold_on_prolog_fail",
        "SlurmctldDebug=debug",
        "EnforcePartLimits=NO",
    ]


def test_cgroup_settings_replace_and_add() -> None:
    _, _, cgroup = rendered(cgroup_settings={"ConstrainSwapSpace": False, "AllowedRAMSpace": 98})
    lines = cgroup.splitlines()
    assert "ConstrainSwapSpace=yes" not in lines
    assert lines[-2:] == ["ConstrainSwapSpace=no", "AllowedRAMSpace=98"]
    assert "ConstrainRAMSpace=yes" in lines


def test_without_settings_nothing_changes() -> None:
    out, _, cgroup = rendered()
    assert "custom" not in out.fragments
    assert cgroup.splitlines()[-1] == "ConstrainDevices=yes"


@pytest.mark.parametrize(
    ("changes", "path", "message"),
    [
        (
            {"slurm_settings": {"SlurmctldHost": "x"}},
            "clusters[0].slurm_settings",
            "key 'SlurmctldHost' is set by elastic-slurm (set from the controllers and file systems at boot)",
        ),
        (
            {"slurm_settings": {"resumetimeout": 60}},
            "clusters[0].slurm_settings",
            "key 'resumetimeout' is set by elastic-slurm (set clusters[].slurm.resume_timeout)",
        ),
        (
            {"partition__slurm_settings": {"MaxTime": "1:00:00"}},
            "clusters[0].partitions[0].slurm_settings",
            "key 'MaxTime' is set by elastic-slurm (set partitions[].max_time)",
        ),
        (
            {"pool__slurm_settings": {"RealMemory": 1000}},
            "clusters[0].partitions[0].pools[0].slurm_settings",
            "key 'RealMemory' is set by elastic-slurm (it comes from the instance type, less a reserve)",
        ),
        (
            {"pool__slurm_settings": {"TmpDisk": "10 000"}},
            "clusters[0].partitions[0].pools[0].slurm_settings",
            "key 'TmpDisk': value '10 000' has a space, quote, '#' or backslash, which Slurm would split",
        ),
        (
            {"cgroup_settings": {"CgroupPlugin": "cgroup/v1"}},
            "clusters[0].cgroup_settings",
            "key 'CgroupPlugin' is set by elastic-slurm (the images pick the cgroup plugin (autodetect))",
        ),
        (
            {"gres_settings": {"Cores": "0-3"}},
            "clusters[0].gres_settings",
            "key 'Cores' is set by elastic-slurm (a GPU line's key: set pools[].gres_settings)",
        ),
        (
            {"pool__gres_settings": {"file": "/dev/nvidia0"}},
            "clusters[0].partitions[0].pools[0].gres_settings",
            "key 'file' is set by elastic-slurm (the NVIDIA device files follow the instance type's GPU count)",
        ),
        (
            {"pool__gres_settings": {"Flags": "nvidia_gpu_env explicit"}},
            "clusters[0].partitions[0].pools[0].gres_settings",
            "key 'Flags': value 'nvidia_gpu_env explicit' has a space, quote, '#' or backslash, which Slurm would split",
        ),
    ],
)
def test_owned_keys_are_refused_with_one_line_naming_the_key(changes: dict[str, Any], path: str, message: str) -> None:
    with pytest.raises(ConfigInvalid) as caught:
        parse({"clusters": [cluster_with(**changes)]}, "custom.yaml")
    assert [str(e) for e in caught.value.errors] == [f"{path}: {message}"]


def test_every_owned_key_is_listed_in_the_docs() -> None:
    text = (Path(__file__).resolve().parents[2] / "docs" / "custom-settings.md").read_text(encoding="utf-8")
    for table in (CLUSTER_OWNED, PARTITION_OWNED, POOL_OWNED, CGROUP_OWNED, GRES_OWNED, GRES_POOL_OWNED, DBD_OWNED):
        for key, reason in table.items():
            assert f"| `{key}` | {reason} |" in text, key


def test_a_pools_mem_spec_limit_is_kept_out_of_the_partitions_default_memory() -> None:
    out, _, _ = rendered(pool__slurm_settings={"MemSpecLimit": 1024})
    # c7i.large: RealMemory 3584 MiB, 1024 kept for the OS and daemons, 2 CPUs
    assert "DefMemPerCPU=1280" in out.fragments["partitions"].split()


def test_a_cluster_wide_default_memory_leaves_the_partitions_without_their_own() -> None:
    out, _, _ = rendered(slurm_settings={"DefMemPerNode": 2048})
    assert "DefMemPerCPU" not in out.fragments["partitions"]
    assert out.slurm_conf.splitlines()[-1] == "DefMemPerNode=2048"


def test_a_federation_member_leaves_partition_limits_to_the_sibling_that_runs_the_job() -> None:
    second = {**copy.deepcopy(CLUSTER), "name": "other"}
    second["network"] = {"mode": "create", "vpc_cidr": "100.65.0.0/16", "availability_zones": ["us-east-1a"]}
    data = {
        "clusters": [cluster_with(), second],
        "accounting": {"mode": "create"},
        "federation": {"name": "fed", "clusters": ["small", "other"]},
    }
    config = parse(data, "fed.yaml")
    out = render_cluster(config, "small", placeholder_infra(config.cluster("small")), fixture_cache())
    assert not [line for line in out.fragments["partitions"].splitlines() if line.startswith("EnforcePartLimits")]


def test_slurm_values_in_yaml_stay_as_written(tmp_path: Path) -> None:
    # YAML 1.1 (PyYAML's default) would read 30:00 as 1800 and NO as False; the loader reads YAML 1.2's core schema
    text = (
        "clusters:\n  - name: small\n    region: us-east-1\n    storage: {efs: {}}\n"
        "    network: {mode: create, availability_zones: [us-east-1a]}\n"
        "    partitions:\n      - name: cpu\n        max_time: 60:00\n"
        "        slurm_settings: {DefaultTime: 30:00, ExclusiveUser: NO, LLN: yes}\n"
        "        pools: [{name: c7i, instance_types: [c7i.large], max_nodes: 010}]\n"
    )
    path = tmp_path / "values.yaml"
    path.write_text(text)
    config = load(path)
    out = render_cluster(config, "small", placeholder_infra(config.cluster("small")), fixture_cache())
    (line,) = [x for x in out.fragments["partitions"].splitlines() if x.startswith("PartitionName=")]
    assert {"MaxTime=60:00", "DefaultTime=30:00", "ExclusiveUser=NO", "LLN=yes"} <= set(line.split())
    assert config.cluster("small").partitions[0].pools[0].max_nodes == 10


# ---- clusters[].nss_slurm: LaunchParameters=enable_nss_slurm, kept when the user sets LaunchParameters too
def test_nss_slurm_renders_enable_nss_slurm_in_launch_parameters() -> None:
    out, base, _ = rendered(nss_slurm=True)
    assert "LaunchParameters=enable_nss_slurm" in out.slurm_conf.splitlines()
    assert "LaunchParameters" not in base
    off, _, _ = rendered()
    assert "LaunchParameters" not in off.slurm_conf


@pytest.mark.parametrize(
    ("users", "line"),
    [
        (
            "slurmstepd_memlock,use_interactive_step",
            "LaunchParameters=slurmstepd_memlock,use_interactive_step,enable_nss_slurm",
        ),
        ("Enable_NSS_Slurm,test_exec", "LaunchParameters=Enable_NSS_Slurm,test_exec"),
    ],
)
def test_a_users_launch_parameters_keep_the_products_enable_nss_slurm(users: str, line: str) -> None:
    out, _, _ = rendered(nss_slurm=True, slurm_settings={"LaunchParameters": users})
    launch = [x for x in out.slurm_conf.splitlines() if x.lower().startswith("launchparameters=")]
    # one line (Slurm keeps only the last), the user's, written last, with the product's parameter appended once
    assert launch == [line]
    assert out.slurm_conf.splitlines()[-1] == line


def test_without_nss_slurm_a_users_launch_parameters_are_written_as_they_are() -> None:
    out, _, _ = rendered(slurm_settings={"launchparameters": "use_interactive_step"})
    assert out.slurm_conf.splitlines()[-1] == "launchparameters=use_interactive_step"
    assert "enable_nss_slurm" not in out.slurm_conf


# ---- SchedulerParameters=batch_sched_delay=0,nohold_on_prolog_fail (render/parameter_lists.py), merged into a user's
def test_the_product_schedules_submitted_batch_jobs_at_the_next_pass_and_requeues_failed_launches_unheld() -> None:
    out, base, _ = rendered()
    sched = [x for x in out.slurm_conf.splitlines() if x.startswith("SchedulerParameters=")]
    assert sched == ["SchedulerParameters=batch_sched_delay=0,nohold_on_prolog_fail"]
    assert "SchedulerParameters" not in base


@pytest.mark.parametrize(
    ("users", "line"),
    [
        ("bf_continue", "SchedulerParameters=bf_continue,batch_sched_delay=0,nohold_on_prolog_fail"),
        (
            "bf_continue,batch_sched_delay=3",
            "SchedulerParameters=bf_continue,batch_sched_delay=3,nohold_on_prolog_fail",
        ),
        ("nohold_on_prolog_fail,batch_sched_delay=1", "SchedulerParameters=nohold_on_prolog_fail,batch_sched_delay=1"),
    ],
)
def test_a_users_scheduler_parameters_keep_or_override_batch_sched_delay(users: str, line: str) -> None:
    out, _, _ = rendered(slurm_settings={"SchedulerParameters": users})
    sched = [x for x in out.slurm_conf.splitlines() if x.lower().startswith("schedulerparameters=")]
    assert sched == [line]


def test_a_sites_private_data_is_accepted_and_is_the_only_private_data_line() -> None:
    """PrivateData is the site's (issue 30: sites must be able to hide other users' jobs): the product writes none,
    since Slurm shows CLOUD nodes by default from 23.02 on (its `cloud` flag is a no-op)."""
    out, base, _ = rendered(slurm_settings={"PrivateData": "jobs,usage,users"})
    lines = [x for x in (base + out.slurm_conf).splitlines() if x.lower().startswith("privatedata")]
    assert lines == ["PrivateData=jobs,usage,users"]
    plain, plain_base, _ = rendered()
    assert not [x for x in (plain_base + plain.slurm_conf).splitlines() if x.lower().startswith("privatedata")]
