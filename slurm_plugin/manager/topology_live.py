"""Topology changes in the running slurmctld (Slurm 25.05+), for the manager's topology step (topology.py).

`scontrol update NodeName=<nodes> Topology=<name>:<switch>[:<switch>...]` (scontrol(1), 25.05+) moves nodes to the
leaf named last; the first switch must exist (ours: the root `ec2`), the ones after it are created below it when
slurmctld lacks them (src/plugins/topology/tree/topology_tree.c). The topology of a topology.conf is named `default`
(src/interfaces/topology.c). slurmctld keeps the place in its node state over a restart and puts a cloud node back
in its configured place when it powers down (reset_node_topology in src/slurmctld/node_mgr.c).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Protocol, runtime_checkable

from slurm_plugin.powersave.slurm import Scontrol, SlurmError
from slurm_plugin.render.topology import node_paths

LIVE_SINCE = (25, 5)  # the first release whose `scontrol update NodeName=... Topology=` moves nodes in the tree
TOPOLOGY_NAME = "default"  # the name Slurm gives the one topology of a topology.conf (no topology.yaml)


class Reconfigurer(Protocol):
    """The Slurm call a changed topology needs before 25.05."""

    def reconfigure(self) -> None:
        """`scontrol reconfigure`: slurmctld and the slurmds read the configuration files again."""


@runtime_checkable
class LiveTopology(Protocol):
    """The Slurm calls that move nodes in the running slurmctld's tree (25.05+)."""

    def release(self) -> tuple[int, int] | None:
        """The (major, minor) of the Slurm in use, None when unknown."""

    def set_topology(self, nodes: Sequence[str], topology: str) -> None:
        """`scontrol update NodeName=<nodes> Topology=<topology>`; SlurmError when Slurm refuses."""

    def show_topology(self) -> str:
        """`scontrol show topology`: the running slurmctld's tree; SlurmError when it cannot be read."""


class ScontrolTopology:
    """LiveTopology through an scontrol adapter (the manager's own)."""

    def __init__(self, scontrol: Scontrol) -> None:
        self.scontrol = scontrol

    def release(self) -> tuple[int, int] | None:
        try:
            match = re.search(r"(\d+)\.(\d+)", self.scontrol._run(["--version"]))  # `slurm 26.05.3`: local, no RPC
        except SlurmError:
            return None
        return (int(match[1]), int(match[2])) if match else None

    def set_topology(self, nodes: Sequence[str], topology: str) -> None:
        self.scontrol._update(nodes, f"topology={topology}")

    def show_topology(self) -> str:
        return self.scontrol._run(["show", "topology"])


def live_port(slurm: Reconfigurer) -> LiveTopology | None:
    """How to move nodes in the running tree through `slurm`, when its adapter can."""
    if isinstance(slurm, LiveTopology):
        return slurm
    if isinstance(slurm, Scontrol):
        return ScontrolTopology(slurm)
    return None


def live_capable(slurm: Reconfigurer) -> LiveTopology | None:
    """`slurm`'s LiveTopology when the Slurm in use is 25.05 or later (asked locally: `scontrol --version`)."""
    live = live_port(slurm)
    release = live.release() if live is not None else None
    return live if release is not None and release >= LIVE_SINCE else None


def moves(current: Mapping[str, Sequence[str]], after: str) -> dict[tuple[str, ...], list[str]]:
    """Place (root first) -> the nodes whose place in the tree `after` (topology.conf text) differs from `current`
    (node -> place, e.g. slurmctld's tree through node_paths)."""
    old = {node: tuple(place) for node, place in current.items()}
    grouped: dict[tuple[str, ...], list[str]] = {}
    for node, path in sorted(node_paths(after).items()):
        if old.get(node) != path:
            grouped.setdefault(path, []).append(node)
    return grouped


def topology_value(path: Sequence[str]) -> str:
    """The value of `scontrol update ... Topology=` for a place: `default:ec2:nn-1:nn-2:nn-3`."""
    return ":".join([TOPOLOGY_NAME, *path])


__all__ = ["LIVE_SINCE", "TOPOLOGY_NAME", "LiveTopology", "Reconfigurer", "ScontrolTopology", "node_paths"]
