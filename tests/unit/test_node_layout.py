"""A pool's own node layout (issue 31: two-socket types): a layout Slurm would misread is refused by `validate` (its
CPUs checked with `--cache`); render, which the controller's boot and every config apply run, writes the product's
layout in place of one that misses the CPUs (with the reason as a comment); a layout that makes them is rendered as
written.

Slurm 26.05.3's reading (src/common/read_config.c) resets CPUs to Sockets x CoresPerSocket x ThreadsPerCore when the
line's CPUs match none of its products: without these checks, `Sockets: 2` alone on a 96-vCPU type gives nodes of 2
CPUs, silently.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

from cluster_config import parse
from cluster_config.node_layout import layout_problems
from elastic_slurm import exit_codes
from slurm_plugin.render.cluster import render_cluster
from slurm_plugin.render.manifest import placeholder_infra
from tests.unit.cache_fixture import fixture_cache
from tests.unit.test_config_invalid import base
from tests.unit.test_validate_cli import P0, pool, validate, write, write_cache


@pytest.mark.parametrize(
    ("settings", "cpus"),
    [
        ({"Sockets": 2, "CoresPerSocket": 24, "ThreadsPerCore": 2}, 96),  # e.g. c6i.24xlarge's two sockets
        ({"CoresPerSocket": 24, "ThreadsPerCore": 2}, 96),  # Sockets inferred: 96 / (24 x 2) = 2
        ({"Boards": 1, "SocketsPerBoard": 2, "CoresPerSocket": 48, "ThreadsPerCore": 1}, 96),
        ({"ThreadsPerCore": 1}, 4),  # Sockets inferred: 4 (Graviton's one thread per core)
        ({"sockets": "2", "corespersocket": "4", "threadspercore": "1"}, 8),  # Slurm's keys are case-insensitive
        ({"MaxCPUsPerNode": 4}, 8),  # no layout key: nothing to check
    ],
)
def test_a_layout_that_makes_the_pools_cpus_passes(settings: dict[str, Any], cpus: int) -> None:
    assert list(layout_problems(settings)) == []
    assert list(layout_problems(settings, cpus)) == []


@pytest.mark.parametrize(
    ("settings", "cpus", "problem"),
    [
        (
            {"Sockets": 2},
            96,
            "Sockets=2 makes 2 CPUs (Sockets 2 x CoresPerSocket 1 x ThreadsPerCore 1), the pool's nodes have 96: "
            "Slurm would reset their CPUs or drain them",
        ),
        (
            {"Sockets": 2, "CoresPerSocket": 24},  # threads not given: Slurm counts 48, the type has 96 threads
            96,
            "Sockets=2 CoresPerSocket=24 makes 48 CPUs (Sockets 2 x CoresPerSocket 24 x ThreadsPerCore 1), the "
            "pool's nodes have 96: Slurm would reset their CPUs or drain them",
        ),
        (
            {"CoresPerSocket": 5, "ThreadsPerCore": 2},  # 96 / 10 does not divide: one socket (Boards)
            96,
            "CoresPerSocket=5 ThreadsPerCore=2 makes 10 CPUs (Sockets 1 x CoresPerSocket 5 x ThreadsPerCore 2), the "
            "pool's nodes have 96: Slurm would reset their CPUs or drain them",
        ),
    ],
)
def test_a_layout_that_misses_the_pools_cpus_is_refused_once_they_are_known(
    settings: dict[str, Any], cpus: int, problem: str
) -> None:
    assert list(layout_problems(settings)) == []  # without the size nothing is proven
    assert list(layout_problems(settings, cpus)) == [problem]


@pytest.mark.parametrize(
    ("settings", "problem"),
    [
        ({"Sockets": 0}, "Sockets=0: a node layout count is an integer from 1 to 9999"),
        ({"CoresPerSocket": "two"}, "CoresPerSocket=two: a node layout count is an integer from 1 to 9999"),
        ({"ThreadsPerCore": True}, "ThreadsPerCore=yes: a node layout count is an integer from 1 to 9999"),
        ({"Sockets": 70000}, "Sockets=70000: a node layout count is an integer from 1 to 9999"),  # uint16 in Slurm
        ({"Sockets": "2 Weight=1"}, "Sockets=2 Weight=1: a node layout count is an integer from 1 to 9999"),
        (
            {"Sockets": 2, "SocketsPerBoard": 2},
            "set Sockets or SocketsPerBoard, not both: Slurm ignores Sockets when SocketsPerBoard is set",
        ),
        ({"Boards": 2, "Sockets": 1}, "Boards=2 exceeds the sockets: Slurm would reset Boards to 1"),
    ],
)
def test_a_layout_slurm_misreads_whatever_the_type_is_refused(settings: dict[str, Any], problem: str) -> None:
    assert list(layout_problems(settings)) == [problem]
    assert list(layout_problems(settings, 8)) == [problem]


def test_validate_refuses_a_layout_without_a_cache_only_where_the_size_is_not_needed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    both = base()
    pool(both)["slurm_settings"] = {"Sockets": 2, "SocketsPerBoard": 2}
    path = write(tmp_path, both, "both.yaml")
    code, _, err = validate(capsys, str(path))
    assert code == exit_codes.INVALID_CONFIG
    assert err.splitlines() == [
        f"{path}: {P0}.slurm_settings: set Sockets or SocketsPerBoard, not both: Slurm ignores Sockets when "
        "SocketsPerBoard is set"
    ]
    short = base()  # c7i.large: 2 vCPUs (1 core x 2 threads)
    pool(short)["slurm_settings"] = {"Sockets": 2}
    path = write(tmp_path, short, "short.yaml")
    assert validate(capsys, str(path))[0] == exit_codes.OK  # without the type's size: not proven


def test_validate_with_a_cache_checks_the_layout_against_the_pools_cpus(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cache = write_cache(tmp_path, fixture_cache())
    data = base()  # c7i.large: 2 vCPUs = 1 core x 2 threads
    pool(data)["slurm_settings"] = {"Sockets": 2, "ThreadsPerCore": 2}
    path = write(tmp_path, data, "wrong.yaml")
    code, _, err = validate(capsys, str(path), "--cache", str(cache))
    assert code == exit_codes.INVALID_CONFIG
    assert err.splitlines() == [
        f"{path}: {P0}.slurm_settings: Sockets=2 ThreadsPerCore=2 makes 4 CPUs (Sockets 2 x CoresPerSocket 1 x "
        f"ThreadsPerCore 2), the pool's nodes have 2: Slurm would reset their CPUs or drain them (the instance "
        f"cache {cache})"
    ]
    pool(data)["slurm_settings"] = {"Sockets": 1, "CoresPerSocket": 1, "ThreadsPerCore": 2}
    assert validate(capsys, str(write(tmp_path, data, "right.yaml")), "--cache", str(cache))[0] == exit_codes.OK
    # disable_hyperthreading: the pool's CPUs are the type's cores (1), so two threads per core are too many
    pool(data)["disable_hyperthreading"] = True
    code, _, err = validate(capsys, str(write(tmp_path, data, "smt-off.yaml")), "--cache", str(cache))
    assert code == exit_codes.INVALID_CONFIG and "makes 2 CPUs" in err and "the pool's nodes have 1:" in err
    pool(data)["slurm_settings"] = {"ThreadsPerCore": 1}
    assert validate(capsys, str(write(tmp_path, data, "smt-off-ok.yaml")), "--cache", str(cache))[0] == exit_codes.OK


CLUSTER: dict[str, Any] = {
    "name": "small",
    "region": "us-east-1",
    "storage": {"efs": {}},
    "network": {"mode": "create", "availability_zones": ["us-east-1a"]},
    "partitions": [{"name": "cpu", "default": True, "pools": []}],
}


def rendered_pool(pool_settings: dict[str, Any]) -> list[str]:
    """The pool's comment and NodeName lines as the controller's boot renders them (c7i.2xlarge: 8 vCPUs = 4 cores x
    2 threads)."""
    cluster = copy.deepcopy(CLUSTER)
    cluster["partitions"][0]["pools"] = [
        {"name": "c7i", "instance_types": ["c7i.2xlarge"], "max_nodes": 2, "slurm_settings": pool_settings}
    ]
    config = parse({"clusters": [cluster], "accounting": {"mode": "none"}}, "layout.yaml")
    out = render_cluster(config, "small", placeholder_infra(config.cluster("small")), fixture_cache())
    lines = out.slurm_conf.splitlines()
    start = lines.index(next(x for x in lines if x.startswith("# pool cpu-c7i:")))
    end = next(i for i in range(start, len(lines)) if lines[i].startswith("NodeName="))
    return lines[start : end + 1]


def test_render_writes_a_layout_that_makes_the_cpus_and_replaces_one_that_does_not() -> None:
    *_, line = rendered_pool({"Sockets": 2, "CoresPerSocket": 2, "ThreadsPerCore": 2, "MemSpecLimit": 512})
    assert " CPUs=8 RealMemory=" in line
    assert line.endswith(" Sockets=2 CoresPerSocket=2 ThreadsPerCore=2 MemSpecLimit=512")
    # a deployed config with a layout that misses the CPUs (validate --cache refuses it; a cluster created before the
    # check may have one): the controller's boot still renders, with the product's layout and the reason above it
    *comments, line = rendered_pool({"Sockets": 2, "CoresPerSocket": 2, "MemSpecLimit": 512})
    assert comments[-1] == (
        "# slurm_settings Sockets=2 CoresPerSocket=2 makes 4 CPUs (Sockets 2 x CoresPerSocket 2 x ThreadsPerCore 1), "
        "the pool's nodes have 8: Slurm would reset their CPUs or drain them: the product's layout is written instead"
    )
    assert " CPUs=8 Sockets=1 CoresPerSocket=4 ThreadsPerCore=2 RealMemory=" in line
    assert line.endswith(" MemSpecLimit=512") and line.count("Sockets=") == 1
