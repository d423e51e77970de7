"""topology.conf from EC2 network nodes (slurm_plugin/render/topology.py): a leaf switch per bottom network node, the
upper layers above, each pool's unplaced nodes under its own switch, one root; every node exactly once."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from cluster_config import load
from slurm_plugin.render.topology import (
    ROOT_SWITCH,
    PoolNodeNames,
    TopologyError,
    initial_topology,
    render_topology,
    topology_lines,
    usable_switch_name,
)
from tests.unit.topology_answers import nodes_of, switches

REPO = Path(__file__).resolve().parents[2]
GPU = PoolNodeNames("gpu-p4d", tuple(f"gpu-p4d-{i}" for i in range(1, 7)))
CPU = PoolNodeNames("cpu-small", tuple(f"cpu-small-{i}" for i in range(1, 4)))
# nodes 1, 2 and 5 run i-1111111111example, i-2222222222example and i-555555555example (one bottom network node),
# node 3 runs i-3333333333example (another spine), node 4 i-444444444example, node 6 the 4-layer p6-b200
PLACED = {
    "gpu-p4d-1": nodes_of("i-1111111111example"),
    "gpu-p4d-2": nodes_of("i-2222222222example"),
    "gpu-p4d-5": nodes_of("i-555555555example"),
    "gpu-p4d-3": nodes_of("i-3333333333example"),
    "gpu-p4d-4": nodes_of("i-444444444example"),
    "gpu-p4d-6": nodes_of("i-666666666example"),
}


def leaf_of(tree: dict[str, tuple[str, list[str]]], node: str) -> str:
    (leaf,) = [name for name, (kind, members) in tree.items() if kind == "Nodes" and node in members]
    return leaf


def path_of(tree: dict[str, tuple[str, list[str]]], node: str) -> list[str]:
    """Switches from the node's leaf up to the root."""
    up = {child: name for name, (kind, members) in tree.items() if kind == "Switches" for child in members}
    path = [leaf_of(tree, node)]
    while path[-1] in up:
        path.append(up[path[-1]])
    return path


def test_nodes_whose_instances_share_a_network_node_share_a_leaf_switch() -> None:
    tree = switches(render_topology("alpha", [GPU, CPU], PLACED))
    assert tree["nn-3333333333example"] == ("Nodes", ["gpu-p4d-1", "gpu-p4d-2", "gpu-p4d-5"])
    assert tree["nn-1311133311example"] == ("Nodes", ["gpu-p4d-3"])
    assert path_of(tree, "gpu-p4d-1") == [
        "nn-3333333333example", "nn-2222222222example", "nn-1111111111example", ROOT_SWITCH
    ]  # fmt: skip
    # node 4 shares only the top layer with node 1; node 3 shares nothing below the root
    assert path_of(tree, "gpu-p4d-4")[2:] == ["nn-1111111111example", ROOT_SWITCH]
    assert path_of(tree, "gpu-p4d-3") == [
        "nn-1311133311example", "nn-1211122211example", "nn-1212121212example", ROOT_SWITCH
    ]  # fmt: skip


def test_a_four_layer_node_set_joins_the_three_layer_ones_at_the_shared_top() -> None:
    tree = switches(render_topology("alpha", [GPU], PLACED))
    assert path_of(tree, "gpu-p4d-6") == [
        "nn-6363636363example", "nn-6262626262example", "nn-6161616161example", "nn-1111111111example", ROOT_SWITCH
    ]  # fmt: skip


def test_every_node_is_in_exactly_one_leaf_and_unplaced_ones_stay_under_their_pool() -> None:
    tree = switches(render_topology("alpha", [GPU, CPU], {"gpu-p4d-1": nodes_of("i-1111111111example")}))
    leaves = [node for kind, members in tree.values() if kind == "Nodes" for node in members]
    assert sorted(leaves) == sorted([*GPU.names, *CPU.names])
    assert tree["gpu-p4d"] == ("Nodes", [f"gpu-p4d-{i}" for i in range(2, 7)])
    assert tree["cpu-small"] == ("Nodes", list(CPU.names))
    # one root reaches every switch: a job may span any nodes
    assert all(path_of(tree, node)[-1] == ROOT_SWITCH for node in leaves)
    assert set(tree[ROOT_SWITCH][1]) == {"nn-1111111111example", "gpu-p4d", "cpu-small"}


def test_the_text_does_not_depend_on_the_order_of_the_answers() -> None:
    shuffled = dict(reversed(list(PLACED.items())))
    assert render_topology("alpha", [GPU, CPU], shuffled) == render_topology("alpha", [GPU, CPU], PLACED)


