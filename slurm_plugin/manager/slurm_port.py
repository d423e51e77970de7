"""What the manager needs from Slurm (a Protocol tests fake) and its scontrol implementation.

The implementation extends the plugin's `Scontrol` adapter (same binary, SLURM_CONF, timeouts, error type) with the
calls only the manager makes: show every node, ping, drain, resume, power up, reconfigure.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from slurm_plugin.manager.model import Node
from slurm_plugin.manager.observe import parse_json, parse_oneliner
from slurm_plugin.powersave.slurm import Scontrol, SlurmError


class ManagerSlurm(Protocol):
    """Slurm as the manager sees it."""

    def nodes(self) -> list[Node]:
        """Every node, in one call."""

    def ping(self) -> str:
        """`scontrol ping` output."""

    def power_down(self, nodes: Sequence[str], reason: str) -> None:
        """state=POWER_DOWN_FORCE with a reason: jobs requeued, instance stopped by SuspendProgram, node idle~."""

    def drain(self, nodes: Sequence[str], reason: str) -> None:
        """state=DRAIN with a reason: running jobs finish, nothing new starts."""

    def resume(self, nodes: Sequence[str]) -> None:
        """DOWN~ / drained~ nodes back to idle~ (state=IDLE, see Scontrol.resume)."""

    def power_down_again(self, nodes: Sequence[str]) -> None:
        """state=POWER_DOWN (no FORCE, no reason) on idle~ nodes: slurmctld runs SuspendProgram for them again,
        which clears a stale NOT_RESPONDING; they are available again after SuspendTimeout."""

    def power_up(self, nodes: Sequence[str]) -> None:
        """state=POWER_UP: start their instances now."""

    def partitions(self) -> dict[str, str]:
        """Partition name -> state (UP, DOWN, DRAIN, INACTIVE)."""

    def set_partitions(self, names: Sequence[str], state: str) -> None:
        """state=STATE for each partition."""

    def reconfigure(self) -> None:
        """`scontrol reconfigure`: slurmctld and the slurmds read the configuration files again (topology.conf)."""


class ScontrolManager(Scontrol):
    """The real ManagerSlurm: scontrol, JSON output when this Slurm has it (23.02+), else --oneliner (22.05)."""

    def __init__(self, bin_dir: str = "/usr/bin", slurm_conf: str | None = None, timeout: float = 60.0) -> None:
        super().__init__(bin_dir, slurm_conf, timeout)
        self.json: bool | None = None  # unknown until the first call

    def nodes(self) -> list[Node]:
        if self.json is not False:
            try:
                nodes = parse_json(self._run(["--json", "show", "nodes"]))
                self.json = True
                return nodes
            except SlurmError:
                if self.json:
                    raise
                self.json = False  # 22.05: `unrecognized option '--json'`
        return parse_oneliner(self._run(["--oneliner", "show", "nodes"]))

    def ping(self) -> str:
        return self._run(["ping"])

    def drain(self, nodes: Sequence[str], reason: str) -> None:
        self._update(nodes, "state=DRAIN", f"reason={reason}")

    def power_up(self, nodes: Sequence[str]) -> None:
        self._update(nodes, "state=POWER_UP")

    def partitions(self) -> dict[str, str]:
        found: dict[str, str] = {}
        for line in self._run(["--oneliner", "show", "partitions"]).splitlines():
            words = dict(word.split("=", 1) for word in line.split() if "=" in word)
            if "PartitionName" in words:
                found[words["PartitionName"]] = words.get("State", "")
        return found

    def set_partitions(self, names: Sequence[str], state: str) -> None:
        for name in names:
            self._run(["update", f"partitionname={name}", f"state={state}"])

    def reconfigure(self) -> None:
        self._run(["reconfigure"])
