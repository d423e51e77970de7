"""`images.base_os` against what the cluster asks of its images (cluster_config/os_checks.py): a GPU pool needs NVIDIA's
CUDA repository for its architecture on that OS, FSx for Lustre needs AWS's Lustre client; `elastic-slurm validate`
refuses the rest with one line naming the YAML path."""

from __future__ import annotations

import copy
import dataclasses
from pathlib import Path
from typing import Any

import pytest
import yaml

from cluster_config import ConfigInvalid, parse
from cluster_config.checks import architecture_of
from cluster_config.os_checks import os_problems
from cluster_config.os_support import OS_SUPPORT
from elastic_slurm.cli import main

GPU_PATH = "clusters[0].partitions[1].pools[0].gpu"


def config(base_os: str, gpu_type: str | None = "g5.xlarge", fsx_lustre: bool = False) -> dict[str, Any]:
    """One cluster on `base_os` with a CPU partition and, unless gpu_type is None, a GPU pool of that type."""
    partitions: list[dict[str, Any]] = [
        {"name": "cpu", "default": True, "pools": [{"name": "c7i", "instance_types": ["c7i.large"], "max_nodes": 4}]}
    ]
    if gpu_type:
        pool = {"name": "gpu", "instance_types": [gpu_type], "max_nodes": 2, "gpu": {}}
        partitions.append({"name": "gpu", "pools": [pool]})
    storage: dict[str, Any] = {"efs": {}}
    if fsx_lustre:
        storage["fsx_lustre"] = {}
    cluster = {
        "name": "alpha",
        "region": "us-east-1",
        "network": {"mode": "create", "availability_zones": ["us-east-1a", "us-east-1b"]},
        "storage": storage,
        "images": {"base_os": base_os},
        "partitions": partitions,
    }
    return {"clusters": [cluster], "accounting": {"mode": "none"}}


def problems(data: dict[str, Any]) -> list[tuple[str, str]]:
    try:
        parse(copy.deepcopy(data))
    except ConfigInvalid as exc:
        return [(e.path, e.message) for e in exc.errors]
    return []


@pytest.mark.parametrize("base_os", sorted(OS_SUPPORT))
def test_x86_gpu_pool_is_accepted_on_every_base_os_with_a_cuda_repository(base_os: str) -> None:
    assert problems(config(base_os, "g5.xlarge")) == []


def test_arm64_gpu_pool_on_debian13_is_refused_at_the_pools_gpu_path() -> None:
    assert problems(config("debian13", "g5g.xlarge")) == [
        (
            GPU_PATH,
            "NVIDIA publishes no CUDA repository for base_os debian13 on arm64: a GPU image cannot be built"
            " (images.base_os with one: rhel9, rocky9, ubuntu2204, ubuntu2404)",
        )
    ]


def test_arm64_gpu_pool_on_ubuntu2404_is_accepted() -> None:
    assert problems(config("ubuntu2404", "g5g.xlarge")) == []


def test_fsx_lustre_is_refused_where_the_table_has_no_lustre_client_only() -> None:
    refused = {base_os for base_os in OS_SUPPORT if problems(config(base_os, None, fsx_lustre=True))}
    assert refused == {"debian13"}


def test_a_table_without_debian13s_cuda_repository_refuses_a_gpu_pool_on_debian13() -> None:
    table = dict(OS_SUPPORT, debian13=dataclasses.replace(OS_SUPPORT["debian13"], cuda_repo={}))
    cluster = parse(config("debian13", "g5.xlarge")).clusters[0]
    assert list(os_problems(cluster, "clusters[0]", architecture_of)) == []
    assert [where for where, _ in os_problems(cluster, "clusters[0]", architecture_of, table)] == [GPU_PATH]


def test_a_table_without_efa_refuses_every_gpu_pool() -> None:
    table = dict(OS_SUPPORT, ubuntu2204=dataclasses.replace(OS_SUPPORT["ubuntu2204"], efa=False))
    cluster = parse(config("ubuntu2204")).clusters[0]
    assert list(os_problems(cluster, "clusters[0]", architecture_of, table)) == [
        (GPU_PATH, "the EFA installer does not support base_os ubuntu2204: a GPU image cannot be built")
    ]


def test_validate_refuses_an_arm64_gpu_pool_on_debian13_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "cluster.yaml"
    path.write_text(yaml.safe_dump(config("debian13", "g5g.xlarge")), encoding="utf-8")
    assert main(["validate", str(path)]) == 3
    out, err = capsys.readouterr()
    assert out == ""
    assert len(err.splitlines()) == 1
    assert err.startswith(f"{path}: {GPU_PATH}: NVIDIA publishes no CUDA repository for base_os debian13 on arm64")
