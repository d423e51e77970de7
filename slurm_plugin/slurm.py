"""The Slurm adapter: `scontrol` calls the plugin makes, batched, behind a small Protocol tests can fake."""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

UPDATE_BATCH = 500  # nodes per `scontrol update` (keeps the command line far below ARG_MAX)
_FIELD = re.compile(r"(NodeName|NodeAddr|NodeHostName|State)=(\S+)")


@dataclass(frozen=True)
class SlurmNode:
    """A node as `scontrol show node` reports it."""

    name: str
    addr: str
    hostname: str
    state: str


class SlurmError(Exception):
    """An scontrol command failed (one-line message)."""


class Slurm(Protocol):
    """What the plugin needs from Slurm."""

    def set_addresses(self, addresses: Mapping[str, str]) -> None:
        """Point each node at its instance: NodeAddr=<ip>, NodeHostname=<node name>."""

    def reset_addresses(self, nodes: Sequence[str]) -> None:
        """NodeAddr and NodeHostname back to the node name."""

    def power_down(self, nodes: Sequence[str], reason: str) -> None:
        """state=POWER_DOWN_FORCE with a reason: jobs are requeued, the node goes back to idle~."""

    def show_nodes(self, nodes: Sequence[str]) -> dict[str, SlurmNode]:
        """The named nodes Slurm knows."""


def parse_show_nodes(text: str) -> dict[str, SlurmNode]:
    """Parse `scontrol -o show node` output (one node per line)."""
    result = {}
    for line in text.splitlines():
        fields = dict(_FIELD.findall(line))
        name = fields.get("NodeName")
        if name:
            addr = fields.get("NodeAddr") or name
            host = fields.get("NodeHostName") or name
            result[name] = SlurmNode(name, addr, host, fields.get("State", ""))
    return result


def _chunks(items: Sequence[str], size: int) -> list[list[str]]:
    return [list(items[i : i + size]) for i in range(0, len(items), size)]


class Scontrol:
    """The real adapter: runs `scontrol` from the manifest's slurm_bin_dir (and SLURM_CONF when set)."""

    def __init__(self, bin_dir: str = "/usr/bin", slurm_conf: str | None = None, timeout: float = 60.0) -> None:
        self.binary = str(Path(bin_dir) / "scontrol")
        self.env = dict(os.environ)
        if slurm_conf:
            self.env["SLURM_CONF"] = slurm_conf
        self.timeout = timeout

    def _run(self, args: Sequence[str]) -> str:
        try:
            done = subprocess.run(
                [self.binary, *args], env=self.env, capture_output=True, text=True, timeout=self.timeout, check=False
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise SlurmError(f"scontrol {args[0]}: {exc}") from None
        if done.returncode != 0:
            message = (done.stderr or done.stdout).strip().splitlines()
            raise SlurmError(f"scontrol {' '.join(args[:2])}: exit {done.returncode}: {message[0] if message else ''}")
        return done.stdout

    def set_addresses(self, addresses: Mapping[str, str]) -> None:
        names = list(addresses)
        for chunk in _chunks(names, UPDATE_BATCH):
            self._run(
                [
                    "update",
                    f"nodename={','.join(chunk)}",
                    f"nodeaddr={','.join(addresses[n] for n in chunk)}",
                    f"nodehostname={','.join(chunk)}",
                ]
            )

    def reset_addresses(self, nodes: Sequence[str]) -> None:
        for chunk in _chunks(nodes, UPDATE_BATCH):
            names = ",".join(chunk)
            self._run(["update", f"nodename={names}", f"nodeaddr={names}", f"nodehostname={names}"])

    def power_down(self, nodes: Sequence[str], reason: str) -> None:
        for chunk in _chunks(nodes, UPDATE_BATCH):
            self._run(["update", f"nodename={','.join(chunk)}", "state=POWER_DOWN_FORCE", f"reason={reason}"])

    def show_nodes(self, nodes: Sequence[str]) -> dict[str, SlurmNode]:
        wanted = set(nodes)
        every = parse_show_nodes(self._run(["-o", "show", "nodes"]))  # one call; filtering a list is cheaper than N
        return {name: node for name, node in every.items() if name in wanted}
