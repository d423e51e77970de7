"""A cold-started job's timeline, read from the local cloud's logs (bench/cold_start.py).

Each moment comes from the program that lived it: slurmctld.log (allocation, registration, end of the prolog), the
plugin's log (ResumeProgram, its worker, the launch answer, NodeAddr), the plugin's event log (which instance the node
got), the instance runner's log (boot), slurmd's log (start). Every log here is in UTC with millisecond stamps.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

_SLURM_STAMP = re.compile(r"^\[(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3})\] (.*)$")
_PY_STAMP = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}) (.*)$")
_RPC_LINE = re.compile(r"^\s*([A-Z][A-Z0-9_]+)\s+\(\s*\d+\)\s+count:(\d+)")


def _slurm_time(text: str) -> float:
    return datetime.strptime(text, "%Y-%m-%dT%H:%M:%S.%f").replace(tzinfo=UTC).timestamp()


def _py_time(text: str) -> float:
    return datetime.strptime(text, "%Y-%m-%d %H:%M:%S,%f").replace(tzinfo=UTC).timestamp()


def _lines(path: Path, stamp: re.Pattern[str], parse: Any) -> list[tuple[float, str]]:
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return []
    found = []
    for line in text.splitlines():
        match = stamp.match(line)
        if match:
            found.append((parse(match.group(1)), match.group(2)))
    return found


def _first(lines: list[tuple[float, str]], pattern: str) -> float | None:
    regex = re.compile(pattern)
    return next((t for t, text in lines if regex.search(text)), None)


@dataclass
class Phases:
    """The moments of one cold start (epoch seconds; None when not found) and the phases between them."""

    NAMES = (
        "schedule (sbatch→allocated)",
        "ResumeProgram called",
        "worker start",
        "launch call",
        "bind (NodeAddr set)",
        "emulated boot + runner",
        "user data + bootstrap",
        "slurmd registration",
        "prolog sees node up",
        "launch seen RUNNING",
    )
    job_id: str
    node: str
    moments: dict[str, float | None] = field(default_factory=dict)

    ORDER = (
        "submitted",
        "allocated",
        "resume_called",
        "worker_started",
        "launched",
        "addr_set",
        "booting",
        "slurmd_started",
        "registered",
        "configured",
        "running",
    )

    @property
    def total(self) -> float | None:
        start, end = self.moments.get("submitted"), self.moments.get("running")
        return round(end - start, 3) if start is not None and end is not None else None

    def durations(self) -> dict[str, float | None]:
        """Each phase's length: from the moment before it to its own end."""
        result: dict[str, float | None] = {}
        for name, (begin, end) in zip(self.NAMES, zip(self.ORDER, self.ORDER[1:], strict=False), strict=True):
            a, b = self.moments.get(begin), self.moments.get(end)
            result[name] = round(b - a, 3) if a is not None and b is not None else None
        return result

    def as_dict(self) -> dict[str, Any]:
        start = self.moments.get("submitted") or 0.0
        return {
            "job_id": self.job_id,
            "node": self.node,
            "submit_to_running_s": self.total,
            "moments_s": {k: (round(v - start, 3) if v is not None else None) for k, v in self.moments.items()},
            "phases_s": self.durations(),
        }


def _instance_of(log_dir: Path, node: str) -> str | None:
    """The instance id the node got, from the plugin's event log (node_launched)."""
    for path in sorted(log_dir.parent.rglob("events.jsonl*")):
        for line in path.read_text(errors="replace").splitlines():
            try:
                record = json.loads(line)
            except ValueError:
                continue
            if record.get("event") == "node_launched" and record.get("node") == node:
                return str(record.get("instance_id"))
    return None


def job_phases(log_dir: Path, job_id: str, node: str, submitted: float, running: float | None) -> Phases:
    """The timeline of one job cold-started on `node`."""
    ctld = _lines(log_dir / "slurmctld.log", _SLURM_STAMP, _slurm_time)
    plugin = _lines(log_dir / "plugin.log", _PY_STAMP, _py_time)
    runner = _lines(log_dir / "instance-runner.log", _PY_STAMP, _py_time)
    slurmd = _lines(log_dir / f"slurmd-{node}.log", _SLURM_STAMP, _slurm_time)
    job = re.escape(job_id)
    name = re.escape(node)
    pool_line = next(
        ((t, text) for t, text in plugin if re.search(rf"request (\S+) pool \S+: \d+ nodes .* {name}$", text)), None
    )
    request = re.search(r"request (\S+) pool", pool_line[1]).group(1) if pool_line else None  # type: ignore[union-attr]
    rid = re.escape(request or "-")
    instance = _instance_of(log_dir, node)
    moments: dict[str, float | None] = {
        "submitted": submitted,
        "allocated": _first(ctld, rf"(Allocate JobId={job} |Started JobId={job} )"),
        "resume_called": _first(plugin, rf"request {rid}: slurm-resume( --early)? of \d+ nodes handed"),
        "worker_started": pool_line[0] if pool_line else None,
        "launched": _first(plugin, rf"request {rid} pool \S+: (CreateFleet|RunInstances) .* -> [1-9]"),
        "addr_set": _first(plugin, rf"request {rid}: NodeAddr set for .*"),
        "booting": _first(runner, rf"booting {re.escape(instance)} ") if instance else None,
        "slurmd_started": _first(slurmd, r"slurmd started on"),
        "registered": _first(ctld, rf"Node {name} now responding"),
        "configured": _first(ctld, rf"Configuration for JobId={job} (is )?complete"),
        "running": running,
    }
    return Phases(job_id, node, moments)


def rpc_counts(sdiag: str) -> dict[str, int]:
    """sdiag's "Remote Procedure Call statistics by message type": message type -> count."""
    counts: dict[str, int] = {}
    section = False
    for line in sdiag.splitlines():
        if line.startswith("Remote Procedure Call statistics by message type"):
            section = True
            continue
        if section and line.startswith("Remote Procedure Call statistics by user"):
            break
        match = _RPC_LINE.match(line) if section else None
        if match:
            counts[match.group(1)] = int(match.group(2))
    return counts
