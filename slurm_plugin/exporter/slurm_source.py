"""What the exporter reads from Slurm: one client call per source per scrape, never one per node or per job.

| source   | the call                                              | cost at 10,000 nodes          |
|----------|-------------------------------------------------------|-------------------------------|
| nodes    | `sinfo -h -N -o %N|%P|%T` (one line per node+partition) | one RPC, ~10,000 short lines  |
| jobs     | `squeue -h -r -t all -o ...`, SLURM_TIME_FORMAT=%s       | one RPC                        |
| sdiag    | `sdiag`                                               | one RPC                        |
| licenses | `scontrol -o show licenses`                           | one RPC                        |
| slurmdbd | `sacctmgr -n ping`                                    | one RPC to slurmdbd            |

The parsers are pure functions over the commands' text (tests feed them recorded output); `SlurmReader` runs the
commands with a timeout and raises SourceError (one line) when one fails.
"""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

NODE_FORMAT = "%N|%P|%T"
JOB_FORMAT = "%i|%P|%T|%r|%u|%a|%V|%S"
TIMEOUT = 30
NODE_STATES = (
    "idle", "allocated", "mixed", "completing", "down", "drained", "draining", "powered_down", "powering_up",
    "powering_down", "reserved", "other",
)  # fmt: skip
_BASE_STATES = {
    "idle": "idle", "planned": "idle", "allocated": "allocated", "mixed": "mixed", "completing": "completing",
    "down": "down", "fail": "down", "failing": "draining", "drained": "drained", "draining": "draining",
    "reserved": "reserved", "maint": "reserved",
}  # fmt: skip
_FLAGS = "*~#%!$@^-+"
_SDIAG_TOTALS = {
    "Server thread count": "server_threads",
    "Agent queue size": "agent_queue_size",
    "DBD Agent queue size": "dbd_agent_queue_size",
    "Jobs submitted": "jobs_submitted",
    "Jobs started": "jobs_started",
    "Jobs completed": "jobs_completed",
    "Jobs failed": "jobs_failed",
}
_SDIAG_CYCLE = {"Last cycle": "last", "Max cycle": "max", "Mean cycle": "mean"}
_RPC_LINE = re.compile(r"^\s+(\S+)\s+\(\s*\d+\)\s+count:(\d+)\s+ave_time:\d+\s+total_time:(\d+)")
_LICENSE_FIELD = re.compile(r"(\w+)=(\S*)")


class SourceError(Exception):
    """A Slurm client call failed (one line)."""


def node_state(raw: str) -> str:
    """sinfo's long state with flags (idle~, allocated#, down*, mixed%) → one of NODE_STATES."""
    text = raw.lower()
    base = text.rstrip(_FLAGS)
    flags = text[len(base) :]
    base = _BASE_STATES.get(base.split("+")[0], "other")
    if "~" in flags:
        return "powered_down" if base == "idle" else "down"  # down~ / drained~: powered off and unusable
    if "#" in flags:
        return "powering_up"
    if "%" in flags or "!" in flags:
        return "powering_down"
    return base


@dataclass(frozen=True)
class NodeRow:
    """One node in one partition."""

    name: str
    partition: str
    state: str


def parse_nodes(text: str) -> list[NodeRow]:
    """`sinfo -h -N -o %N|%P|%T` → rows (the default partition's trailing '*' dropped)."""
    rows = []
    for line in text.splitlines():
        parts = line.strip().split("|")
        if len(parts) == 3 and parts[0]:
            rows.append(NodeRow(parts[0], parts[1].rstrip("*"), node_state(parts[2])))
    return rows


# Job states that are over: such jobs are listed by `squeue -t all` until MinJobAge, counted only for their wait
FINISHED_STATES = frozenset({
    "completed", "cancelled", "failed", "timeout", "node_fail", "preempted", "boot_fail", "deadline", "out_of_memory",
})  # fmt: skip


@dataclass(frozen=True)
class JobRow:
    """One job (array tasks one by one), times in epoch seconds (None when Slurm has none)."""

    job_id: str
    partition: str
    state: str
    reason: str
    user: str
    account: str
    submitted: float | None
    started: float | None


def _epoch(text: str) -> float | None:
    try:
        value = float(text)
    except ValueError:
        return None
    return value if value > 0 else None


def _reason(text: str) -> str:
    """A pending reason without its details: 'ReqNodeNotAvail, UnavailableNodes:cpu-[1-9]' → 'ReqNodeNotAvail' (one
    label value per reason, not per node list)."""
    return text.split(",")[0].strip()


def parse_jobs(text: str) -> list[JobRow]:
    """`squeue -h -r -o JOB_FORMAT` (SLURM_TIME_FORMAT=%s) → rows; the pending reason only for pending jobs."""
    rows = []
    for line in text.splitlines():
        parts = line.strip().split("|")
        if len(parts) != 8 or not parts[0]:
            continue
        job_id, partition, state, reason, user, account, submitted, started = parts
        state = state.lower()
        rows.append(
            JobRow(job_id, partition, state, _reason(reason) if state == "pending" else "", user, account,
                   _epoch(submitted), _epoch(started))
        )  # fmt: skip
    return rows


