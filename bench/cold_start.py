"""Cold-start benchmark (`python -m bench.cold_start`, part of `make bench`): submit→RUNNING of jobs on powered-down
nodes in the local cloud, and where the time goes.

It starts a local cloud (the demo config with a bigger `small` pool, emulated boot 2 s), then submits N one-node jobs
one after the other (each at a random moment within a second, as users do), each on a node that has never been up
(`-w cpu-small-<i>`), and watches each until RUNNING (`squeue` every 50 ms). Each job's timeline comes from the logs of the real daemons and programs: slurmctld
(allocation, node registration, the prolog's end), the plugin (ResumeProgram, worker, launch, NodeAddr), the instance
runner (boot), the node bootstrap and slurmd. Slurm's RPC counts by type (sdiag) before and after the run give the
RPCs per cold start. Writes bench/results/cold-start.json and cold-start.png (one bar per job, split into phases).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import yaml

from bench.timeline_logs import Phases, job_phases, rpc_counts
from localcloud.cloud import LocalCloud

RESULTS = Path(__file__).resolve().parent / "results"
DEMO_CONFIG = Path(__file__).resolve().parents[1] / "cluster_config" / "examples" / "local-demo.yaml"
BOOT_DELAY = 2.0
POOL = "small"
PARTITION = "cpu"


def bench_config(directory: Path, nodes: int) -> Path:
    """The demo config with `nodes` nodes in the small pool (one per cold start) and long power-save timers (no node
    is suspended during the run)."""
    config = yaml.safe_load(DEMO_CONFIG.read_text())
    cluster = config["clusters"][0]
    for partition in cluster["partitions"]:
        for pool in partition["pools"]:
            if pool["name"] == POOL:
                pool["max_nodes"] = nodes
    cluster["slurm"]["suspend_time"] = 600
    path = directory / "cold-start.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path


def wait_running(cloud: LocalCloud, job_id: str, timeout: float = 120) -> float | None:
    """Host time the job was first seen RUNNING (or done), None on timeout."""
    end = time.time() + timeout
    while time.time() < end:
        state = cloud.slurm("squeue", "-h", "-j", job_id, "-o", "%T", check=False).strip()
        if state in ("RUNNING", "COMPLETING", "COMPLETED", ""):
            return time.time()
        time.sleep(0.05)
    return None


def run(count: int, state_dir: Path) -> dict[str, Any]:
    """Start the cloud, make `count` cold starts, read the logs; the result document."""
    cloud = LocalCloud(state_dir)
    config = bench_config(state_dir.parent, count)
    cloud.up(config, boot_delay=BOOT_DELAY)
    try:
        rpc_before = rpc_counts(cloud.slurm("sdiag"))
        submitted: list[tuple[str, str, float, float | None]] = []
        phase = random.Random(17)
        for index in range(1, count + 1):
            node = f"{PARTITION}-{POOL}-{index}"
            # users do not submit in step with slurmctld's 1 s passes: a random moment within the second
            time.sleep(phase.uniform(0.0, 1.0))
            started = time.time()
            job_id = cloud.sbatch("-p", PARTITION, "-w", node, wrap="sleep 3")
            submitted.append((job_id, node, started, wait_running(cloud, job_id)))
        rpc_after = rpc_counts(cloud.slurm("sdiag"))
        time.sleep(1)  # the last lines reach the logs
        phases = [
            job_phases(cloud.layout.log, job_id, node, start, running) for job_id, node, start, running in submitted
        ]
    finally:
        cloud.down()
    return document(phases, rpc_before, rpc_after)


def document(phases: list[Phases], rpc_before: dict[str, int], rpc_after: dict[str, int]) -> dict[str, Any]:
    """Summary + per-job phases + RPCs per cold start."""
    totals = [p.total for p in phases if p.total is not None]
    rpcs = {k: rpc_after.get(k, 0) - rpc_before.get(k, 0) for k in rpc_after}
    return {
        "recorded": datetime.now(UTC).isoformat(timespec="seconds"),
        "cpus": os.cpu_count(),
        "load_average": [round(x, 2) for x in os.getloadavg()],
        "boot_delay_s": BOOT_DELAY,
        "cold_starts": len(phases),
        "submit_to_running_s": {
            "median": round(statistics.median(totals), 3) if totals else None,
            "max": round(max(totals), 3) if totals else None,
            "min": round(min(totals), 3) if totals else None,
        },
        "phase_medians_s": {
            name: round(statistics.median(values), 3)
            for name in Phases.NAMES
            if (values := [v for p in phases if (v := p.durations().get(name)) is not None])
        },
        "rpcs_during_run": dict(sorted((k, v) for k, v in rpcs.items() if v)),
        "jobs": [p.as_dict() for p in phases],
    }


def plot(doc: dict[str, Any], path: Path) -> None:
    """One horizontal bar per job, split into its phases."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    jobs = doc["jobs"]
    fig, ax = plt.subplots(figsize=(11, 0.3 * len(jobs) + 1.5))
    colors = [plt.get_cmap("tab10")(i) for i in range(10)]
    for row, job in enumerate(jobs):
        left = 0.0
        for i, name in enumerate(Phases.NAMES):
            width = job["phases_s"].get(name)
            if width is None:
                continue
            ax.barh(row, width, left=left, color=colors[i % 10], label=name if row == 0 else None)
            left += width
    summary = doc["submit_to_running_s"]
    ax.set_yticks(range(len(jobs)), [f"job {j['job_id']}" for j in jobs], fontsize=7)
    ax.set_xlabel("seconds after sbatch")
    ax.set_title(
        f"submit→RUNNING, emulated boot {doc['boot_delay_s']} s: median {summary['median']} s, max {summary['max']} s"
    )
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="bench.cold_start", description=__doc__.split("\n")[0])
    parser.add_argument("--count", type=int, default=20, help="cold starts (default 20)")
    parser.add_argument("--out", type=Path, default=RESULTS / "cold-start.json")
    parser.add_argument("--keep", action="store_true", help="keep the local cloud's state dir (logs) and say where")
    args = parser.parse_args(argv)
    if args.count < 1:
        parser.error("--count: must be at least 1")
    work = Path(tempfile.mkdtemp(prefix="elastic-slurm-bench-cold-", dir="/var/tmp"))
    try:
        doc = run(args.count, work / "cloud")
    finally:
        if args.keep:
            print(f"logs kept in {work / 'cloud' / 'log'}")
        else:
            shutil.rmtree(work, ignore_errors=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(doc, indent=2) + "\n")
    plot(doc, args.out.with_suffix(".png"))
    summary = doc["submit_to_running_s"]
    print(f"cold start x{doc['cold_starts']}: submit→RUNNING median {summary['median']} s, max {summary['max']} s")
    for name, value in doc["phase_medians_s"].items():
        print(f"  {name:<28} {value:6.3f} s (median)")
    print(f"RPCs during the run: {doc['rpcs_during_run']}")
    print(f"wrote {args.out} and {args.out.with_suffix('.png')}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
