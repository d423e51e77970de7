"""One plugin worker of the fault soak (tests/aws/test_fault_soak.py), run as its own process so the soak can kill it.

`python -m tests.aws.soak_worker resume|suspend|resume-fail MANIFEST SLURM_STATE REQUEST_ID NODE...` runs the same
core the real workers run (launcher.resume_nodes / terminator.terminate_nodes) against the emulated EC2, with Slurm
played by `FileSlurm`: a JSON file under a lock, shared by every worker of the soak.
"""

from __future__ import annotations

import fcntl
import json
import os
import sys
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from slurm_plugin.powersave.slurm import SlurmNode


class FileSlurm:
    """Slurm's node table as the plugin and slurmctld change it, in one locked JSON file: per node its address, reason
    and power state (`powering_up` from a resume request until the plugin or slurmctld powers it down)."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)

    @contextmanager
    def _table(self) -> Iterator[dict[str, Any]]:
        with open(self.path.with_suffix(".lock"), "a+") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            table = json.loads(self.path.read_text()) if self.path.exists() else {}
            before = json.dumps(table, sort_keys=True)
            yield table
            if json.dumps(table, sort_keys=True) != before:
                with open(self.path.with_suffix(".trace"), "a") as trace:
                    trace.write(json.dumps({"t": time.time(), "pid": os.getpid(), "table": table}) + "\n")
            tmp = self.path.with_suffix(".tmp")
            tmp.write_text(json.dumps(table))
            tmp.replace(self.path)

    def _update(self, nodes: Iterable[str], **fields: Any) -> None:
        with self._table() as table:
            for node in nodes:
                table[node] = {"addr": None, "reason": "", "power": "powered_down", **table.get(node, {}), **fields}

    # what the plugin does (the Slurm adapter's methods)
    def set_addresses(self, addresses: Mapping[str, str]) -> None:
        with self._table() as table:
            for node, ip in addresses.items():
                table[node] = {**table.get(node, {}), "addr": ip, "reason": ""}

    def reset_addresses(self, nodes: Sequence[str]) -> None:
        self._update(nodes, addr=None)

    def power_down(self, nodes: Sequence[str], reason: str) -> None:
        self._update(nodes, addr=None, reason=reason, power="powered_down")

    def set_down(self, nodes: Sequence[str], reason: str, resume_after: int) -> None:
        self.power_down(nodes, reason)

    # what slurmctld does itself
    def power_up(self, nodes: Iterable[str]) -> None:
        """A resume request: the nodes are POWERING_UP (ResumeTimeout applies) until registered or powered down."""
        self._update(nodes, power="powering_up")

    def suspend_timeout(self, nodes: Iterable[str]) -> None:
        """Whatever SuspendProgram did or whether it was killed: after SuspendTimeout a node is POWERED_DOWN and a
        CLOUD node's NodeAddr is its name again (slurmctld's power_save.c)."""
        self._update(nodes, addr=None, power="powered_down")

    def show_nodes(self, nodes: Sequence[str] | None) -> dict[str, SlurmNode]:
        with self._table() as table:
            names = list(table) if nodes is None else nodes
            result = {}
            for name in names:
                addr = table.get(name, {}).get("addr")
                state = "IDLE+CLOUD" if addr else "IDLE+CLOUD+POWERED_DOWN"
                result[name] = SlurmNode(name, addr or name, name, state)
            return result

    def snapshot(self) -> dict[str, Any]:
        with self._table() as table:
            return dict(table)


def main(argv: list[str]) -> int:
    from slurm_plugin import logs
    from slurm_plugin.manifest import load_manifest
    from slurm_plugin.powersave.ec2 import Ec2
    from slurm_plugin.powersave.launcher import resume_nodes
    from slurm_plugin.powersave.terminator import terminate_nodes

    kind, manifest_path, slurm_path, request_id, *nodes = argv
    manifest = load_manifest(manifest_path)
    logs.setup(manifest.log_file, f"soak-{kind}", stderr=False)
    slurm = FileSlurm(slurm_path)
    ec2 = Ec2(manifest.aws_endpoint_url)
    if kind == "resume":
        resume_nodes(manifest, nodes, [], ec2, slurm, request_id)
    else:
        reason = "(Code:ResumeFailed) soak" if kind == "resume-fail" else None
        terminate_nodes(manifest, nodes, ec2, slurm, f"request {request_id}", reason, time.time())
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
