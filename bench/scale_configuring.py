"""The starting-jobs phase of bench/scale_10k.py: thousands of jobs CONFIGURING at once on booting nodes.

Submits `jobs` single-node batch jobs (arrays of at most ARRAY_SIZE tasks, Slurm's default MaxArraySize) to one
partition of powered-down nodes. slurmctld allocates them, calls ResumeProgram (the plugin launches the instances in
the emulated EC2) and, with `slurm.early_start` on, runs one PrologSlurmctld per job; no slurmd runs in this bench, so
every job stays CONFIGURING. Once they all are (or `timeout`), it measures for `window` seconds: slurmctld's CPU (and
its slurmscriptd's, which runs the prologs), the boot watch's CPU, the RPC rate by message type (sdiag deltas), and
the number and memory of prolog processes. Then it cancels the jobs and records how long the prologs take to end
(the boot watch tells them `stop` within its JOB_GAP). Run it once with early_start on and once off
(bench/configs/scale-10k-no-early-start.yaml): the difference is the cost of early start at that scale.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from bench import scale_watch as watch
from bench.scale_phases import Context, PhaseError
from bench.timeline_logs import rpc_counts

ARRAY_SIZE = 1000  # tasks per sbatch --array (Slurm's default MaxArraySize is 1001)
NAME = "cfbench"
PROLOG = "prolog-wait-for-boot"


def prolog_processes(scriptd: int | None) -> list[int]:
    """PIDs of the PrologSlurmctld scripts this cloud's slurmscriptd runs (this host sees the local cloud's processes;
    another cloud on the machine, e.g. an e2e run, has its own slurmscriptd)."""
    if scriptd is None:
        return []
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes()
            parent = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        if parent == scriptd and PROLOG.encode() in cmdline:
            found.append(int(entry.name))
    return found


def child_named(parent: int, name: str) -> int | None:
    """The PID of `parent`'s child whose comm is `name` (slurmctld's slurmscriptd)."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            comm = (entry / "comm").read_text().strip()
        except (OSError, IndexError):
            continue
        if int(fields[1]) == parent and comm == name:
            return int(entry.name)
    return None


def _count(ctx: Context, state: str) -> int:
    out = ctx.cloud.slurm("squeue", "-h", "-n", NAME, "-t", state, "-o", "%i", check=False)
    return len(out.split())


def _cpu(pids: dict[str, int | None]) -> dict[str, float]:
    return {name: (watch.cpu_seconds(pid, children=False) or 0.0) if pid else 0.0 for name, pid in pids.items()}


def configuring(ctx: Context, jobs: int, window: float, partition: str) -> dict[str, Any]:
    """Run the phase (see the module docstring); the JSON row."""
    sizes = [min(ARRAY_SIZE, jobs - i) for i in range(0, jobs, ARRAY_SIZE)]  # task ids stay below MaxArraySize
    submit = " && ".join(
        f"sbatch -Q -p {partition} -N 1 -t 30 -o /dev/null -J {NAME} --array=0-{size - 1} --wrap 'sleep 1800'"
        for size in sizes
    )
    ctld = ctx.ctld_pid()
    pids = {
        "slurmctld": ctld,
        "slurmscriptd": child_named(ctld, "slurmscriptd"),
        "bootwatch": ctx.cloud.running_daemons().get("bootwatch"),
    }
    start = time.perf_counter()
    done = ctx.cloud.on_controller(["/bin/sh", "-c", submit], timeout=600)
    if done.returncode != 0:
        raise PhaseError(f"sbatch: {done.stderr.strip()[-300:]}")
    submitted = time.perf_counter() - start
    peak_prologs = 0
    while (configuring_now := _count(ctx, "CONFIGURING")) < jobs:
        peak_prologs = max(peak_prologs, len(prolog_processes(pids["slurmscriptd"])))
        if time.perf_counter() - start > ctx.timeout:
            break
        time.sleep(2.0)
    all_configuring = time.perf_counter() - start
    rpc0, cpu0, t0 = rpc_counts(ctx.slurm("sdiag")), _cpu(pids), time.perf_counter()
    samples = []
    while time.perf_counter() - t0 < window:
        procs = prolog_processes(pids["slurmscriptd"])
        rss = sum(watch.rss_mib(pid) or 0.0 for pid in procs)
        samples.append({"t": round(time.perf_counter() - t0, 1), "prologs": len(procs), "rss_mib": round(rss, 1)})
        time.sleep(min(5.0, max(0.0, window - (time.perf_counter() - t0))))
    rpc1, cpu1 = rpc_counts(ctx.slurm("sdiag")), _cpu(pids)
    elapsed = time.perf_counter() - t0
    still = _count(ctx, "CONFIGURING")
    rates = {k: round((rpc1.get(k, 0) - rpc0.get(k, 0)) / elapsed, 2) for k in rpc1 if rpc1[k] > rpc0.get(k, 0)}
    cancelled = time.perf_counter()
    ctx.slurm("scancel", f"--name={NAME}")
    prologs_gone = None
    while time.perf_counter() - cancelled < 300:
        if not prolog_processes(pids["slurmscriptd"]):
            prologs_gone = round(time.perf_counter() - cancelled, 1)
            break
        time.sleep(1.0)
    return {
        "jobs": jobs,
        "partition": partition,
        "submit_wall_s": round(submitted, 2),
        "configuring_at_window": configuring_now,
        "all_configuring_s": round(all_configuring, 1),
        "window_s": round(elapsed, 1),
        "configuring_after_window": still,
        "prolog_processes": max((s["prologs"] for s in samples), default=0),
        "prolog_processes_peak_while_starting": peak_prologs,
        "prolog_rss_mib": max((s["rss_mib"] for s in samples), default=0.0),
        "cpu_share": {k: round((cpu1[k] - cpu0[k]) / elapsed, 3) for k in cpu0},  # CPU seconds per second
        "rpc_per_s": dict(sorted(rates.items(), key=lambda kv: -kv[1])),
        "rpc_per_s_total": round(sum(rates.values()), 2),
        "prologs_gone_after_scancel_s": prologs_gone,
        "samples": samples,
    }
