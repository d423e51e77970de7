"""Power-save plugin benchmark (`python -m bench.run`, `make bench`): EC2 calls, wall and CPU against the emulated AWS.

Rows (printed as a table and written to bench/results/resume.json):
1. resume of N nodes of one pool (3 instance types x 3 AZs, no capacity errors), then suspend of the same nodes, for
   each N of LAUNCH_NS (plotted against N by bench/plots.py);
2. ResumeProgram foreground (the console script as slurmctld runs it) for N=5000, wall per run (median of 5);
3. planning + hostlist handling for a 10,000-node resume (100 jobs of 100 nodes), CPU seconds;
4. the post-launch lookup (addresses of CreateFleet's instance ids, batched and retried) for 4000 and 10,000
   instances while every 10th DescribeInstances answer is lost (10 %).
"""

from __future__ import annotations

import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from localcloud.aws.emulated_aws import DUMMY_CREDENTIALS, EmulatedAws
from localcloud.aws.faults import Faults
from slurm_plugin.hostlists import compress, expand
from slurm_plugin.manifest import Manifest, PoolManifest, write_manifest
from slurm_plugin.powersave import capacity
from slurm_plugin.powersave.launcher import resume_nodes
from slurm_plugin.powersave.planner import assign, plan_launch
from slurm_plugin.powersave.terminator import terminate_nodes
from tests.aws.plugin_env import FakeSlurm, build_network, ec2_for, make_manifest, rid

RESULTS = Path(__file__).resolve().parent / "results" / "resume.json"
# 5000 is out of reach: the emulator's cost grows ~quadratically (1000: 7 s, 2000: 30 s per resume), see bench/README.md
LAUNCH_NS = (10, 100, 1000)


def _bigger(manifest: Manifest, max_nodes: int) -> Manifest:
    pools: list[PoolManifest] = [p.model_copy(update={"max_nodes": max_nodes}) for p in manifest.pools]
    return manifest.model_copy(update={"pools": pools})


def bench_launch(aws: EmulatedAws, manifest: Manifest, n: int) -> list[dict[str, Any]]:
    """Resume then suspend n nodes of the cpu pool; EC2 calls from the emulator's counters."""
    nodes = [f"cpu-c7i-{i}" for i in range(1, n + 1)]
    rows = []
    for case, action in (
        ("resume", lambda: resume_nodes(manifest, nodes, [], ec2_for(aws), FakeSlurm(), rid("bench"))),
        ("suspend", lambda: terminate_nodes(manifest, nodes, ec2_for(aws), FakeSlurm(), "bench-suspend")),
    ):
        aws.reset_call_counts()
        wall, cpu = time.perf_counter(), time.process_time()
        action()
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        calls = {k.removeprefix("ec2:"): v for k, v in sorted(aws.call_counts().items())}
        rows.append(
            {"case": f"{case} (1 pool, 3 types x 3 AZs)", "n": n, "ec2_calls": calls, "wall_s": wall, "cpu_s": cpu}
        )
    return rows