@dataclass
class Sdiag:
    """slurmctld's scheduler statistics (times in seconds)."""

    totals: dict[str, float] = field(default_factory=dict)
    cycles: dict[tuple[str, str], float] = field(default_factory=dict)  # (main|backfill, last|max|mean) -> seconds
    queue_length: float = 0.0
    rpc_count: dict[str, float] = field(default_factory=dict)
    rpc_seconds: dict[str, float] = field(default_factory=dict)
    rpc_user_count: dict[str, float] = field(default_factory=dict)


def parse_sdiag(text: str) -> Sdiag:
    """`sdiag` → Sdiag (microseconds converted to seconds)."""
    out = Sdiag()
    section = ""
    for line in text.splitlines():
        stripped = line.strip()
        if stripped.startswith("Main schedule statistics"):
            section = "main"
            continue
        if stripped.startswith("Backfilling stats"):
            section = "backfill"
            continue
        if stripped.startswith("Remote Procedure Call statistics by message type"):
            section = "rpc_type"
            continue
        if stripped.startswith("Remote Procedure Call statistics by user"):
            section = "rpc_user"
            continue
        if stripped.startswith("Pending RPC statistics"):
            section = ""
            continue
        if section in ("rpc_type", "rpc_user"):
            match = _RPC_LINE.match(line)
            if match:
                name, count, total = match.group(1), float(match.group(2)), float(match.group(3)) / 1e6
                if section == "rpc_type":
                    out.rpc_count[name], out.rpc_seconds[name] = count, total
                else:
                    out.rpc_user_count[name] = count
            continue
        key, sep, value = stripped.partition(":")
        if not sep:
            continue
        number = _number(value)
        if number is None:
            continue
        if key in _SDIAG_TOTALS and not line.startswith("\t"):
            out.totals[_SDIAG_TOTALS[key]] = number
        elif section in ("main", "backfill") and key in _SDIAG_CYCLE:
            out.cycles[(section, _SDIAG_CYCLE[key])] = number / 1e6
        elif section == "main" and key == "Last queue length":
            out.queue_length = number
    return out


def _number(text: str) -> float | None:
    try:
        return float(text.split()[0])
    except (ValueError, IndexError):
        return None


@dataclass(frozen=True)
class LicenseRow:
    """One license as slurmctld counts it."""

    name: str
    total: float
    used: float


def parse_licenses(text: str) -> list[LicenseRow]:
    """`scontrol -o show licenses` → rows ('No licenses configured' → none)."""
    rows = []
    for line in text.splitlines():
        fields = dict(_LICENSE_FIELD.findall(line))
        if "LicenseName" in fields:
            rows.append(LicenseRow(fields["LicenseName"], _number(fields.get("Total", "0")) or 0.0,
                                   _number(fields.get("Used", "0")) or 0.0))  # fmt: skip
    return rows


class SlurmReader:
    """Runs the Slurm clients (from `bin_dir`, with `slurm_conf` when given)."""

    def __init__(self, bin_dir: str, slurm_conf: str | None = None) -> None:
        self.bin_dir = Path(bin_dir)
        self.env = {**os.environ, "SLURM_TIME_FORMAT": "%s"}
        if slurm_conf:
            self.env["SLURM_CONF"] = slurm_conf

    def run(self, *argv: str) -> str:
        """stdout of one client call; SourceError naming the command otherwise."""
        command = [str(self.bin_dir / argv[0]), *argv[1:]]
        try:
            done = subprocess.run(command, capture_output=True, text=True, timeout=TIMEOUT, env=self.env, check=False)
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise SourceError(f"{argv[0]}: {exc}") from None
        if done.returncode != 0:
            last = (done.stderr.strip().splitlines() or [f"exit {done.returncode}"])[-1]
            raise SourceError(f"{' '.join(argv[:2])}: {last}")
        return done.stdout

    def nodes(self) -> list[NodeRow]:
        """Every node in every partition."""
        return parse_nodes(self.run("sinfo", "-h", "-N", "-o", NODE_FORMAT))

    def jobs(self) -> list[JobRow]:
        """Every job slurmctld still holds (array tasks one by one), finished ones included: slurmctld keeps them
        MinJobAge (300 s) after they end, so a job shorter than the scrape interval still shows when it started."""
        return parse_jobs(self.run("squeue", "-h", "-r", "-t", "all", "-o", JOB_FORMAT))

    def sdiag(self) -> Sdiag:
        """Scheduler statistics."""
        return parse_sdiag(self.run("sdiag"))

    def licenses(self) -> list[LicenseRow]:
        """License counts."""
        return parse_licenses(self.run("scontrol", "-o", "show", "licenses"))

    def slurmdbd_up(self) -> bool:
        """Whether slurmdbd answers."""
        try:
            return " is UP" in self.run("sacctmgr", "-n", "ping")
        except SourceError:
            return False


def count(rows: Iterable[tuple[str, ...]]) -> dict[tuple[str, ...], int]:
    """How often each label tuple occurs."""
    out: dict[tuple[str, ...], int] = {}
    for row in rows:
        out[row] = out.get(row, 0) + 1
    return out
