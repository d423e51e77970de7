"""Which Slurm node a booting instance is: one small file per instance on the shared file system.

The resume worker writes `<dir>/<instance id>` (the node name and a newline) for every instance it binds, before it
sets the node's NodeAddr; the node's bootstrap (assets/bootstrap/elastic-slurm-node-bootstrap) reads the file named by
its own instance id and asks Slurm about that one node only. Without it, every booting instance would have to read the
whole node table from slurmctld, again and again until its NodeAddr appears: at 10,000 nodes a self-inflicted load.
Instance ids are never reused, so a file can never name the wrong node; suspend and the cluster manager remove the
files of instances that are gone (`withdraw`, `sweep`).

Files are written by rename (a reader never sees half a name). On EFS each file is a few round trips: big binds are
written by a small thread pool.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

THREADS = 16
PARALLEL_FROM = 64  # binds at least this big are written by THREADS threads
_INSTANCE_ID = re.compile(r"^i-[0-9a-f]{8,17}$")


def _write(directory: Path, instance_id: str, node: str) -> None:
    temporary = directory / f".{instance_id}.tmp"
    temporary.write_text(f"{node}\n", encoding="utf-8")
    os.chmod(temporary, 0o644)
    os.replace(temporary, directory / instance_id)


def publish(directory: str | Path, nodes_by_instance: Mapping[str, str]) -> None:
    """Write `<directory>/<instance id>` = node name for every entry (the directory is created when missing)."""
    if not nodes_by_instance:
        return
    target = Path(directory)
    target.mkdir(parents=True, exist_ok=True)
    items = list(nodes_by_instance.items())
    if len(items) < PARALLEL_FROM:
        for instance_id, node in items:
            _write(target, instance_id, node)
        return
    with ThreadPoolExecutor(THREADS) as pool:
        for future in [pool.submit(_write, target, iid, node) for iid, node in items]:
            future.result()


def withdraw(directory: str | Path, instance_ids: Iterable[str]) -> None:
    """Remove the files of these instances (missing ones are fine)."""
    for instance_id in instance_ids:
        (Path(directory) / instance_id).unlink(missing_ok=True)


def published(directory: str | Path) -> dict[str, str]:
    """Every instance id with a file -> the node it names (unreadable files skipped)."""
    found: dict[str, str] = {}
    try:
        entries = list(os.scandir(directory))
    except FileNotFoundError:
        return found
    for entry in entries:
        if _INSTANCE_ID.match(entry.name):
            try:
                found[entry.name] = Path(entry.path).read_text(encoding="utf-8").strip()
            except OSError:
                continue
    return found


def sweep(directory: str | Path, live_instance_ids: Iterable[str], older_than: float) -> list[str]:
    """Remove the files of instances not in `live_instance_ids` written before `older_than` (epoch seconds: a file
    written after the caller listed EC2 belongs to an instance it could not see yet); the instance ids removed."""
    live = set(live_instance_ids)
    stale = []
    try:
        entries = list(os.scandir(directory))
    except FileNotFoundError:
        return []
    for entry in entries:
        if _INSTANCE_ID.match(entry.name) and entry.name not in live:
            try:
                if entry.stat().st_mtime < older_than:
                    stale.append(entry.name)
            except FileNotFoundError:
                continue
    withdraw(directory, stale)
    return stale
