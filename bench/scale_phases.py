"""The measured phases of bench/scale_10k.py, each against a running local cloud with N powered-down cloud nodes and
no slurmd: `scontrol show nodes` + our parsers, one resume of every node through slurmctld, one cluster-manager pass,
the scheduler under a queue of jobs (sdiag), one suspend of every node (slurmctld's restart and ResumeProgram by hand:
bench/scale_controller.py).

Each phase returns a plain dict (the JSON row). CPU is split by process: the plugin (ResumeProgram/SuspendProgram's
detached worker, sampled from /proc, with the scontrol processes it waited for), the emulated AWS (moto) and
slurmctld; AWS calls come from the emulator's counter (nothing else calls EC2 while a phase runs: the bench stopped
the instance runner and the exporter).
"""

from __future__ import annotations

import json
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench import scale_watch as watch
from bench.scale_probe import REPORT_PREFIX
from localcloud.cloud import LocalCloud
from localcloud.image.slurm_root import SRC_IN_ROOT
from slurm_plugin.manager.observe import parse_json, parse_oneliner
from slurm_plugin.powersave.slurm import parse_show_nodes
from slurm_plugin.telemetry import events

CONTROLLER_PYTHON = "/opt/elastic-slurm/venv/bin/python"
HOLD = "bench-hold"  # the maintenance reservation the queued jobs wait behind


class PhaseError(RuntimeError):
    """A phase could not complete (one line)."""


@dataclass
class Context:
    """The running cloud and what every phase needs to know about it."""

    cloud: LocalCloud
    nodes: list[str]
    hostlist: str
    aws_pid: int
    state_dir: Path  # the plugin's state_dir (events.jsonl, nodes.json)
    timeout: float = 1800.0

    @property
    def plugin_log(self) -> Path:
        return self.cloud.layout.log_file("plugin")

    def ctld_pid(self) -> int:
        pid = self.cloud.running_daemons().get("slurmctld")
        if pid is None:
            raise PhaseError("slurmctld is not running")
        return pid

    def slurm(self, *args: str, timeout: float = 300) -> str:
        return self.cloud.slurm(*args, timeout=timeout)

    def cpu(self) -> dict[str, float]:
        """CPU seconds so far of the emulated AWS and slurmctld."""
        return {
            "emulated_aws": watch.cpu_seconds(self.aws_pid) or 0.0,
            "slurmctld": watch.cpu_seconds(self.ctld_pid()) or 0.0,
        }

    def ec2_calls(self) -> dict[str, int]:
        return {k: v for k, v in sorted(self.cloud.aws().call_counts().items()) if k.startswith("ec2:")}


def _since(before: dict[str, float], after: dict[str, float]) -> dict[str, float]:
    return {k: round(after[k] - before[k], 3) for k in before}


def show_nodes(ctx: Context) -> dict[str, Any]:
    """`scontrol --json show nodes` (the manager's call) and `scontrol -o show nodes` (the plugin's): wall of each
    client call from the host, output size, and the CPU of our parser on it."""
    row: dict[str, Any] = {}
    for key, args, parse in (
        ("json", ("scontrol", "--json", "show", "nodes"), parse_json),
        ("oneliner", ("scontrol", "-o", "show", "nodes"), parse_oneliner),
    ):
        start = time.perf_counter()
        text = ctx.slurm(*args)
        wall = time.perf_counter() - start
        cpu = time.process_time()
        parsed = parse(text)
        row[key] = {
            "scontrol_wall_s": round(wall, 3),
            "bytes": len(text),
            "parse_cpu_s": round(time.process_time() - cpu, 3),
            "nodes": len(parsed),
        }
        if key == "oneliner":
            cpu = time.process_time()
            plugin = parse_show_nodes(text)
            row["plugin_parse"] = {"parse_cpu_s": round(time.process_time() - cpu, 3), "nodes": len(plugin)}
    return row


def _addressed(ctx: Context) -> int:
    nodes = parse_show_nodes(ctx.slurm("scontrol", "-o", "show", "nodes"))
    return sum(1 for name in ctx.nodes if name in nodes and nodes[name].addr != name)


