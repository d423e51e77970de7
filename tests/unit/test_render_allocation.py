"""render_cluster with `partitions[].allocation`: an exclusive partition's line allocates whole nodes and drops memory
from what Slurm tracks (no DefMemPerCPU), in the spelling of the cluster's Slurm release; shared ones are unchanged.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from cluster_config import parse
from slurm_plugin.render.cluster import exclusive_node_pair, render_cluster
from slurm_plugin.render.manifest import placeholder_infra
from tests.unit.cache_fixture import fixture_cache

SHARED: dict[str, Any] = {
    "name": "cpu",
    "default": True,
    "pools": [{"name": "c7i", "instance_types": ["c7i.large"], "max_nodes": 4}],
}
WHOLE: dict[str, Any] = {
    "name": "whole",
    "allocation": "exclusive",
    "pools": [{"name": "hpc", "instance_types": ["c7i.xlarge"], "max_nodes": 10000}],
}
AZS = ["us-east-1a", "us-east-1b", "us-east-1c"]  # 3 x 4091 addresses: room for 10,000 nodes
DOC = Path(__file__).resolve().parents[2] / "docs" / "scheduling.md"
SOURCE = {"url": "https://download.schedmd.com/slurm/slurm-26.05.5.tar.bz2", "sha256": "0" * 64}
OLDER = {
    "slurm_version": "24.11.5",
    "slurm_source": {"url": "https://example.com/slurm-24.11.5.tar.bz2", "sha256": "0" * 64},
}


def partition_lines(*partitions: dict[str, Any], **cluster_fields: Any) -> list[str]:
    cluster = {
        "name": "alloc",
        "region": "us-east-1",
        "storage": {"efs": {}},
        "network": {"mode": "create", "availability_zones": AZS, "vpc_cidr": "127.16.0.0/16"},
        "partitions": list(partitions),
        **cluster_fields,
    }
    config = parse({"clusters": [cluster], "accounting": {"mode": "none"}}, "alloc.yaml")
    rendered = render_cluster(config, "alloc", placeholder_infra(config.cluster("alloc")), fixture_cache())
    return rendered.fragments["partitions"].splitlines()


def test_exclusive_partition_gets_whole_nodes_and_no_memory_tracking_on_24_11() -> None:
    lines = partition_lines(SHARED, WHOLE, images=OLDER)
    assert lines[-2:] == [
        "PartitionName=cpu Nodes=cpu_c7i Default=YES MaxTime=INFINITE PriorityTier=1 DefMemPerCPU=1792 State=UP",
        "PartitionName=whole Nodes=whole_hpc Default=NO MaxTime=INFINITE PriorityTier=1 OverSubscribe=EXCLUSIVE "
        "SelectTypeParameters=CR_Core State=UP",
    ]
    comment = "# allocation exclusive: whole nodes, one job per node, memory not tracked (SelectTypeParameters without _Memory)"
    assert comment in lines


@pytest.mark.parametrize("images", [{}, {"slurm_version": "26.05.5", "slurm_source": SOURCE}])
def test_exclusive_partition_uses_the_exclusive_key_from_slurm_26_05(images: dict[str, Any]) -> None:
    # {}: the pinned release (cluster_config/slurm_release.py, 26.05.3)
    (line,) = [line for line in partition_lines(SHARED, WHOLE, images=images) if line.startswith("PartitionName=whole")]
    assert " Exclusive=NODE SelectTypeParameters=CR_Core " in line
    assert "OverSubscribe" not in line and "DefMemPerCPU" not in line


@pytest.mark.parametrize(
    ("version", "pair"),
    [
        ("24.11.5", ("OverSubscribe", "EXCLUSIVE")),
        ("25.11.7", ("OverSubscribe", "EXCLUSIVE")),
        ("26.05.0", ("Exclusive", "NODE")),
        ("27.11.1", ("Exclusive", "NODE")),
    ],
)
def test_whole_node_key_follows_the_release(version: str, pair: tuple[str, str]) -> None:
    assert exclusive_node_pair(version) == pair


def test_exclusive_partition_allocates_sockets_when_the_cluster_does() -> None:
    settings = {"SelectTypeParameters": "CR_Socket_Memory"}
    (line,) = [
        line
        for line in partition_lines(SHARED, WHOLE, slurm_settings=settings)
        if line.startswith("PartitionName=whole")
    ]
    assert "SelectTypeParameters=CR_Socket " in line


def test_only_shared_partitions_get_the_default_memory_comment() -> None:
    lines = partition_lines({**WHOLE, "default": True})
    assert not any("DefMemPerCPU" in line for line in lines)
    assert lines[-1].endswith("Exclusive=NODE SelectTypeParameters=CR_Core State=UP")


def test_a_shared_partition_over_the_exclusive_nodes_keeps_tracking_memory() -> None:
    # c7i.xlarge: 4 CPUs, RealMemory 7680 MiB → 1920 per CPU
    over = {"name": "over", "share_nodes_of": ["whole"]}
    lines = partition_lines(SHARED, WHOLE, over)
    assert lines[-1] == (
        "PartitionName=over Nodes=whole_hpc Default=NO MaxTime=INFINITE PriorityTier=1 DefMemPerCPU=1920 State=UP"
    )


def test_exclusive_partition_keeps_its_other_custom_settings() -> None:
    whole = {**WHOLE, "slurm_settings": {"MaxNodes": 64}}
    assert partition_lines(SHARED, whole)[-1].endswith("SelectTypeParameters=CR_Core State=UP MaxNodes=64")


def _fenced_blocks(text: str) -> list[tuple[str, str]]:
    """(info string, body) of every fenced block of a Markdown text."""
    blocks: list[tuple[str, str]] = []
    info: str | None = None
    body: list[str] = []
    for line in text.splitlines():
        if line.startswith("```"):
            if info is None:
                info, body = line[3:].strip(), []
            else:
                blocks.append((info, "\n".join(body)))
                info = None
        elif info is not None:
            body.append(line)
    return blocks


def test_the_worked_example_of_docs_scheduling_renders_the_lines_it_shows() -> None:
    blocks = _fenced_blocks(DOC.read_text(encoding="utf-8"))
    example = yaml.safe_load(next(body for info, body in blocks if info == "yaml"))
    config = parse({**example, "accounting": {"mode": "none"}}, "scheduling.md")
    rendered = render_cluster(config, "demo", placeholder_infra(config.cluster("demo")), fixture_cache())
    shown = next(body for info, body in blocks if info == "").splitlines()
    lines = [line for line in rendered.fragments["partitions"].splitlines() if line.startswith("PartitionName=")]
    assert lines == shown
