"""Small JSON state files in the manifest's state_dir, shared by concurrent plugin processes under one flock.

Where that directory is (`plugin_state_dir`): on the controller's disk with one controller; with two, on the
controllers' own file system beside slurmctld's StateSaveLocation, so the backup that takes over reads the very node map, claims,
cool-downs, protected pools, fleet state and event log the primary wrote, and the primary reads the backup's after
it takes control back (no stale copy on either disk). flock(2) serializes the two hosts there as it serializes the
processes of one: on NFSv4 (EFS) Linux maps it to a byte-range lock the server holds, released when its holder
exits or its host's lease expires.

- claims.json: node -> {request, pid, started} while a resume worker is launching it (so overlapping resumes skip it);
  a claim counts only while a process with that PID *and that start time* lives, so a reused PID frees it;
- nodes.json: node -> {instance_id, region, private_ip, bound_at} written after a launch (a cache: EC2 + Slurm are the
  truth; bound_at: epoch seconds when the resume bound it).
"""

from __future__ import annotations

import fcntl
import json
import os
import socket
import time
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from slurm_plugin.controller_state import controller_state_dir

LOCAL_STATE_DIR = "/var/lib/elastic-slurm"
# how long a claim of the other controller counts as alive (holder_alive): a launch and its binding, not a whole
# resume timeout (a crashed primary's claims must not hold its nodes back for long)
FOREIGN_CLAIM_SECONDS = 60.0
LOCK_FILE = "plugin.lock"
CLAIMS_FILE = "claims.json"
NODES_FILE = "nodes.json"


def plugin_state_dir(cluster: str, controllers: int) -> str:
    """The plugin's state directory of a cluster: on the controllers' own file system (render/manifest.py) when two
    controllers take turns (they need one copy), else on the controller's disk."""
    if controllers < 2:
        return LOCAL_STATE_DIR
    return controller_state_dir(cluster, "plugin")


@contextmanager
def locked(state_dir: str | Path) -> Iterator[Path]:
    """Hold the cluster-wide plugin lock (fcntl.flock; released when the block ends or the process dies)."""
    directory = Path(state_dir)
    directory.mkdir(parents=True, exist_ok=True)
    with open(directory / LOCK_FILE, "a+") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield directory
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def read_json(path: Path) -> dict[str, Any]:
    """A JSON object from `path`; a missing or corrupt file reads as empty (it is only a cache)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def write_json(path: Path, data: Mapping[str, Any]) -> None:
    """Write atomically (tmp + rename)."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(data, sort_keys=True), encoding="utf-8")
    tmp.replace(path)


def process_start(pid: int) -> str | None:
    """The start time of process `pid` (clock ticks since boot, /proc/PID/stat field 22), None if it is gone."""
    if pid <= 0:
        return None
    try:
        stat = Path(f"/proc/{pid}/stat").read_text(encoding="ascii", errors="replace")
    except OSError:
        return None
    return stat.rpartition(")")[2].split()[19]  # fields after "(comm)" start at field 3


def holder_alive(held: Mapping[str, Any], now: float | None = None) -> bool:
    """True while the process that took a claim still runs: same PID *and* same start time (PID reuse, PID 0 and
    claims without a start time from older versions count as dead). A claim of the other controller (two controllers
    share the state dir) cannot be checked in this host's /proc: it counts as alive for FOREIGN_CLAIM_SECONDS, as
    its worker may still be launching (KillMode=process keeps workers through a slurmctld restart); a node left
    behind by a dead host is then Slurm's ResumeTimeout's, never launched twice."""
    host = held.get("host")
    if host is not None and host != socket.gethostname():
        try:
            at = float(held.get("at", 0) or 0)
        except (TypeError, ValueError):
            return False
        return (time.time() if now is None else now) - at < FOREIGN_CLAIM_SECONDS
    try:
        pid = int(held.get("pid", 0) or 0)
    except (TypeError, ValueError):
        return False
    started = held.get("started")
    return started is not None and process_start(pid) == started


def claim(state_dir: str | Path, nodes: Iterable[str], request_id: str) -> tuple[list[str], list[str]]:
    """Claim nodes for this request; returns (claimed, busy). Claims of dead processes are taken over."""
    me = process_start(os.getpid())
    with locked(state_dir) as directory:
        path = directory / CLAIMS_FILE
        claims = read_json(path)
        mine: list[str] = []
        busy: list[str] = []
        for node in nodes:
            held = claims.get(node)
            if isinstance(held, dict) and held.get("request") != request_id and holder_alive(held):
                busy.append(node)
                continue
            claims[node] = {
                "request": request_id,
                "pid": os.getpid(),
                "started": me,
                "host": socket.gethostname(),
                "at": time.time(),
            }
            mine.append(node)
        write_json(path, claims)
    return mine, busy


def release(state_dir: str | Path, nodes: Iterable[str], request_id: str) -> None:
    """Drop this request's claims on `nodes`."""
    with locked(state_dir) as directory:
        path = directory / CLAIMS_FILE
        claims = read_json(path)
        for node in nodes:
            held = claims.get(node)
            if isinstance(held, dict) and held.get("request") == request_id:
                del claims[node]
        write_json(path, claims)


def remember_instances(state_dir: str | Path, entries: Mapping[str, Mapping[str, str]]) -> None:
    """Record node -> instance facts after a launch."""
    with locked(state_dir) as directory:
        path = directory / NODES_FILE
        known = read_json(path)
        known.update({node: dict(value) for node, value in entries.items()})
        write_json(path, known)


def node_map(state_dir: str | Path) -> dict[str, dict[str, str]]:
    """The whole node map: node -> {instance_id, region, private_ip, bound_at} (complete entries only), read once."""
    with locked(state_dir) as directory:
        known = read_json(directory / NODES_FILE)
    return {
        node: {k: str(v) for k, v in entry.items()}
        for node, entry in known.items()
        if isinstance(entry, dict) and entry.get("instance_id") and entry.get("region")
    }


def forget_instances(
    state_dir: str | Path, nodes: Iterable[str], only: Mapping[str, Mapping[str, str]] | None = None
) -> dict[str, dict[str, str]]:
    """Remove nodes from the node map; returns what was known about them. With `only` (node -> its entry as read
    earlier), a node is removed only while the map still holds that entry: the same instance, bound at the same time
    (a later resume may have bound it again, even to the same instance)."""
    with locked(state_dir) as directory:
        path = directory / NODES_FILE
        known = read_json(path)
        gone = {}
        for node in list(nodes):
            entry = known.get(node)
            if isinstance(entry, dict) and (only is None or _same_binding(entry, only.get(node))):
                gone[node] = known.pop(node)
        write_json(path, known)
    return gone


def _same_binding(entry: Mapping[str, Any], read: Mapping[str, str] | None) -> bool:
    return read is not None and all(str(entry.get(k, "")) == read.get(k, "") for k in ("instance_id", "bound_at"))