def _power_phase(ctx: Context, program: str) -> tuple[Path, watch.LogTail, dict[str, float]]:
    """Before a power phase: time slurm-<program>'s return (wrapper), follow the plugin log, zero the EC2 call counts,
    note the CPU so far; (timing file, log tail, CPU)."""
    layout = ctx.cloud.layout
    timing = layout.log / f"bench-{program}-timing.txt"
    watch.timed_wrapper(layout.bin / f"slurm-{program}", timing)
    log = watch.LogTail(ctx.plugin_log)
    ctx.cloud.aws().reset_call_counts()
    return timing, log, ctx.cpu()


def resume_all(ctx: Context) -> dict[str, Any]:
    """`scontrol update state=power_up` of every node: ResumeProgram's return (timed wrapper), the worker(s), EC2
    calls, and when every node has its NodeAddr (polled once a second, and the worker's own log lines)."""
    timing, log, cpu0 = _power_phase(ctx, "resume")
    asked = time.time()
    ctx.slurm("scontrol", "update", f"nodename={ctx.hostlist}", "state=power_up")
    workers = watch.Workers("slurm-resume")
    polls: list[tuple[float, int]] = []
    while True:
        workers.update(log)
        polls.append((time.time(), _addressed(ctx)))
        done = workers.finished(" done: ")
        if polls[-1][1] == len(ctx.nodes) and done:
            break
        if done and polls[-1][1] < len(ctx.nodes) and time.time() - asked > 120:
            raise PhaseError(f"resume workers ended with {polls[-1][1]} of {len(ctx.nodes)} nodes addressed")
        if time.time() - asked > ctx.timeout:
            raise PhaseError(f"resume: {polls[-1][1]} of {len(ctx.nodes)} nodes addressed after {ctx.timeout:.0f} s")
        time.sleep(1.0)
    worker_cpu = workers.cpu()
    cpu1 = ctx.cpu()
    text = workers.text
    records = [e for e in events.read_all(ctx.state_dir, since=asked)]
    launches = [e for e in records if e["event"] == "launch_call"]
    answers = sorted(e["t"] for e in launches)
    set_lines = watch.lines_with(text, "NodeAddr set for")
    all_polled = next(t for t, count in polls if count == len(ctx.nodes))
    all_logged = max(t for t, _ in set_lines) if set_lines else None
    runs = watch.read_timings(timing)
    return {
        "resume_program_runs": [_run_row(run) for run in runs],
        "resume_program_return_s": round(max(run.seconds for run in runs), 4) if runs else None,
        "resume_program_cpu_s": max((run.cpu_s or 0.0 for run in runs), default=None),
        "launch_calls": [_launch_row(e, asked) for e in launches],
        "nodes_launched": sum(1 for e in records if e["event"] == "node_launched"),
        "ec2_calls": ctx.ec2_calls(),
        "first_launch_answer_s": round(answers[0] - asked, 3) if answers else None,
        "last_launch_answer_s": round(answers[-1] - asked, 3) if answers else None,
        "all_nodeaddr_polled_s": round(all_polled - asked, 3),
        "all_nodeaddr_logged_s": round(all_logged - asked, 3) if all_logged else None,
        "nodeaddr_after_last_answer_s": round((all_logged or all_polled) - answers[-1], 3) if answers else None,
        "nodeaddr_after_answer_by_pool_s": _per_pool_gap(launches, set_lines),
        "worker_cpu_s": worker_cpu,
        "workers": len(workers.samplers),
        "cpu_s": {"plugin": worker_cpu, **_since(cpu0, cpu1)},
        "wall_s": round(max(all_polled, all_logged or 0) - asked, 3),
        "addressed_polls": [(round(t - asked, 2), n) for t, n in polls],
    }


def _run_row(run: watch.TimedRun) -> dict[str, Any]:
    return {"seconds": round(run.seconds, 4), "cpu_s": run.cpu_s, "exit": run.exit}


def _launch_row(event: dict[str, Any], asked: float) -> dict[str, Any]:
    keys = ("pool", "api", "requested", "launched")
    return {
        **{k: event[k] for k in keys},
        "call_s": event["seconds"],
        "answer_after_request_s": round(event["t"] - asked, 3),
    }


