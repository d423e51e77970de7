"""Topology changes without a slurmctld restart (slurm_plugin/manager/topology.py): on Slurm 25.05+ the manager moves
only the nodes whose place changed (`scontrol update NodeName=... Topology=default:ec2:...`) and never runs
`scontrol reconfigure`; on older releases it reconfigures at most once every RECONFIGURE_GAP. The real scontrol
adapter is run against a recording stub `scontrol`."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import timedelta
from itertools import pairwise
from pathlib import Path

import pytest

from slurm_plugin.hostlists import compress
from slurm_plugin.manager import topology, topology_live
from slurm_plugin.manager.model import Instance, Node
from slurm_plugin.manager.observe import parse_state
from slurm_plugin.manager.slurm_port import ScontrolManager
from slurm_plugin.manifest import Manifest
from slurm_plugin.powersave.slurm import SlurmError
from slurm_plugin.render.topology import PoolNodeNames, node_paths, render_topology
from tests.unit.test_topology_manager import NOW, FakeEc2, FakeSlurm, conf, manifest, pool, running, up


@dataclass
class LiveSlurm(FakeSlurm):
    """A Slurm of `version` with a running tree (`places`: node -> switches from the root, as slurmctld holds them)
    that `Topology=` updates change (each recorded) and `show topology` prints."""

    version: tuple[int, int] | None = (26, 5)
    refuse: bool = False
    places: dict[str, tuple[str, ...]] = field(default_factory=dict)
    updates: list[tuple[list[str], str]] = field(default_factory=list)
    shows: int = 0

    def release(self) -> tuple[int, int] | None:
        return self.version

    def set_topology(self, nodes: list[str], value: str) -> None:
        if self.refuse:
            raise SlurmError("scontrol update: exit 1: Requested topology configuration is not available")
        self.updates.append((list(nodes), value))
        self.places.update(dict.fromkeys(nodes, tuple(value.split(":")[1:])))

    def show_topology(self) -> str:
        """Like `scontrol show topology`: inner switches list their switches and all nodes below them."""
        self.shows += 1
        leaves: dict[str, list[str]] = {}
        below: dict[str, set[str]] = {}
        for node, path in self.places.items():
            leaves.setdefault(path[-1], []).append(node)
            for upper, lower in pairwise(path):
                below.setdefault(upper, set()).add(lower)
        lines = [f"SwitchName={leaf} Level=0 LinkSpeed=1 Nodes={compress(nodes)}" for leaf, nodes in leaves.items()]
        lines += [
            f"SwitchName={up} Level=1 LinkSpeed=1 Nodes=x[1-9] Switches={','.join(sorted(d))}"
            for up, d in below.items()
        ]
        return "\n".join(lines) + "\n"


def _started(tmp_path: Path, slurm: LiveSlurm, size: int = 4) -> Manifest:
    """The manifest; render's tree in the file and in slurmctld (as read at its start)."""
    m = manifest(tmp_path, pool("p4d", size))
    text = topology.tree_text(m, {})
    topology.write_in_place(topology.topology_path(m), text)
    slurm.places = topology_live.node_paths(text)
    return m


def _two_placed(tmp_path: Path, slurm: LiveSlurm) -> tuple[Manifest, list[Node], list[Instance]]:
    m = _started(tmp_path, slurm)
    nodes = [up("gpu-p4d-1", "127.0.0.1"), up("gpu-p4d-2", "127.0.0.2")]
    instances = [running("i-1111111111example", "127.0.0.1"), running("i-2222222222example", "127.0.0.2")]
    first = topology.sync(m, nodes, instances, FakeEc2(), slurm, NOW)
    assert first.changed
    return m, nodes, instances


def test_on_25_05_and_later_nodes_move_in_the_running_tree_without_a_reconfigure(tmp_path: Path) -> None:
    slurm = LiveSlurm()
    m, nodes, instances = _two_placed(tmp_path, slurm)
    assert slurm.reconfigures == 0  # the old code reconfigured (a slurmctld restart since 23.11)
    # both recorded instances connect to the same bottom network node: one update for the two nodes
    (update,) = slurm.updates
    assert update[0] == ["gpu-p4d-1", "gpu-p4d-2"]
    assert update[1].startswith("default:ec2:") and update[1].endswith(":nn-3333333333example")
    assert node_paths(conf(m))["gpu-p4d-1"] == tuple(update[1].split(":")[1:])  # the file says the same
    # the instance of node 2 goes: only node 2 moves back under its pool's switch, and still no reconfigure
    nodes[1] = Node("gpu-p4d-2", *parse_state("IDLE+CLOUD+POWERED_DOWN"))
    result = topology.sync(m, nodes, instances[:1], FakeEc2(), slurm, NOW + timedelta(seconds=45))
    assert (result.moved, result.reconfigured, result.counters) == (1, False, ["topology_updates"])
    assert slurm.updates[-1] == (["gpu-p4d-2"], "default:ec2:gpu-p4d") and slurm.reconfigures == 0
    # nothing changed: one look at slurmctld's tree, no update
    shows = slurm.shows
    again = topology.sync(m, nodes, instances[:1], FakeEc2(), slurm, NOW + timedelta(seconds=90))
    assert (again.changed, again.moved, slurm.shows) == (False, 0, shows + 1) and len(slurm.updates) == 2


