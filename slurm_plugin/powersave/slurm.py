"""The Slurm adapter: `scontrol` calls the plugin makes, batched, behind a small Protocol tests can fake.

Updates go in chunks of UPDATE_BATCH nodes; a failed chunk is retried (slurmctld may be busy or restarting) and never
stops the other chunks: the error names every node left unchanged. `scontrol -o show nodes` is parsed field by field
up to the first free-text field (Reason, Comment, Extra), so a reason cannot pose as a node's address.
"""

from __future__ import annotations

import os
import re
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

UPDATE_BATCH = 500  # nodes per `scontrol update` (keeps the command line far below ARG_MAX)
UPDATE_ATTEMPTS = 3
_FIELD = re.compile(r"(?:^|\s)(NodeName|NodeAddr|NodeHostName|State)=(\S+)")
_FREE_TEXT = re.compile(r"\s(?:Reason|Comment|Extra)=")
_REASON = re.compile(r"\sReason=(.*?)(?=\s(?:Comment|Extra)=|$)")


@dataclass(frozen=True)
class SlurmNode:
    """A node as `scontrol show node` reports it."""

    name: str
    addr: str
    hostname: str
    state: str
    reason: str = ""


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

    def set_down(self, nodes: Sequence[str], reason: str, resume_after: int) -> None:
        """state=DOWN with a reason; back to service by Slurm itself after `resume_after` seconds (ResumeAfter) when
        that is > 0, else until someone resumes it."""

    def show_nodes(self, nodes: Sequence[str] | None) -> dict[str, SlurmNode]:
        """The named nodes Slurm knows (None: every node)."""


def parse_show_nodes(text: str) -> dict[str, SlurmNode]:
    """Parse `scontrol -o show node` output (one node per line)."""
    result = {}
    for line in text.splitlines():
        free = _FREE_TEXT.search(line)
        fields: dict[str, str] = {}
        for key, value in _FIELD.findall(line[: free.start()] if free else line):
            fields.setdefault(key, value)
        name = fields.get("NodeName")
        if name:
            addr = fields.get("NodeAddr") or name
            host = fields.get("NodeHostName") or name
            said = _REASON.search(line[free.start() :]) if free else None
            result[name] = SlurmNode(name, addr, host, fields.get("State", ""), said.group(1).strip() if said else "")
    return result


_ADDR = ("nodeaddr", "nodehostname")


def _chunks(items: Sequence[str], size: int) -> list[list[str]]:
    return [list(items[i : i + size]) for i in range(0, len(items), size)]


class Scontrol:
    """The real adapter: runs `scontrol` from the manifest's slurm_bin_dir (and SLURM_CONF when set)."""

    def __init__(
        self, bin_dir: str = "/usr/bin", slurm_conf: str | None = None, timeout: float = 60.0, pause: float = 2.0
    ) -> None:
        self.binary = str(Path(bin_dir) / "scontrol")
        self.env = dict(os.environ)
        if slurm_conf:
            self.env["SLURM_CONF"] = slurm_conf
        self.timeout = timeout
        self.pause = pause

    def _update(self, nodes: Sequence[str], *settings: str) -> None:
        """`scontrol update nodename=<chunk> <settings>` for every chunk of `nodes` (see _update_each)."""
        self._update_each(nodes, lambda chunk: [f"nodename={','.join(chunk)}", *settings])

    def _update_each(self, nodes: Sequence[str], args: Callable[[list[str]], list[str]]) -> None:
        """`scontrol update` chunk by chunk, each retried; every chunk is tried; SlurmError names what failed."""
        failed: list[str] = []
        last: SlurmError | None = None
        for chunk in _chunks(nodes, UPDATE_BATCH):
            for attempt in range(UPDATE_ATTEMPTS):
                try:
                    self._run(["update", *args(chunk)])
                    break
                except SlurmError as exc:
                    last = exc
                    if attempt + 1 < UPDATE_ATTEMPTS:
                        time.sleep(self.pause * (attempt + 1))
            else:
                failed.extend(chunk)
        if failed:
            from slurm_plugin.hostlists import compress

            raise SlurmError(f"{len(failed)} nodes not updated ({compress(failed)}): {last}")

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
        self._update_each(
            list(addresses),
            lambda chunk: [
                f"nodename={','.join(chunk)}",
                f"nodeaddr={','.join(addresses[n] for n in chunk)}",
                f"nodehostname={','.join(chunk)}",
            ],
        )

    def reset_addresses(self, nodes: Sequence[str]) -> None:
        self._update_each(
            nodes, lambda chunk: [f"nodename={','.join(chunk)}"] + [f"{k}={','.join(chunk)}" for k in _ADDR]
        )

    def power_down(self, nodes: Sequence[str], reason: str) -> None:
        self._update(nodes, "state=POWER_DOWN_FORCE", f"reason={reason}")

    def set_down(self, nodes: Sequence[str], reason: str, resume_after: int) -> None:
        after = [f"resumeafter={resume_after}"] if resume_after > 0 else []
        self._update(nodes, "state=DOWN", f"reason={reason}", *after)

    def resume(self, nodes: Sequence[str]) -> None:
        """Powered-down (or powering-down) DOWN / drained nodes — every caller's — back to idle~: state=IDLE clears
        DOWN, DRAIN and FAIL without RESUME's NOT_RESPONDING (node_mgr.c `_require_node_reg`: set until the node
        registers, which a powered-down node does not; after a slurmctld restart such a node is never available).
        Unlike RESUME it lets a power-down under way finish, keeps REBOOT flags, fires no strigger --resume, and is
        refused for nodes with INVALID_REG / REBOOT_ISSUED or another base state than DOWN / IDLE (none of ours)."""
        self._update(nodes, "state=IDLE")

    def power_down_again(self, nodes: Sequence[str]) -> None:
        """state=POWER_DOWN on idle~ nodes (manager/slurm_port.py ManagerSlurm.power_down_again)."""
        self._update(nodes, "state=POWER_DOWN")

    def show_nodes(self, nodes: Sequence[str] | None) -> dict[str, SlurmNode]:
        every = parse_show_nodes(self._run(["-o", "show", "nodes"]))  # one call; filtering a list is cheaper than N
        if nodes is None:
            return every
        wanted = set(nodes)
        return {name: node for name, node in every.items() if name in wanted}