def _per_pool_gap(launches: list[dict[str, Any]], set_lines: list[tuple[float, str]]) -> dict[str, float]:
    """Seconds from each pool's launch answer to the worker's `NodeAddr set` line naming that pool's nodes."""
    gaps: dict[str, float] = {}
    for launch in launches:
        prefix = f" {launch['pool']}-"
        after = [t for t, line in set_lines if prefix in line and t >= launch["t"] - 1]
        if after:
            gaps[launch["pool"]] = round(min(after) - launch["t"], 3)
    return gaps


def _probe_manager(ctx: Context, profile: Path | None) -> tuple[dict[str, Any], dict[str, float], dict[str, int]]:
    """One `slurm-clustermgr --once` on the controller inside bench.scale_probe: its report, the CPU of the
    emulated AWS and slurmctld meanwhile, and the emulator's call counts."""
    layout = ctx.cloud.layout
    cmd = [CONTROLLER_PYTHON, "-m", "bench.scale_probe", *(["--profile", str(profile)] if profile else []),
           "slurm_plugin.manager.daemon:main", "--", "--once", "--manifest", str(layout.manifest)]  # fmt: skip
    # as its unit runs it: user slurm, the controller role; the image's venv has the project's packages but not
    # bench/, so the mounted source goes on the path for the probe
    env = {**ctx.cloud.principals().controller.env(), "AWS_DEFAULT_REGION": "us-east-1", "PYTHONPATH": SRC_IN_ROOT}
    aws = ctx.cloud.aws()
    aws.reset_call_counts()
    cpu0 = ctx.cpu()
    done = ctx.cloud.on_controller(cmd, user="slurm", env=env, timeout=900)
    cpu1 = ctx.cpu()
    line = next((x for x in reversed(done.stdout.splitlines()) if x.startswith(REPORT_PREFIX)), None)
    if line is None:
        raise PhaseError(f"manager pass: no report (exit {done.returncode}): {done.stderr.strip()[-400:]}")
    report: dict[str, Any] = json.loads(line[len(REPORT_PREFIX) :])
    return report, _since(cpu0, cpu1), dict(sorted(aws.call_counts().items()))


def manager_pass(ctx: Context, label: str) -> dict[str, Any]:
    """One cluster-manager pass as measured (no profiler), then a second one under cProfile for the profile only
    (the pass changes nothing when Slurm and EC2 agree, so both see the same cluster)."""
    report, cpu, calls = _probe_manager(ctx, None)
    report["emulator_calls"] = calls
    report["cpu_s"] = {"plugin": report["cpu_s"], **cpu}
    report["aws_call_total"] = sum(report["aws_calls"].values())
    report["scontrol_calls"] = report["subprocesses"].get("scontrol", 0)
    tail = ctx.cloud.layout.log / "clustermgr.log"
    report["log_tail"] = tail.read_text(errors="replace").splitlines()[-3:] if tail.exists() else []
    profiled, _cpu, _calls = _probe_manager(ctx, ctx.cloud.layout.log / f"bench-manager-{label}.prof")
    report["profile"] = profiled.get("profile", [])
    report["profiled_cpu_s"] = profiled["cpu_s"]
    return report


