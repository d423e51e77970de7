"""SuspendProgram (`slurm-suspend HOSTLIST`) and ResumeFailProgram (`slurm-resume-fail HOSTLIST`).

Both validate the hostlist against the manifest in the foreground (unknown node or bad hostlist: one-line error,
exit 2, nothing touched), then a waiting spare worker (spare.py) or a detached worker of its own terminates the instances behind the nodes (terminator.py) and
resets NodeAddr. Resume-fail also powers the nodes down with a `(Code:ResumeFailed)` reason so they return to idle~.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
from typing import TYPE_CHECKING

from slurm_plugin.hostlists import expand
from slurm_plugin.powersave.background import (
    DEFAULT_MANIFEST,
    MANIFEST_ENV,
    USE_SPARES,
    hand_off,
)

if TYPE_CHECKING:
    from pathlib import Path

    from slurm_plugin.manifest import Manifest
    from slurm_plugin.powersave.ec2 import Ec2

SUSPEND = "slurm-suspend"
RESUME_FAIL = "slurm-resume-fail"


def _parser(name: str, what: str) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=name, description=f"{what} Manifest: ${MANIFEST_ENV}, default {DEFAULT_MANIFEST}."
    )
    parser.add_argument("hostlist", nargs="?", help="Slurm hostlist of the nodes, e.g. cpu-c7i-[1-4]")
    parser.add_argument("--worker", metavar="DIR", help=argparse.SUPPRESS)
    return parser


def foreground(name: str, hostlist: str) -> int:
    """Validate and hand the nodes to a waiting spare worker (spare.py: the resume spares serve these requests too,
    by their `kind`), else to a worker of its own; exit code."""
    return hand_off(name, "slurm_plugin.powersave.suspend", hostlist, None, {"kind": name}, spares=USE_SPARES)


def worker(directory: Path, warm: Ec2 | None = None) -> int:
    """The background half: find, terminate, reset. `warm`: EC2 clients a spare made ahead (used when they were made
    for this manifest's endpoint and state dir)."""
    from slurm_plugin import logs
    from slurm_plugin.manifest import ManifestError, load_manifest
    from slurm_plugin.powersave.ec2 import Ec2
    from slurm_plugin.powersave.planner import power_down_reason
    from slurm_plugin.powersave.slurm import Scontrol
    from slurm_plugin.powersave.terminator import terminate_nodes
    from slurm_plugin.powersave.unusable_pools import count_failed_boots

    request = json.loads((directory / "request.json").read_text(encoding="utf-8"))
    name = str(request.get("kind", SUSPEND))
    try:
        manifest = load_manifest(request["manifest"])
    except ManifestError as exc:
        logs.setup(None, name).error("request %s: %s", request["request_id"], exc)
        return 1
    log = logs.setup(manifest.log_file, name, stderr=False)
    reason = power_down_reason("ResumeFailed", request["request_id"]) if name == RESUME_FAIL else None
    try:
        nodes = expand(request["hostlist"])
        slurm = Scontrol(manifest.slurm_bin_dir, manifest.slurm_conf)
        outcome = terminate_nodes(
            manifest,
            nodes,
            warm
            if warm is not None
            and (warm.endpoint_url, warm.state_dir) == (manifest.aws_endpoint_url, manifest.state_dir)
            else Ec2(manifest.aws_endpoint_url, state_dir=manifest.state_dir),
            slurm,
            f"request {request['request_id']}",
            reason,
            request.get("requested_at"),
            "resume-fail" if name == RESUME_FAIL else "suspend",
        )
        if name == RESUME_FAIL:  # each node is a failed boot of its pool (protected mode)
            record_boot_failures(manifest, nodes)
            count_failed_boots(manifest, slurm, nodes, f"request {request['request_id']}", time.time())
    except Exception:
        log.exception("request %s: %s worker failed", request["request_id"], name)
        return 1
    shutil.rmtree(directory, ignore_errors=True)
    return 1 if outcome.errors else 0


def record_boot_failures(manifest: Manifest, nodes: list[str]) -> None:
    """One `boot_failed` line per node of the cluster in the event log (the exporter's failed-boot count)."""
    from slurm_plugin.telemetry import events

    pools = {node: pool.key for node in nodes if (pool := manifest.pool_of_node(node)) is not None}
    events.record(manifest.state_dir, [{"event": "boot_failed", "pool": key, "node": n} for n, key in pools.items()])


def _main(name: str, what: str, argv: list[str] | None) -> int:
    args = _parser(name, what).parse_args(argv)
    if args.worker:
        from pathlib import Path

        return worker(Path(args.worker))
    if not args.hostlist:
        print(f"{name}: error: hostlist: missing (usage: {name} HOSTLIST)", file=sys.stderr)
        return 2
    return foreground(name, args.hostlist)


def main(argv: list[str] | None = None) -> int:
    """Console script `slurm-suspend`."""
    return _main(SUSPEND, "Slurm SuspendProgram: terminate the EC2 instances behind powered-down nodes.", argv)


def resume_fail_main(argv: list[str] | None = None) -> int:
    """Console script `slurm-resume-fail`."""
    return _main(RESUME_FAIL, "Slurm ResumeFailProgram: terminate instances of nodes that failed to resume.", argv)


if __name__ == "__main__":
    sys.exit(main())
