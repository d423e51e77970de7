"""Fleet stop (slurm_plugin/manager/fleet.py, reconcile): while the operator's wish is STOPPED the manager powers every
idle node down (always-on ones too), leaves busy nodes to finish their jobs and powers nothing up; the partition
switch happens on the transition only, so a partition an administrator set DOWN is left alone."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from slurm_plugin.manager import fleet
from slurm_plugin.manager.model import Kind
from slurm_plugin.manager.reconcile import REASON_FLEET_STOPPED, reconcile
from tests.unit.test_reconcile import NOW, SETTINGS, inst, kinds, node

STOPPED = replace(SETTINGS, fleet_stopped=True)


def test_a_stopped_fleet_powers_idle_nodes_down_and_lets_busy_ones_finish() -> None:
    nodes = [
        node("cpu-c7i-1", "IDLE+CLOUD", "127.1.0.1"),  # always-on (min_nodes 2)
        node("cpu-c7i-3", "IDLE+CLOUD", "127.1.0.3"),
        node("cpu-c7i-4", "ALLOCATED+CLOUD", "127.1.0.4"),
    ]
    instances = [inst("127.1.0.1", iid="i-1"), inst("127.1.0.3", iid="i-3"), inst("127.1.0.4", iid="i-4")]
    actions = reconcile(nodes, instances, NOW, STOPPED)
    assert kinds(actions) == [(Kind.POWER_DOWN, "cpu-c7i-1"), (Kind.POWER_DOWN, "cpu-c7i-3")]
    assert {a.reason for a in actions} == {REASON_FLEET_STOPPED}
    assert reconcile(nodes, instances, NOW, SETTINGS) == []  # running: nothing to do


def test_a_stopped_fleet_powers_no_always_on_node_up() -> None:
    nodes = [node("cpu-c7i-1", "IDLE+CLOUD+POWERED_DOWN"), node("cpu-c7i-2", "IDLE+CLOUD+POWERED_DOWN")]
    assert reconcile(nodes, [], NOW, STOPPED) == []
    assert kinds(reconcile(nodes, [], NOW, SETTINGS)) == [(Kind.POWER_UP, "cpu-c7i-1"), (Kind.POWER_UP, "cpu-c7i-2")]


class Partitions:
    """A fake Slurm with partitions only."""

    def __init__(self, states: dict[str, str]) -> None:
        self.states = dict(states)
        self.calls: list[tuple[tuple[str, ...], str]] = []

    def partitions(self) -> dict[str, str]:
        return dict(self.states)

    def set_partitions(self, names: Sequence[str], state: str) -> None:
        self.calls.append((tuple(names), state))
        self.states.update(dict.fromkeys(names, state))


def test_partitions_go_down_on_stop_and_up_on_start_only_when_the_manager_downed_them(tmp_path: Path) -> None:
    state_dir = str(tmp_path)
    slurm = Partitions({"cpu": "UP", "gpu": "UP"})
    assert fleet.apply_partitions(slurm, fleet.RUNNING, state_dir) == []  # never stopped: nothing
    slurm.states["gpu"] = "DOWN"  # an administrator's
    assert fleet.apply_partitions(slurm, fleet.RUNNING, state_dir) == []  # still theirs while the fleet runs
    assert fleet.apply_partitions(slurm, fleet.STOPPED, state_dir) == ["cpu"]
    assert fleet.apply_partitions(slurm, fleet.STOPPED, state_dir) == []  # idempotent
    assert fleet.applied(state_dir) == fleet.STOPPED
    assert fleet.apply_partitions(slurm, fleet.RUNNING, state_dir) == ["cpu"]
    assert slurm.states == {"cpu": "UP", "gpu": "DOWN"}  # the administrator's stays down
    assert fleet.apply_partitions(slurm, fleet.RUNNING, state_dir) == []
    assert slurm.calls == [(("cpu",), "DOWN"), (("cpu",), "UP")]