def scheduler_under_queue(ctx: Context, jobs: int, job_nodes: int, settle: float) -> dict[str, Any]:
    """Hold every node in a maintenance reservation for an hour, queue `jobs` batch jobs of `job_nodes` nodes (every
    partition, 30 min each) behind it, reset sdiag, let the schedulers run for `settle` seconds, read sdiag, then
    cancel the jobs and delete the reservation.

    No job may start here: without a slurmd a started job stays CONFIGURING on its booting nodes and its
    PrologSlurmctld waits on them (one such prolog per job). Held back by the reservation, every job is tried by the
    main scheduler and planned past the reservation's end by the backfill scheduler, over all N nodes."""
    partitions = ",".join(
        sorted({line.split()[0].rstrip("*") for line in ctx.slurm("sinfo", "-h", "-o", "%P").split()})
    )
    ctx.slurm("scontrol", "create", "reservation", f"reservationname={HOLD}", "starttime=now", "duration=60",
              "nodes=ALL", "users=root", "flags=maint,ignore_jobs")  # fmt: skip
    loop = (f"for i in $(seq {jobs}); do sbatch -Q -p {partitions} -N {job_nodes} -t 30 -o /dev/null -J bench "
            '--wrap "sleep 1800" || exit 1; done')  # fmt: skip
    start = time.perf_counter()
    done = ctx.cloud.on_controller(["/bin/sh", "-c", loop], timeout=3600)
    submit = time.perf_counter() - start
    if done.returncode != 0:
        raise PhaseError(f"sbatch loop: {done.stderr.strip()[-300:]}")
    ctx.slurm("sdiag", "-r")
    cpu0 = ctx.cpu()
    time.sleep(settle)
    stats = watch.parse_sdiag(ctx.slurm("sdiag"))
    cpu1 = ctx.cpu()
    states = Counter(ctx.slurm("squeue", "-h", "-n", "bench", "-o", "%T").split())
    reasons = Counter(ctx.slurm("squeue", "-h", "-n", "bench", "-o", "%r").splitlines())
    rss = watch.rss_mib(ctx.ctld_pid())
    ctx.slurm("scancel", "--name=bench")
    deadline = time.monotonic() + 600
    while ctx.slurm("squeue", "-h", "-n", "bench", "-o", "%i").strip():
        if time.monotonic() > deadline:
            raise PhaseError("bench jobs still queued 600 s after scancel")
        time.sleep(2)
    ctx.slurm("scontrol", "delete", f"reservationname={HOLD}")
    return {
        "jobs": jobs,
        "job_nodes": job_nodes,
        "partitions": partitions,
        "submit_wall_s": round(submit, 2),
        "settle_s": settle,
        "job_states": dict(states),
        "pending_reasons": dict(reasons),
        "sdiag": stats,
        "slurmctld_rss_mib": rss,
        "cpu_s": _since(cpu0, cpu1),
    }


def suspend_all(ctx: Context) -> dict[str, Any]:
    """`scontrol update state=power_down_force` of every node: SuspendProgram's return, the worker, EC2 calls, when
    every instance was terminated (the event log) and when every node is powered down again (sinfo)."""
    timing, log, cpu0 = _power_phase(ctx, "suspend")
    asked = time.time()
    ctx.slurm("scontrol", "update", f"nodename={ctx.hostlist}", "state=power_down_force", "reason=bench")
    workers = watch.Workers("slurm-suspend")
    terminated_at: float | None = None
    while True:
        workers.update(log)
        ended = [e for e in events.read_all(ctx.state_dir, since=asked) if e["event"] == "terminated"]
        if terminated_at is None and len({e["instance_id"] for e in ended}) >= len(ctx.nodes):
            terminated_at = max(e["t"] for e in ended)
        if terminated_at is not None and (
            workers.finished("NodeAddr/NodeHostname reset") or time.time() > terminated_at + 120
        ):
            break
        if time.time() - asked > ctx.timeout:
            raise PhaseError(
                f"suspend: {len(ended)} of {len(ctx.nodes)} instances terminated after {ctx.timeout:.0f} s"
            )
        time.sleep(1.0)
    plugin_cpu = workers.cpu()
    cpu1 = ctx.cpu()
    calls = ctx.ec2_calls()
    while not all(s.endswith("~") for s in ctx.cloud.nodes().values()):
        if time.time() - asked > ctx.timeout:
            raise PhaseError("suspend: nodes not powered down")
        time.sleep(2.0)
    runs = watch.read_timings(timing)
    return {
        "suspend_program_runs": [_run_row(run) for run in runs],
        "suspend_program_return_s": round(max(run.seconds for run in runs), 4) if runs else None,
        "ec2_calls": calls,
        "all_terminated_s": round(terminated_at - asked, 3),
        "all_powered_down_s": round(time.time() - asked, 3),
        "workers": len(workers.samplers),
        "cpu_s": {"plugin": plugin_cpu, **_since(cpu0, cpu1)},
        "wall_s": round(terminated_at - asked, 3),
    }
