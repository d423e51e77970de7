"""Measurements of bench/scale_10k.py that run programs on the controller by hand: slurmctld's stop and start
with every node in its state, and ResumeProgram's foreground for every node on an otherwise idle controller."""

from __future__ import annotations

import json
import shlex
import time
from typing import Any

from bench import scale_watch as watch
from bench.scale_phases import Context, PhaseError
from localcloud.cloud import LocalCloud


def unit_env(cloud: LocalCloud) -> dict[str, str]:
    """What the systemctl stand-in needs from the controller's env file (where its PID files go, what it skips)."""
    env_file = cloud.layout.machine_dir("controller") / "etc-elastic-slurm" / "env"
    values: dict[str, str] = {}
    for line in env_file.read_text(encoding="utf-8").splitlines():
        key, _, value = line.partition("=")
        if key in ("ES_LOCAL_UNIT_DIR", "ES_LOCAL_UNITS_SKIP"):
            values[key] = " ".join(shlex.split(value))
    return values


def slurmctld_start(ctx: Context) -> dict[str, Any]:
    """Stop slurmctld (it saves its state), start it again with every node in that state: the systemctl stand-in
    returns at READY=1; slurmctld's own log says when it read the state and when it serves as primary; then the
    first `scontrol ping` that says UP, and its resident memory."""
    units = unit_env(ctx.cloud)
    log = watch.LogTail(ctx.cloud.layout.log_file("slurmctld"))
    start = time.perf_counter()
    stopped = ctx.cloud.on_controller(["systemctl", "stop", "slurmctld"], env=units, timeout=120)
    stop_s = time.perf_counter() - start
    if stopped.returncode != 0:
        raise PhaseError(f"systemctl stop slurmctld: {stopped.stderr.strip()}")
    start = time.perf_counter()
    started = ctx.cloud.on_controller(["systemctl", "start", "slurmctld"], env=units, timeout=300)
    ready = time.perf_counter() - start
    if started.returncode != 0:
        raise PhaseError(f"systemctl start slurmctld: {started.stderr.strip()}")
    while "UP" not in ctx.cloud.slurm("scontrol", "ping", check=False):
        if time.perf_counter() - start > 300:
            raise PhaseError("slurmctld did not answer scontrol ping within 300 s of its start")
        time.sleep(0.1)
    answers = time.perf_counter() - start
    marks = watch.slurmctld_marks(log.new_text())
    began = marks.get("started")
    return {
        "stop_s": round(stop_s, 3),
        "ready_s": round(ready, 3),
        "answers_s": round(answers, 3),
        "log_state_read_s": round(marks["state_read"] - began, 3) if began and "state_read" in marks else None,
        "log_primary_s": round(marks["primary"] - began, 3) if began and "primary" in marks else None,
        "rss_mib": watch.rss_mib(ctx.ctld_pid()),
    }


def resume_program_isolated(ctx: Context, runs: int = 5) -> dict[str, Any]:
    """ResumeProgram's foreground for every node, run by hand on the controller (as SlurmUser) while nothing else
    runs there, `runs` times: wall and CPU measured by the shell around it. Its manifest is a copy whose EC2 endpoint
    answers nothing and whose scontrol is `true`, in a state dir of its own: the workers it starts launch nothing."""
    layout = ctx.cloud.layout
    dry = layout.root / "bench-dry"
    (dry / "bin").mkdir(parents=True, exist_ok=True)
    (dry / "bin" / "scontrol").write_text("#!/bin/sh\nexit 0\n", encoding="utf-8")
    (dry / "bin" / "scontrol").chmod(0o755)
    manifest = json.loads(layout.manifest.read_text(encoding="utf-8"))
    manifest.update(
        state_dir=str(dry / "state"), log_file=str(dry / "plugin.log"), aws_endpoint_url="http://127.0.0.1:9",
        slurm_bin_dir=str(dry / "bin"),
    )  # fmt: skip
    (dry / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")
    for path in (dry, dry / "bin"):
        path.chmod(0o777)
    script = ('s=$(date +%s%N); /opt/elastic-slurm/bin/slurm-resume "$0" >/dev/null; rc=$?; e=$(date +%s%N); '
              'echo "$(( (e - s) / 1000 )) $rc"; times')  # fmt: skip
    env = {"ELASTIC_SLURM_MANIFEST": str(dry / "manifest.json")}
    results: list[tuple[float, float | None]] = []
    for _ in range(runs):
        done = ctx.cloud.on_controller(["/bin/bash", "-c", script, ctx.hostlist], user="slurm", env=env, timeout=120)
        lines = done.stdout.split("\n")
        micros, rc = lines[0].split()
        if rc != "0":
            raise PhaseError(f"slurm-resume (dry) exit {rc}: {done.stderr.strip()[-200:]}")
        children = lines[2].split() if len(lines) > 2 else []
        cpu = [watch.minutes_seconds(x) for x in children]
        results.append((int(micros) / 1e6, None if None in cpu or not cpu else round(sum(c or 0 for c in cpu), 3)))
        time.sleep(5)  # its worker fails fast (nothing answers): let it end before the next run
    walls = sorted(w for w, _ in results)
    time.sleep(5)
    leftovers = watch.stop_plugin_processes(dry / "manifest.json")  # spare workers the dry runs left waiting
    return {
        "leftover_workers_stopped": len(leftovers),
        "runs": [{"seconds": round(w, 4), "cpu_s": c} for w, c in results],
        "median_s": round(walls[len(walls) // 2], 4),
        "nodes": len(ctx.nodes),
    }
