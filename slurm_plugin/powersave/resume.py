"""ResumeProgram (`slurm-resume HOSTLIST`): copy SLURM_RESUME_FILE, start a detached worker, return to slurmctld.

The foreground imports no boto3 and no pydantic (it must return in well under 100 ms for thousands of nodes). The
worker (`--worker DIR`, started by the foreground) loads the manifest, launches and updates Slurm: see launcher.py.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
from typing import TYPE_CHECKING, Any

from slurm_plugin.hostlists import expand
from slurm_plugin.powersave.background import (
    DEFAULT_MANIFEST,
    MANIFEST_ENV,
    hand_off,
)

if TYPE_CHECKING:
    from pathlib import Path

NAME = "slurm-resume"


def job_groups(resume_data: Any) -> list[list[str]]:
    """Node lists of the jobs in a SLURM_RESUME_FILE (nodes_resume, else nodes_alloc); malformed entries skipped."""
    groups: list[list[str]] = []
    jobs = resume_data.get("jobs", []) if isinstance(resume_data, dict) else []
    for job in jobs if isinstance(jobs, list) else []:
        if not isinstance(job, dict):
            continue
        text = job.get("nodes_resume") or job.get("nodes_alloc")
        if not text:
            continue
        try:
            groups.append(expand(str(text)))
        except ValueError:
            continue
    return groups


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=NAME,
        description="Slurm ResumeProgram: launch EC2 instances for powered-down cloud nodes (returns at once; "
        f"the work runs in a background worker). Manifest: ${MANIFEST_ENV}, default {DEFAULT_MANIFEST}.",
    )
    parser.add_argument("hostlist", nargs="?", help="Slurm hostlist of the nodes to resume, e.g. cpu-c7i-[1-4]")
    parser.add_argument("--worker", metavar="DIR", help=argparse.SUPPRESS)
    return parser


def foreground(hostlist: str) -> int:
    """Validate, copy the resume file, start the worker; exit code."""
    resume_file = os.environ.get("SLURM_RESUME_FILE")
    return hand_off(NAME, "slurm_plugin.powersave.resume", hostlist, resume_file, {}, power_down_on_bad_manifest=True)


def worker(directory: Path) -> int:
    """The background half: everything slow."""
    from slurm_plugin import logs
    from slurm_plugin.manifest import ManifestError, load_manifest
    from slurm_plugin.powersave.ec2 import Ec2
    from slurm_plugin.powersave.launcher import resume_nodes
    from slurm_plugin.powersave.slurm import Scontrol

    request = json.loads((directory / "request.json").read_text(encoding="utf-8"))
    try:
        manifest = load_manifest(request["manifest"])
    except ManifestError as exc:
        logs.setup(None, NAME).error("request %s: %s", request["request_id"], exc)
        return 1
    log = logs.setup(manifest.log_file, NAME, stderr=False)
    groups: list[list[str]] = []
    if request.get("resume_file"):
        try:
            groups = job_groups(json.loads(directory.joinpath("resume.json").read_text(encoding="utf-8")))
        except (OSError, ValueError) as exc:
            log.warning(
                "request %s: resume file unreadable (%s); best effort for every node", request["request_id"], exc
            )
    try:
        resume_nodes(
            manifest,
            expand(request["hostlist"]),
            groups,
            Ec2(manifest.aws_endpoint_url, state_dir=manifest.state_dir),
            Scontrol(manifest.slurm_bin_dir, manifest.slurm_conf),
            request["request_id"],
        )
    except Exception:
        log.exception("request %s: resume worker failed", request["request_id"])
        return 1
    shutil.rmtree(directory, ignore_errors=True)
    return 0


def main(argv: list[str] | None = None) -> int:
    """Console script `slurm-resume`."""
    args = _parser().parse_args(argv)
    if args.worker:
        from pathlib import Path

        return worker(Path(args.worker))
    if not args.hostlist:
        print(f"{NAME}: error: hostlist: missing (usage: {NAME} HOSTLIST)", file=sys.stderr)
        return 2
    return foreground(args.hostlist)


if __name__ == "__main__":
    sys.exit(main())
