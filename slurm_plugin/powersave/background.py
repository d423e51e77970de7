"""The fast foreground of the plugin's entry points: validate input, hand work to a detached worker, return.

slurmctld waits for ResumeProgram, so this path imports neither boto3 nor pydantic (nor pathlib): the manifest is
read as plain JSON here and validated in full by the worker.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from typing import Any

MANIFEST_ENV = "ELASTIC_SLURM_MANIFEST"
DEFAULT_MANIFEST = "/etc/elastic-slurm/manifest.json"
MANIFEST_SCHEMA_VERSION = 1  # the manifest format this plugin reads (slurm_plugin.manifest writes it)
MANIFEST_ERROR_CODE = "ManifestError"
NO_SPARES, USE_SPARES, ONLY_SPARES = "none", "use", "only"  # spawn_worker's `spares` (spare.py)


def note(log_file: str, name: str, level: str, message: str, stderr: bool = True) -> None:
    """One log line to the log file (same format as slurm_plugin.logs) and to stderr; no `logging` import needed."""
    now = time.time()
    stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(now)) + f",{int(now * 1000) % 1000:03d}"
    try:
        os.makedirs(os.path.dirname(log_file) or ".", exist_ok=True)
        with open(log_file, "a", encoding="utf-8") as handle:
            handle.write(f"{stamp} {os.getpid()} {level} {name}: {message}\n")
    except OSError as exc:
        print(f"{name}: cannot write log file {log_file}: {exc.strerror}", file=sys.stderr)
    if stderr:
        print(f"{name}: {level} {message}", file=sys.stderr)


class InputError(Exception):
    """Bad input (one-line message); the entry point exits non-zero without touching anything."""


def manifest_path() -> str:
    """Where the manifest is: $ELASTIC_SLURM_MANIFEST or the default path."""
    return os.environ.get(MANIFEST_ENV) or DEFAULT_MANIFEST


def peek_manifest(path: str) -> dict[str, Any]:
    """The manifest as plain JSON with the fields the foreground needs checked (InputError otherwise)."""
    try:
        with open(path, encoding="utf-8") as handle:
            data = json.load(handle)
    except OSError as exc:
        raise InputError(f"manifest {path}: cannot read: {exc.strerror}") from None
    except ValueError as exc:
        raise InputError(f"manifest {path}: not valid JSON: {exc}") from None
    if not isinstance(data, dict):
        raise InputError(f"manifest {path}: not a JSON object")
    for key in ("state_dir", "log_file", "pools"):
        if key not in data:
            raise InputError(f"manifest {path}: missing field {key}")
    if data.get("schema_version") != MANIFEST_SCHEMA_VERSION:
        raise InputError(
            f"manifest {path}: schema_version {data.get('schema_version')!r} is not supported "
            f"(this plugin reads {MANIFEST_SCHEMA_VERSION}); re-run slurm-render"
        )
    return data


def power_down_unlaunchable(path: str, hostlist: str, why: str) -> str:
    """Power the nodes down with a `(Code:ManifestError)` reason, so slurmctld logs why and requeues their jobs
    instead of waiting ResumeTimeout for nodes nobody launches. Uses the manifest's slurm_bin_dir when the file still
    says it, else `scontrol` on PATH. Returns what happened, for the one error line."""
    from slurm_plugin.hostlists import expand

    try:
        expand(hostlist)
    except ValueError as exc:
        return f"nodes not powered down: {exc}"
    bin_dir = None
    try:
        with open(path, encoding="utf-8") as handle:
            data = json.load(handle)
        bin_dir = data.get("slurm_bin_dir") if isinstance(data, dict) else None
    except (OSError, ValueError):
        pass
    search = os.environ.get("PATH") or "/usr/bin:/bin"
    scontrol = shutil.which("scontrol", path=str(bin_dir) if bin_dir else search)
    if scontrol is None:
        return "scontrol not found: nodes not powered down"
    reason = f"(Code:{MANIFEST_ERROR_CODE}) {why}"[:200]
    args = [scontrol, "update", f"nodename={hostlist}", "state=POWER_DOWN_FORCE", f"reason={reason}"]
    try:
        done = subprocess.run(args, capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"nodes not powered down: {exc}"
    if done.returncode != 0:
        return f"nodes not powered down: {(done.stderr or done.stdout).strip()[:120]}"
    return "nodes powered down"


def unknown_nodes(manifest: dict[str, Any], names: list[str]) -> list[str]:
    """Names that are not `{node_prefix}{1..max_nodes}` of any pool of the manifest."""
    limits = {str(p.get("node_prefix")): int(p.get("max_nodes", 0)) for p in manifest.get("pools", [])}
    bad = []
    for name in names:
        prefix = name.rstrip("0123456789")
        index = name[len(prefix) :]
        limit = limits.get(prefix)
        if limit is None or not index or index.startswith("0") or not 1 <= int(index) <= limit:
            bad.append(name)
    return bad


def new_request_id() -> str:
    """A short unique id for one invocation (also the prefix of its EC2 ClientTokens)."""
    return time.strftime("%Y%m%dT%H%M%S", time.gmtime()) + "-" + os.urandom(3).hex()


def spawn_worker(
    module: str,
    manifest: dict[str, Any],
    request: dict[str, Any],
    resume_file: str | None,
    spares: str = NO_SPARES,
) -> int | None:
    """Write the request to state_dir/requests/<id>/ and start `python -m module --worker DIR` detached; its pid.
    With `spares` USE_SPARES, a waiting spare worker (spare.py) takes the request instead when there is one; with
    ONLY_SPARES, a waiting spare takes it or nothing is done (None). The next spare is not started here: the process
    that serves the request starts it after this has returned (spare.serve's `on_claimed`, resume.main's worker)."""
    directory = os.path.join(manifest["state_dir"], "requests", request["request_id"])
    os.makedirs(directory, exist_ok=True)
    if resume_file:
        copy = os.path.join(directory, "resume.json")
        try:
            shutil.copyfile(resume_file, copy)
            request["resume_file"] = copy
        except OSError:
            request["resume_file"] = None  # it may already be gone; the worker goes best effort
    with open(os.path.join(directory, "request.json"), "w", encoding="utf-8") as handle:
        json.dump(request, handle)
    log_path = str(manifest["log_file"])
    os.makedirs(os.path.dirname(log_path) or ".", exist_ok=True)
    if spares != NO_SPARES:
        from slurm_plugin.powersave import spare

        waiting_room = spare.spares_dir(str(manifest["state_dir"]))
        taken = spare.hand_to_spare(waiting_room, directory)
        if spares == ONLY_SPARES and taken is None:
            shutil.rmtree(directory, ignore_errors=True)
        if spares == ONLY_SPARES or taken is not None:
            return taken
    return start_detached([sys.executable, "-m", module, "--worker", directory], log_path)


def start_detached(argv: list[str], log_path: str) -> int:
    """Start `argv` in a session of its own, its output appended to `log_path`, nothing on stdin; its pid."""
    with open(log_path, "ab") as log:
        process = subprocess.Popen(
            argv, stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True, close_fds=True
        )
    return process.pid


def hand_off(
    name: str,
    module: str,
    hostlist: str,
    resume_file: str | None,
    extra: dict[str, Any],
    power_down_on_bad_manifest: bool = False,
    spares: str = NO_SPARES,
) -> int:
    """The whole foreground of a power-save program: validate, hand the nodes to a detached worker, return.

    Bad manifest: exit 1 (one line on stderr; for resume, the nodes are powered down with the reason). Bad hostlist or a node the manifest does not know: one line in the log
    and on stderr, exit 2, nothing touched. Otherwise the worker (`python -m module --worker DIR`) gets the request.
    """
    from slurm_plugin.hostlists import compress, expand

    path = manifest_path()
    try:
        manifest = peek_manifest(path)
    except InputError as exc:
        done = f" ({power_down_unlaunchable(path, hostlist, str(exc))})" if power_down_on_bad_manifest else ""
        print(f"{name}: error: {exc}{done}", file=sys.stderr)
        return 1
    log_file = str(manifest["log_file"])
    try:
        nodes = expand(hostlist)
    except ValueError as exc:
        note(log_file, name, "ERROR", f"{exc} (nothing done)")
        return 2
    bad = unknown_nodes(manifest, nodes)
    if bad:
        note(log_file, name, "ERROR", f"unknown nodes {compress(bad)}: not in manifest {path} (nothing done)")
        return 2
    request = {
        "request_id": new_request_id(),
        "requested_at": time.time(),
        "hostlist": hostlist,
        "manifest": os.path.abspath(path),
        **extra,
    }
    pid = spawn_worker(module, manifest, request, resume_file, spares)
    if pid is None:
        message = f"{name} of {len(nodes)} nodes: no spare worker waiting, nothing done"
    else:
        message = f"request {request['request_id']}: {name} of {len(nodes)} nodes handed to worker pid {pid}"
    note(log_file, name, "INFO", message, False)
    return 0
