"""Custom gres.conf and slurmdbd.conf settings (cluster_config/slurm_settings.py): `clusters[].gres_settings` are global
gres.conf lines, a GPU pool's `gres_settings` join its gres.conf line, `accounting.slurmdbd_settings` end slurmdbd.conf;
owned keys are refused with one line naming the path, a pool without GPUs cannot carry gres settings."""

from __future__ import annotations

import copy
import json
import stat
from pathlib import Path
from typing import Any

import pytest
import yaml

from cluster_config import ConfigInvalid, parse
from elastic_slurm.cli import main
from slurm_plugin.render.cluster import RenderError, render_cluster
from slurm_plugin.render.dbd import render_slurmdbd_conf
from slurm_plugin.render.manifest import placeholder_infra
from stacks.user_data import boot_commands
from tests.unit.cache_fixture import fixture_cache

CPU_POOL = {"name": "c7i", "instance_types": ["c7i.large"], "max_nodes": 4}
GPU_POOL = {"name": "g5", "instance_types": ["g5.12xlarge"], "max_nodes": 2, "gpu": {}}
SECRET = {"engine": "mariadb", "host": "db.example", "port": 3306, "username": "slurm", "password": "pw"}


def config_data(pools: list[dict[str, Any]], **cluster: Any) -> dict[str, Any]:
    return {
        "clusters": [
            {
                "name": "small",
                "region": "us-east-1",
                "storage": {"efs": {}},
                "network": {"mode": "create", "availability_zones": ["us-east-1a"]},
                "partitions": [{"name": "cpu", "default": True, "pools": copy.deepcopy(pools)}],
                **cluster,
            }
        ]
    }


def gres_conf(pools: list[dict[str, Any]], **cluster: Any) -> list[str]:
    config = parse(config_data(pools, **cluster), "gres.yaml")
    out = render_cluster(config, "small", placeholder_infra(config.cluster("small")), fixture_cache())
    return (out.gres_conf or "").splitlines()[1:]  # less the generated-by header


def test_a_gpu_pools_settings_join_its_gres_line() -> None:
    pool = {**GPU_POOL, "gres_settings": {"Flags": "nvidia_gpu_env", "Cores": "0-23"}}
    assert gres_conf([CPU_POOL, pool]) == [
        "NodeName=cpu-g5-[1-2] Name=gpu File=/dev/nvidia[0-3] Flags=nvidia_gpu_env Cores=0-23"
    ]


def test_cluster_settings_are_global_lines_before_the_pools_lines() -> None:
    assert gres_conf([GPU_POOL], gres_settings={"AutoDetect": "off"}) == [
        "# clusters[].gres_settings of the config",
        "AutoDetect=off",
        "NodeName=cpu-g5-[1-2] Name=gpu File=/dev/nvidia[0-3]",
    ]


def test_cluster_settings_alone_still_write_gres_conf() -> None:
    assert gres_conf([CPU_POOL]) == []
    assert gres_conf([CPU_POOL], gres_settings={"AutoDetect": "off"})[-1] == "AutoDetect=off"


def test_gres_settings_on_a_pool_without_gpus_fail_the_render_naming_the_path() -> None:
    pool = {**CPU_POOL, "gres_settings": {"Flags": "explicit"}}
    with pytest.raises(RenderError) as caught:
        gres_conf([GPU_POOL, pool])
    assert str(caught.value) == (
        "clusters[0].partitions[0].pools[1].gres_settings: pool cpu-c7i has no GPUs (c7i.large), "
        "so no gres.conf line to add them to"
    )


def test_slurmdbd_settings_end_the_file_after_the_products_lines() -> None:
    lines = render_slurmdbd_conf(SECRET, "ctl-0", settings={"CommitDelay": 1, "TrackWCKey": True}).splitlines()
    assert lines[-3:] == ["# accounting.slurmdbd_settings of the config", "CommitDelay=1", "TrackWCKey=yes"]
    assert "StorageHost=db.example" in lines and "DbdHost=ctl-0" in lines
    assert render_slurmdbd_conf(SECRET, "ctl-0").splitlines()[-1] == "StorageLoc=slurm_acct_db"


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        (
            {"StoragePass": "x"},
            "key 'StoragePass' is set by elastic-slurm (it comes from the accounting database's secret)",
        ),
        (
            {"dbdport": 7000},
            "key 'dbdport' is set by elastic-slurm (the controllers' security group opens it to the controllers only)",
        ),
        (
            {"PurgeJobAfter": "12 months"},
            "key 'PurgeJobAfter': value '12 months' has a space, quote, '#' or backslash, which Slurm would split",
        ),
    ],
)
def test_owned_or_unsafe_slurmdbd_settings_are_refused_with_one_line(settings: dict[str, Any], message: str) -> None:
    data = {**config_data([CPU_POOL]), "accounting": {"mode": "create", "slurmdbd_settings": settings}}
    with pytest.raises(ConfigInvalid) as caught:
        parse(data, "dbd.yaml")
    assert [str(e) for e in caught.value.errors] == [f"accounting.slurmdbd_settings: {message}"]


def test_render_slurmdbd_takes_the_settings_from_the_config(tmp_path: Path) -> None:
    config = tmp_path / "cluster.yaml"
    data = {**config_data([CPU_POOL]), "accounting": {"mode": "create", "slurmdbd_settings": {"CommitDelay": 1}}}
    config.write_text(yaml.safe_dump(data))
    secret = tmp_path / "secret.json"
    secret.write_text(json.dumps(SECRET))
    out = tmp_path / "slurmdbd.conf"
    argv = ["render-slurmdbd", "--secret-json", str(secret), "--dbd-host", "ctl-0", "--out", str(out)]
    assert main([*argv, "--config", str(config)]) == 0
    assert out.read_text().splitlines()[-1] == "CommitDelay=1"
    assert stat.S_IMODE(out.stat().st_mode) == 0o600


def test_the_controller_boot_renders_slurmdbd_conf_with_the_applied_config() -> None:
    script = "\n".join(boot_commands("controller", {"ES_CLUSTER": "c1", "ES_REGION": "us-east-1"}))
    (line,) = [x for x in script.splitlines() if "render-slurmdbd" in x]
    assert "--config /etc/elastic-slurm/cluster.yaml" in line
    assert script.index("elastic-slurm-config-apply") < script.index("render-slurmdbd")


def test_autodetect_takes_only_off_since_the_images_have_no_gpu_libraries() -> None:
    from cluster_config.slurm_settings import GRES_OWNED, owned_key_errors

    assert owned_key_errors({"AutoDetect": "off"}, GRES_OWNED) == []
    (error,) = owned_key_errors({"AutoDetect": "nvml"}, GRES_OWNED)
    assert error.startswith("key 'AutoDetect': only 'off': the images build Slurm without GPU libraries")