def test_a_node_set_that_contradicts_the_tree_or_has_a_bad_name_leaves_the_node_unplaced() -> None:
    placed = {
        "gpu-p4d-1": nodes_of("i-1111111111example"),
        # nn-3333... already hangs below nn-2222...: another parent for it is a contradiction
        "gpu-p4d-2": ("nn-9999999999example", "nn-8888888888example", "nn-3333333333example"),
        "gpu-p4d-3": ("nn-a,b", "nn-x", "nn-y"),  # a comma would split Slurm's Switches= list
        "gpu-p4d-4": ("nn-1", "nn-2", "nn-1"),  # a cycle
        "gpu-p4d-5": ("nn-" + "1" * 20,),  # a trailing number Slurm's hostlist would overflow
        "gpu-p4d-6": (ROOT_SWITCH,),
    }
    tree = switches(render_topology("alpha", [GPU], placed))
    assert tree["gpu-p4d"] == ("Nodes", [f"gpu-p4d-{i}" for i in range(2, 7)])
    assert tree["nn-3333333333example"] == ("Nodes", ["gpu-p4d-1"])


def test_a_bottom_network_node_that_is_above_others_gets_a_leaf_of_its_own() -> None:
    placed = {
        "gpu-p4d-1": ("nn-top", "nn-mid", "nn-low"),
        "gpu-p4d-2": ("nn-top", "nn-mid", "nn-low", "nn-deeper"),
    }
    tree = switches(render_topology("alpha", [GPU], placed))
    assert path_of(tree, "gpu-p4d-1") == ["nn-low-nodes", "nn-low", "nn-mid", "nn-top", ROOT_SWITCH]
    assert path_of(tree, "gpu-p4d-2") == ["nn-deeper", "nn-low", "nn-mid", "nn-top", ROOT_SWITCH]


def test_a_pool_switch_never_takes_a_network_node_s_name() -> None:
    clash = PoolNodeNames("nn-abc", ("nn-abc-1", "nn-abc-2"))
    tree = switches(render_topology("alpha", [clash], {"nn-abc-1": ("nn-abc",)}))
    assert tree["nn-abc"] == ("Nodes", ["nn-abc-1"])
    assert tree["pool-nn-abc"] == ("Nodes", ["nn-abc-2"])


def test_no_node_at_all_is_an_error() -> None:
    with pytest.raises(TopologyError, match="no node"):
        render_topology("alpha", [], {})


def test_ec2_network_node_ids_are_usable_switch_names() -> None:
    assert usable_switch_name("nn-0d7cf1ad0c2a5e2d4")
    assert usable_switch_name("nn-1111111111example")
    assert not usable_switch_name("nn-a b") and not usable_switch_name("x" * 65) and not usable_switch_name("")


def test_render_writes_the_plugin_line_and_the_initial_tree_only_for_a_topology_pool(tmp_path: Path) -> None:
    text = (REPO / "cluster_config" / "examples" / "minimal.yaml").read_text()
    plain = load_text(tmp_path, text)
    assert topology_lines(plain) == [] and initial_topology(plain) is None
    marked = load_text(tmp_path, re.sub(r"( +)max_nodes:", r"\1network_topology: true\n\1max_nodes:", text, count=1))
    assert topology_lines(marked)[-1] == "TopologyPlugin=topology/tree"
    tree = switches(initial_topology(marked) or "")
    pools = [p for part in marked.partitions for p in part.pools]
    assert sum(len(members) for kind, members in tree.values() if kind == "Nodes") == sum(p.max_nodes for p in pools)


def load_text(tmp_path: Path, text: str):  # type: ignore[no-untyped-def]
    path = tmp_path / "config.yaml"
    path.write_text(text)
    return load(path).clusters[0]


def test_render_and_the_manager_write_the_same_tree_when_nothing_is_placed() -> None:
    """So the manager's first cycle reconfigures nothing until an instance is placed."""
    from slurm_plugin.manager.topology import tree_text
    from slurm_plugin.render.cluster import render_cluster
    from slurm_plugin.render.manifest import placeholder_infra
    from tests.unit.cache_fixture import fixture_cache

    config = load(REPO / "cluster_config" / "examples" / "local-demo.yaml")  # pool `small` has network_topology
    cluster = config.clusters[0]
    rendered = render_cluster(config, cluster.name, placeholder_infra(cluster), fixture_cache())
    assert "TopologyPlugin=topology/tree\n" in rendered.slurm_conf
    assert rendered.topology_conf is not None and rendered.topology_conf == tree_text(rendered.manifest, {})
    assert [p.network_topology for p in rendered.manifest.pools][:1] == [True]