def test_a_node_slurmctld_put_back_at_power_down_is_placed_again_though_the_file_did_not_change(
    tmp_path: Path,
) -> None:
    slurm = LiveSlurm()
    m, nodes, instances = _two_placed(tmp_path, slurm)
    # node 1 powered down and up again between two cycles, on an instance at the same place: slurmctld reset it to its
    # configured place (render's pool switch), the file still says it is placed
    slurm.places["gpu-p4d-1"] = ("ec2", "gpu-p4d")
    result = topology.sync(m, nodes, instances, FakeEc2(), slurm, NOW + timedelta(seconds=45))
    assert not result.changed and result.moved == 1
    assert slurm.updates[-1][0] == ["gpu-p4d-1"] and slurm.updates[-1][1].endswith(":nn-3333333333example")


@pytest.mark.parametrize("version", [(24, 11), (25, 1), None])
def test_before_25_05_or_unknown_it_reconfigures_at_most_once_per_gap(tmp_path: Path, version: object) -> None:
    slurm = LiveSlurm(version=version)  # type: ignore[arg-type]
    m, nodes, instances = _two_placed(tmp_path, slurm)
    assert slurm.reconfigures == 1 and slurm.updates == []
    before = conf(m)
    nodes[1] = Node("gpu-p4d-2", *parse_state("IDLE+CLOUD+POWERED_DOWN"))
    soon = topology.sync(m, nodes, instances[:1], FakeEc2(), slurm, NOW + timedelta(seconds=45))
    assert (soon.changed, soon.deferred, soon.reconfigured) == (True, True, False)
    assert slurm.reconfigures == 1 and conf(m) == before  # left for later: the next cycles see the change again
    later = topology.sync(m, nodes, instances[:1], FakeEc2(), slurm, NOW + topology.RECONFIGURE_GAP)
    assert (later.reconfigured, slurm.reconfigures) == (True, 2) and conf(m) != before


def test_a_move_slurm_refuses_falls_back_to_one_reconfigure(tmp_path: Path) -> None:
    slurm = LiveSlurm(refuse=True)
    m, _, _ = _two_placed(tmp_path, slurm)
    assert slurm.reconfigures == 1 and "nn-3333333333example" in conf(m)


def test_an_unreadable_tree_is_compared_with_the_file(tmp_path: Path) -> None:
    slurm = LiveSlurm()
    m = _started(tmp_path, slurm)

    def refuse() -> str:
        raise SlurmError("scontrol show topology: exit 1: Unable to contact slurm controller")

    slurm.show_topology = refuse  # type: ignore[method-assign]
    result = topology.sync(m, [up("gpu-p4d-1", "127.0.0.1")], [running("i-1111111111example", "127.0.0.1")],
                           FakeEc2(), slurm, NOW)  # fmt: skip
    assert result.moved == 1 and slurm.reconfigures == 0 and "show topology failed" in result.failures[0]


def test_moves_groups_nodes_by_their_new_place_and_skips_unmoved_ones() -> None:
    pools = [PoolNodeNames("cpu-a", ("n1", "n2", "n3", "n4"))]
    before = render_topology("c", pools, {"n1": ("t", "m", "l1")})
    after = render_topology("c", pools, {"n1": ("t", "m", "l1"), "n2": ("t", "m", "l2"), "n3": ("t", "m", "l2")})
    current = topology_live.node_paths(before)
    assert topology_live.moves(current, after) == {("ec2", "t", "m", "l2"): ["n2", "n3"]}
    assert topology_live.topology_value(("ec2", "t", "m", "l2")) == "default:ec2:t:m:l2"


def test_the_real_adapter_asks_the_release_locally_and_updates_the_nodes(tmp_path: Path) -> None:
    stub = tmp_path / "scontrol"
    stub.write_text(
        f'#!/bin/sh\necho "$*" >> {tmp_path / "calls"}\n[ "$1" = --version ] && echo "slurm 26.05.3"\nexit 0\n'
    )
    stub.chmod(0o755)
    live = topology_live.live_port(ScontrolManager(str(tmp_path)))
    assert live is not None and live.release() == (26, 5)
    live.set_topology(["gpu-p4d-1", "gpu-p4d-2"], "default:ec2:nn-1")
    live.show_topology()
    assert (tmp_path / "calls").read_text().splitlines() == [
        "--version",
        "update nodename=gpu-p4d-1,gpu-p4d-2 topology=default:ec2:nn-1",
        "show topology",
    ]
    assert topology_live.live_port(FakeSlurm()) is None  # a Slurm port that can only reconfigure
