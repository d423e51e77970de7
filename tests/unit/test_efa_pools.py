"""EFA pools (cluster_config/efa.py, docs/efa.md): which pools get EFA, how the runtime manifest tells the plugin
(every attempt of an EFA pool launches with CreateFleet), and the combinations `validate` refuses in one line."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from cluster_config import ConfigInvalid, load, parse
from cluster_config.efa import pool_uses_efa
from slurm_plugin.powersave.planner import attempts_for
from slurm_plugin.render.manifest import build_manifest, placeholder_infra

EXAMPLE = Path(__file__).resolve().parents[2] / "cluster_config" / "examples" / "multi-az-gpu.yaml"


def _manifest_pools(config: Any) -> dict[str, Any]:
    cluster = config.clusters[0]
    manifest = build_manifest(
        cluster,
        placeholder_infra(cluster),
        instance_cache_path="/x/cache.json",
        state_dir="/x/state",
        log_file="/x/plugin.log",
        slurm_bin_dir="/usr/bin",
        slurm_conf=None,
        tags={},
    )
    return {p.key: p for p in manifest.pools}


def test_the_p5_placement_group_pool_gets_efa_and_every_attempt_says_so() -> None:
    config = load(EXAMPLE)
    efa = {
        f"{part.name}-{pool.name}"
        for part in config.clusters[0].partitions
        for pool in part.pools
        if pool_uses_efa(pool)
    }
    pools = _manifest_pools(config)
    assert efa and {key for key, pool in pools.items() if pool.efa} == efa
    assert all(pool.efa for key in efa for pool in [pools[key]])
    assert all(a.efa for key in efa for a in attempts_for(pools[key]))
    others = [key for key in pools if key not in efa]
    assert others and not any(a.efa for key in others for a in attempts_for(pools[key]))


def _with_pool(**changes: Any) -> dict[str, Any]:
    data = yaml.safe_load(EXAMPLE.read_text(encoding="utf-8"))
    data = copy.deepcopy(data)
    pool = next(p for part in data["clusters"][0]["partitions"] for p in part["pools"] if p.get("placement_group"))
    pool.update(changes)
    return data


def _errors(data: dict[str, Any]) -> list[str]:
    with pytest.raises(ConfigInvalid) as info:
        parse(data)
    return [str(e) for e in info.value.errors]


def test_an_efa_pool_mixing_network_card_layouts_is_refused_in_one_line() -> None:
    (error,) = _errors(_with_pool(efa=True, instance_types=["p5.48xlarge", "p4d.24xlarge"]))
    assert error.startswith("clusters[0].partitions[") and ".instance_types: an EFA pool's instance types" in error


def test_efa_with_a_capacity_reservation_is_refused_in_one_line() -> None:
    reservation = {"id": "cr-0123456789abcdef0"}
    (error,) = _errors(_with_pool(efa=True, capacity_reservation=reservation))
    assert ".efa: EFA with a capacity_reservation is not supported yet" in error


def test_efa_on_a_pool_without_the_gpu_image_is_refused_in_one_line() -> None:
    data = yaml.safe_load(EXAMPLE.read_text(encoding="utf-8"))
    pool = next(p for part in data["clusters"][0]["partitions"] for p in part["pools"] if "gpu" not in p)
    pool["efa"] = True
    (error,) = _errors(data)
    assert error.endswith("an EFA pool needs `gpu`") and ".efa: EFA's software" in error
