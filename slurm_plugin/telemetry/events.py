"""The plugin's event log: one JSON object per line in `events.jsonl` in the manifest's state_dir.

The resume and suspend workers and the cluster manager append what they did to EC2 — each CreateFleet/RunInstances
call, each capacity error, each throttled API answer, each instance handed to a node, each instance terminated — so
that the metrics exporter can count them (slurm_plugin/exporter), `elastic-slurm cost` can tell which instance type,
AZ and market ran a node at a given time, and the timeline picture can show launches and errors over time.

Record shapes (every record has `t`, epoch seconds, and `event`):

    launch_call     request pool region market api requested launched azs seconds   (azs: AZ -> instances)
    capacity_error  request pool region market az instance_type code      (az / instance_type "" when EC2 named none)
    throttled       api region
    node_launched   request pool node instance_id instance_type az region market seconds   (seconds: resume → bound)
    terminated      node pool instance_id region reason   (reason: suspend, resume-fail, unneeded, the manager's
                                                           counter, or gone: it had ended already when suspended)
    boot_failed     pool node

Appends are single `write` calls on an O_APPEND descriptor, so concurrent writers never interleave lines. When the
file passes MAX_BYTES it is renamed to `events.jsonl.1` (one older generation is kept; readers read both). Losing
the log loses history — counters, the cost ledger — never correctness: recording never raises.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
import time
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import IO, Any

EVENTS_FILE = "events.jsonl"
ROTATE_LOCK = "events.lock"
MAX_BYTES = 64 * 1024 * 1024
KINDS = ("launch_call", "capacity_error", "throttled", "node_launched", "terminated", "boot_failed")

log = logging.getLogger(__name__)


def record(state_dir: str | Path, events: Iterable[Mapping[str, Any]], now: float | None = None) -> None:
    """Append `events` (each gets `t` unless it has one); never raises (a full disk must not fail a launch)."""
    at = time.time() if now is None else now
    lines = "".join(json.dumps({"t": at, **event}, sort_keys=True) + "\n" for event in events)
    if not lines:
        return
    path = Path(state_dir) / EVENTS_FILE
    try:
        _rotate_if_big(path)
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            _write_all(fd, lines.encode())
        finally:
            os.close(fd)
    except OSError as exc:
        log.warning("event log %s: %s (events not recorded)", path, exc.strerror or exc)


def _write_all(fd: int, data: bytes) -> None:
    """Write everything (a short write continues where it stopped); when a write fails half-way, end the torn line
    so the next append starts a line of its own (the torn one is skipped by `parse`)."""
    done = 0
    try:
        while done < len(data):
            done += os.write(fd, data[done:])
    except OSError:
        if done:
            with contextlib.suppress(OSError):
                os.write(fd, b"\n")
        raise


def _rotate_if_big(path: Path) -> None:
    try:
        if path.stat().st_size < MAX_BYTES:
            return
    except FileNotFoundError:
        return
    with open(path.with_name(ROTATE_LOCK), "a+") as lock:  # its own lock: callers may hold the plugin lock
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            if path.stat().st_size >= MAX_BYTES:
                path.replace(path.with_name(EVENTS_FILE + ".1"))
        except FileNotFoundError:
            pass


def parse(line: str) -> dict[str, Any] | None:
    """One record, or None for a torn or foreign line."""
    try:
        data = json.loads(line)
    except ValueError:
        return None
    if not isinstance(data, dict) or data.get("event") not in KINDS or not isinstance(data.get("t"), int | float):
        return None
    return data


def read_all(state_dir: str | Path, since: float | None = None) -> Iterator[dict[str, Any]]:
    """Every record of both generations, oldest first (optionally only those at or after `since`)."""
    directory = Path(state_dir)
    for path in (directory / (EVENTS_FILE + ".1"), directory / EVENTS_FILE):
        for event in _read_file(path):
            if since is None or event["t"] >= since:
                yield event


def _read_file(path: Path) -> list[dict[str, Any]]:
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return []
    return [event for line in text.splitlines() if (event := parse(line)) is not None]


class Tail:
    """Reads the log incrementally: `read()` returns the records appended since the last call (on the first call,
    all of them). It keeps the file open, so a rotation loses nothing: the rest of the renamed file is read before
    the new one is opened."""

    def __init__(self, state_dir: str | Path) -> None:
        self.path = Path(state_dir) / EVENTS_FILE
        self._handle: IO[str] | None = None
        self._pending = ""  # a line whose end is not written yet
        self._older_read = False

    def read(self) -> list[dict[str, Any]]:
        """New complete records."""
        if self._handle is None:
            out: list[dict[str, Any]] = []
            if not self._older_read:  # the first call: the older generation too, once
                self._older_read = True
                out.extend(_read_file(self.path.with_name(EVENTS_FILE + ".1")))
            return out + self._open_from_start()
        out = self._drain()
        try:
            replaced = os.stat(self.path).st_ino != os.fstat(self._handle.fileno()).st_ino
        except FileNotFoundError:
            replaced = False
        if replaced:
            out.extend(self._drain())  # what a writer that opened the old file before the rename appended since
            self._handle.close()
            self._handle, self._pending = None, ""
            out.extend(self._open_from_start())
        return out

    def _open_from_start(self) -> list[dict[str, Any]]:
        try:
            self._handle = open(self.path, encoding="utf-8", errors="replace")  # noqa: SIM115 (kept open between reads)
        except OSError:
            return []
        return self._drain()

    def _drain(self) -> list[dict[str, Any]]:
        assert self._handle is not None
        text = self._pending + self._handle.read()
        lines = text.split("\n")
        self._pending = lines.pop()
        return [event for line in lines if (event := parse(line)) is not None]

    def close(self) -> None:
        """Close the file."""
        if self._handle is not None:
            self._handle.close()
            self._handle = None
