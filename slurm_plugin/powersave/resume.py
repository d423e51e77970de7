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
    ONLY_SPARES,
    USE_SPARES,
    hand_off,
)

if TYPE_CHECKING:
    from pathlib import Path

    from slurm_plugin.powersave.ec2 import Ec2

NAME = "slurm-resume"
MODULE = "slurm_plugin.powersave.resume"


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
    parser.add_argument("--spare", metavar="MANIFEST", help=argparse.SUPPRESS)
    parser.add_argument("--prime", action="store_true", help="start a spare worker if none waits, then return")
    parser.add_argument(
        "--early",
        action="store_true",
        help="launch only if a spare worker is waiting (PrologSlurmctld's early launch); never start a worker",
    )
    return parser


def foreground(hostlist: str) -> int:
    """Validate, copy the resume file, start the worker; exit code."""
    resume_file = os.environ.get("SLURM_RESUME_FILE")
    return hand_off(NAME, MODULE, hostlist, resume_file, {}, power_down_on_bad_manifest=True, spares=USE_SPARES)


def prime() -> int:
    """Start a spare worker when none waits (the controller's config apply runs this as SlurmUser, so the first cold
    start after a controller boot finds one too); exit 1 with one line on a bad manifest."""
    from slurm_plugin.powersave import spare as spares
    from slurm_plugin.powersave.background import InputError, manifest_path, peek_manifest

    path = manifest_path()
    try:
        manifest = peek_manifest(path)
    except InputError as exc:
        print(f"{NAME}: error: {exc}", file=sys.stderr)
        return 1
    if spares.waiting(spares.spares_dir(str(manifest["state_dir"]))) == 0:
        log_file = str(manifest["log_file"])
        os.makedirs(os.path.dirname(log_file) or ".", exist_ok=True)
        spares.spawn(MODULE, os.path.abspath(path), log_file)
    return 0


def early(hostlist: str) -> int:
    """PrologSlurmctld's early launch (assets/slurm/prolog-wait-for-boot.sh): the job's powered-down nodes go to a
    waiting spare worker now, up to a second before slurmctld's power-save thread calls ResumeProgram for them. With
    no spare waiting nothing is done: ResumeProgram launches them as always. When ResumeProgram then comes for nodes
    the early worker holds or has bound, its worker finds them claimed or bound to a live instance and launches
    nothing more (launcher.resume_nodes). The job's nodes are one all-or-nothing group, as ResumeProgram's resume file
    would say."""
    return hand_off(NAME + " --early", MODULE, hostlist, None, {"job_nodes": hostlist}, spares=ONLY_SPARES)


def worker(directory: Path, warm: Ec2 | None = None) -> int:
    """The background half: everything slow. `warm`: EC2 clients a spare made ahead (used when they were made for
    this manifest's endpoint and state dir)."""
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
    if request.get("job_nodes"):  # an early launch (PrologSlurmctld): one job's nodes
        groups = [expand(request["job_nodes"])]
    elif request.get("resume_file"):
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
            warm
            if warm is not None
            and (warm.endpoint_url, warm.state_dir) == (manifest.aws_endpoint_url, manifest.state_dir)
            else Ec2(manifest.aws_endpoint_url, state_dir=manifest.state_dir),
            Scontrol(manifest.slurm_bin_dir, manifest.slurm_conf),
            request["request_id"],
        )
    except Exception:
        log.exception("request %s: resume worker failed", request["request_id"])
        return 1
    shutil.rmtree(directory, ignore_errors=True)
    return 0


def serve_request(directory: Path, warm: Ec2) -> int:
    """A spare's request: a resume, or (its `kind` says) a suspend or resume-fail (suspend.py); exit code."""
    from slurm_plugin.powersave import suspend

    try:
        kind = json.loads((directory / "request.json").read_text(encoding="utf-8")).get("kind")
    except (OSError, ValueError):
        kind = None  # the resume worker reports the unreadable request
    if kind in (suspend.SUSPEND, suspend.RESUME_FAIL):
        return suspend.worker(directory, warm)
    return worker(directory, warm)


def spare(manifest_path: str) -> int:
    """A spare worker (spare.py): do the imports and make the EC2 clients now, then wait for a request."""
    from pathlib import Path

    from slurm_plugin.manifest import ManifestError, load_manifest
    from slurm_plugin.powersave import launcher, suspend, terminator  # noqa: F401  (imported now, not at the request)
    from slurm_plugin.powersave import spare as spares
    from slurm_plugin.powersave.ec2 import Ec2

    try:
        manifest = load_manifest(manifest_path)
    except ManifestError as exc:
        print(f"{NAME}: spare: {exc}", file=sys.stderr)
        return 1
    warm = Ec2(manifest.aws_endpoint_url, state_dir=manifest.state_dir)
    for region in sorted({loc.region for pool in manifest.pools for loc in pool.locations}):
        warm.client(region)
    waiting_room = spares.spares_dir(manifest.state_dir)
    code = spares.code_fingerprint()

    def still_wanted() -> bool:  # the cluster is still here and no other spare waits
        return Path(manifest_path).exists() and spares.waiting(waiting_room) == 0

    def serve() -> int:
        return spares.serve(waiting_room, lambda line: serve_request(Path(line), warm), still_wanted, next_spare)

    def next_spare() -> None:  # claimed: the next request finds a spare too
        if not still_wanted():
            return
        # forked from this one while the plugin on disk is the one this process imported; else a fresh interpreter
        pid = None if spares.code_changed(code) else spares.fork_successor(serve)
        how = "forked" if pid is not None else "started"
        if pid is None:
            pid = spares.spawn(MODULE, os.path.abspath(manifest_path), manifest.log_file)
        print(f"spare {os.getpid()}: claimed; next spare {pid} {how}", file=sys.stderr, flush=True)

    return serve()


def main(argv: list[str] | None = None) -> int:
    """Console script `slurm-resume`."""
    args = _parser().parse_args(argv)
    if args.worker:  # started by a foreground that found no spare: start one for the next request, then work
        from pathlib import Path

        prime()
        return worker(Path(args.worker))
    if args.spare:
        return spare(args.spare)
    if args.prime:
        return prime()
    if not args.hostlist:
        print(f"{NAME}: error: hostlist: missing (usage: {NAME} HOSTLIST)", file=sys.stderr)
        return 2
    return early(args.hostlist) if args.early else foreground(args.hostlist)


if __name__ == "__main__":
    sys.exit(main())