def bench_foreground(manifest: Manifest, workdir: Path, n: int, runs: int = 5) -> dict[str, Any]:
    """Wall time of the ResumeProgram console script until it returns (the worker runs on, detached)."""
    bindir = workdir / "bin"
    bindir.mkdir(exist_ok=True)
    scontrol = bindir / "scontrol"
    scontrol.write_text("#!/bin/sh\nexit 0\n", encoding="utf-8")
    scontrol.chmod(0o755)
    # Only the foreground is measured: every location is put in capacity cool-down, so the workers started here
    # make no EC2 call (they power the nodes down through a no-op scontrol); each run waits for its worker to end.
    final = _bigger(manifest, n).model_copy(
        update={
            "slurm_bin_dir": str(bindir),
            "aws_endpoint_url": "http://127.0.0.1:9",
            "state_dir": str(workdir / "foreground-state"),
        }
    )
    cooling = [(p.key, loc.availability_zone) for p in final.pools for loc in p.locations]
    capacity.add_cooling(final.state_dir, cooling, time.time(), 3600)
    path = workdir / "manifest-foreground.json"
    write_manifest(final, path)
    requests = Path(final.state_dir) / "requests"
    resume_file = workdir / "resume.json"
    jobs = [{"job_id": j, "nodes_alloc": f"cpu-c7i-[{j * 50 + 1}-{j * 50 + 50}]"} for j in range(n // 50)]
    resume_file.write_text(json.dumps({"all_nodes_resume": f"cpu-c7i-[1-{n}]", "jobs": jobs}), encoding="utf-8")
    script = Path(sys.executable).parent / "slurm-resume"
    command = [str(script)] if script.exists() else [sys.executable, "-m", "slurm_plugin.powersave.resume"]
    env = {**os.environ, "ELASTIC_SLURM_MANIFEST": str(path), "SLURM_RESUME_FILE": str(resume_file)}
    walls: list[float] = []
    cpus: list[float] = []
    for _ in range(runs):
        cpu_before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        done = subprocess.run([*command, f"cpu-c7i-[1-{n}]"], env=env, capture_output=True, text=True, check=False)
        walls.append(time.perf_counter() - start)
        cpu_after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpus.append(cpu_after.ru_utime + cpu_after.ru_stime - cpu_before.ru_utime - cpu_before.ru_stime)
        if done.returncode != 0:
            raise RuntimeError(f"slurm-resume failed: {done.stderr.strip()}")
        deadline = time.monotonic() + 60
        while requests.exists() and any(requests.iterdir()) and time.monotonic() < deadline:
            time.sleep(0.2)  # the detached worker must not compete with the next measured run
    return {
        "case": "ResumeProgram foreground (median of 5)",
        "n": n,
        "ec2_calls": {},
        "wall_s": statistics.median(walls),
        "cpu_s": statistics.median(cpus),
    }


def bench_planning(manifest: Manifest, n: int) -> dict[str, Any]:
    """CPU for expanding the hostlist, planning, assigning and compressing for n nodes."""
    big = _bigger(manifest, n)
    start = time.process_time()
    nodes = expand(f"cpu-c7i-[1-{n}]")
    groups = [nodes[i : i + 100] for i in range(0, n, 100)]
    plan = plan_launch(nodes, big.pools, [], groups)
    for launch in plan.launches:
        assign(launch, [f"i-{i:017x}" for i in range(len(launch.nodes))])
    compress(nodes)
    cpu = time.process_time() - start
    return {"case": "planning + hostlist (100 jobs x 100)", "n": n, "ec2_calls": {}, "wall_s": None, "cpu_s": cpu}


def bench_lookup(aws: EmulatedAws, manifest: Manifest, n: int, lose_every: int = 10) -> dict[str, Any]:
    """Ec2.lookup of n fresh instance ids with every `lose_every`-th DescribeInstances answer lost."""
    region = manifest.home_region
    template = manifest.pools[0].locations[0]
    client = aws.client("ec2", region)
    ids: list[str] = []
    while len(ids) < n:  # the emulator launches at most 1000 a call here
        count = min(1000, n - len(ids))
        answer = client.run_instances(
            LaunchTemplate={"LaunchTemplateId": template.launch_template_id},
            SubnetId=template.subnet_id, MinCount=count, MaxCount=count,
        )  # fmt: skip
        ids.extend(i["InstanceId"] for i in answer["Instances"])
    aws.reset_call_counts()
    aws.set_faults(Faults(lose_every={"DescribeInstances": lose_every}))
    wall, cpu = time.perf_counter(), time.process_time()
    found = ec2_for(aws).lookup(region, ids)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    aws.clear_faults()
    calls = {k.removeprefix("ec2:"): v for k, v in sorted(aws.call_counts().items())}
    unresolved = sum(1 for i in found if not i.private_ip)
    client.terminate_instances(InstanceIds=ids)
    return {
        "case": f"post-launch lookup, {100 // lose_every} % answers lost",
        "n": n, "ec2_calls": calls, "wall_s": wall, "cpu_s": cpu, "unresolved": unresolved,
    }  # fmt: skip


def _table(rows: list[dict[str, Any]]) -> str:
    lines = [f"{'case':<42} {'N':>6} {'wall s':>8} {'CPU s':>7}  EC2 calls", "-" * 100]
    for row in rows:
        wall = "-" if row["wall_s"] is None else f"{row['wall_s']:.3f}"
        calls = ", ".join(f"{k}={v}" for k, v in row["ec2_calls"].items()) or "-"
        lines.append(f"{row['case']:<42} {row['n']:>6} {wall:>8} {row['cpu_s']:>7.3f}  {calls}")
    return "\n".join(lines)


def main() -> int:
    """Run every case, print the table, write the JSON results."""
    for key, value in DUMMY_CREDENTIALS.items():
        os.environ.setdefault(key, value)
    os.environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")
    with tempfile.TemporaryDirectory(prefix="elastic-slurm-bench-") as tmp:
        workdir = Path(tmp)
        aws = EmulatedAws.start(workdir / "aws")
        try:
            network = build_network(aws)
            manifest = make_manifest(aws, network, workdir / "cluster")
            rows = [row for n in LAUNCH_NS for row in bench_launch(aws, manifest, n)]
            rows.append(bench_foreground(manifest, workdir, 5000))
            rows.append(bench_planning(manifest, 10_000))
            rows.extend(bench_lookup(aws, manifest, n) for n in (4000, 10_000))
        finally:
            aws.stop()
    print(_table(rows))
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    machine = {"cpus": os.cpu_count(), "load_avg_1m": round(os.getloadavg()[0], 2), "python": sys.version.split()[0]}
    print(f"machine: {machine}")
    RESULTS.write_text(
        json.dumps({"recorded": stamp, "machine": machine, "rows": rows}, indent=2) + "\n", encoding="utf-8"
    )
    print(f"\nwritten to {RESULTS.relative_to(Path.cwd()) if RESULTS.is_relative_to(Path.cwd()) else RESULTS}")
    from bench.plots import plot_results  # matplotlib: a dev dependency (requirements-dev.txt)

    for path in plot_results(RESULTS):
        print(f"plot: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
