"""The report's one sacct call and its parsing.

    sacct -X -P -n --noconvert -a -D -S <since> -E <until> --format=JobID,User,...

`-X`: allocations only (no steps); `-a`: every user's jobs; `-D`: every run of a requeued job (each held its nodes);
`-P`: `|`-separated fields. SLURM_TIME_FORMAT=%s makes Start and End epoch seconds (no time-zone guessing); a job
not started or still running has `Unknown` there. `run_sacct` is the only function that runs a process: tests pass
canned text to `parse_sacct`.
"""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

from slurm_plugin import hostlists
from slurm_plugin.cost.when import sacct_time

FIELDS = ("JobID", "User", "Account", "Partition", "NodeList", "Start", "End", "ElapsedRaw", "AllocCPUS", "State")
NO_NODES = ("", "None assigned", "(null)")


class SacctError(Exception):
    """sacct could not be run or printed something unexpected (one line)."""


@dataclass(frozen=True)
class JobRun:
    """One run of a job as sacct reports it (its allocation line)."""

    job_id: str
    user: str
    account: str
    partition: str
    nodes: tuple[str, ...]
    start: float | None  # None: not started
    end: float | None  # None: still running
    elapsed: int  # ElapsedRaw, seconds
    alloc_cpus: int
    state: str


def sacct_argv(sacct: str, since: float, until: float) -> list[str]:
    """The command line of the one sacct call."""
    window = ["-S", sacct_time(since), "-E", sacct_time(until)]
    return [sacct, "-X", "-P", "-n", "--noconvert", "-a", "-D", *window, "--format=" + ",".join(FIELDS)]


def run_sacct(since: float, until: float, bin_dir: str = "/usr/bin", slurm_conf: str | None = None) -> str:
    """sacct's output for the window; SacctError when it cannot run or fails."""
    binary = Path(bin_dir) / "sacct"
    env = {**os.environ, "SLURM_TIME_FORMAT": "%s"}
    if slurm_conf:
        env["SLURM_CONF"] = slurm_conf
    argv = sacct_argv(str(binary) if binary.exists() else "sacct", since, until)
    try:
        result = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=300, check=False)
    except FileNotFoundError:
        raise SacctError(f"not found in {bin_dir} nor on PATH (run this on the controller)") from None
    except subprocess.TimeoutExpired:
        raise SacctError("no answer within 300 s (is slurmdbd up?)") from None
    if result.returncode != 0:
        detail = (result.stderr.strip() or result.stdout.strip() or f"exit code {result.returncode}").splitlines()
        raise SacctError(detail[0])
    return result.stdout


def parse_sacct(text: str) -> list[JobRun]:
    """The runs of `sacct -P -n --format=FIELDS` output; SacctError on a line of another shape."""
    runs = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        parts = line.split("|")
        if len(parts) != len(FIELDS):
            raise SacctError(f"line {number}: {len(parts)} fields, expected {len(FIELDS)}: {line[:80]!r}")
        job_id, user, account, partition, nodelist, start, end, elapsed, cpus, state = parts
        try:
            nodes = () if nodelist in NO_NODES else tuple(hostlists.expand(nodelist))
            runs.append(
                JobRun(
                    job_id=job_id,
                    user=user,
                    account=account,
                    partition=partition,
                    nodes=nodes,
                    start=_epoch(start),
                    end=_epoch(end),
                    elapsed=int(elapsed or 0),
                    alloc_cpus=int(cpus or 0),
                    state=state.split()[0] if state.strip() else "",
                )
            )
        except ValueError as exc:
            raise SacctError(f"line {number}: {exc}") from None
    return runs


def _epoch(field: str) -> float | None:
    """Epoch seconds (SLURM_TIME_FORMAT=%s), or None for Unknown / None."""
    return float(field) if field.strip().isdigit() else None
