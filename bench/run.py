"""Power-save plugin benchmark (`python -m bench.run`, `make bench`): EC2 calls, wall and CPU against the emulated AWS.

Rows (printed as a table and written to bench/results/resume.json):
1. resume of N nodes of one pool (3 instance types x 3 AZs, no capacity errors), then suspend of the same nodes, for
   each N of LAUNCH_NS (plotted against N by bench/plots.py);
2. jobs (issue 33): N nodes resumed as one big job and as jobs of 50 nodes, for each N of JOB_NS and both launch
   APIs (CreateFleet: 3 types x 3 AZs; RunInstances: 1 type x 1 AZ): EC2 calls, wall to the first / half / last
   NodeAddr (when `set_addresses` got them), the worker's CPU; each next to the same resume by AWS ParallelCluster
   3.11's own code on the same emulated EC2 (bench/parallelcluster/), and the ratio of the last NodeAddr times;
3. ResumeProgram foreground (the console script as slurmctld runs it) for N=5000 in jobs of 50: wall until it
   returns, p50 / p95 of FOREGROUND_RUNS runs with a spare waiting (the usual path) and of runs without one;
4. planning + hostlist handling for a 10,000-node resume (100 jobs of 100 nodes), CPU seconds;
5. the post-launch lookup (addresses of CreateFleet's instance ids, batched and retried) for 4000 and 10,000
   instances while every 10th DescribeInstances answer is lost (10 %).
`--quick`: rows 2 and 3 only (the issue 33 numbers), N=1000 and 4000.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import resource
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.parallelcluster.side import ParallelClusterSide
from localcloud.aws.emulated_aws import DUMMY_CREDENTIALS, EmulatedAws
from localcloud.aws.faults import Faults
from localcloud.image.image_root import ImageBuildError
from localcloud.image.slurm_root import ROOT_CACHE
from slurm_plugin.hostlists import compress, expand
from slurm_plugin.manifest import Manifest, PoolManifest, write_manifest
from slurm_plugin.powersave import capacity
from slurm_plugin.powersave.launcher import resume_nodes
from slurm_plugin.powersave.planner import assign, plan_launch
from slurm_plugin.powersave.spare import spares_dir
from slurm_plugin.powersave.terminator import terminate_nodes
from tests.aws.plugin_env import FakeSlurm, build_network, ec2_for, make_manifest, rid

RESULTS = Path(__file__).resolve().parent / "results" / "resume.json"
# 5000 is out of reach: the emulator's cost grows ~quadratically (1000: 7 s, 2000: 30 s per resume), see bench/README.md
LAUNCH_NS = (10, 100, 1000)
JOB_NS = (1000, 4000)
JOB_NODES = 50
FOREGROUND_RUNS = 20
APIS = {"CreateFleet": "cpu-c7i-", "RunInstances": "gpu-g5-"}  # launch API -> node prefix of a pool that uses it


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


@dataclass
class TimedSlurm(FakeSlurm):
    """The fake Slurm adapter, noting when each NodeAddr update came and for how many nodes."""

    marks: list[tuple[float, int]] = field(default_factory=list)

    def set_addresses(self, addresses: Any) -> None:
        self.marks.append((time.perf_counter(), len(addresses)))
        super().set_addresses(addresses)


def _nodeaddr_times(marks: list[tuple[float, int]], start: float, n: int) -> dict[str, float | None]:
    """Seconds from `start` until the first node, half of the n nodes and all n had their NodeAddr."""
    result: dict[str, float | None] = {"first_s": None, "half_s": None, "last_s": None}
    total = 0
    for at, count in marks:
        total += count
        for key, need in (("first_s", 1), ("half_s", math.ceil(n / 2)), ("last_s", n)):
            if result[key] is None and total >= need:
                result[key] = round(at - start, 3)
    return result


def process_cpu(pid: int) -> float:
    """CPU seconds (user + system) a process has used so far (/proc/PID/stat); the emulator's own work, which the
    machine's load does not change (its wall time it does)."""
    fields = Path(f"/proc/{pid}/stat").read_text(encoding="ascii").rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def bench_jobs(aws: EmulatedAws, manifest: Manifest, workdir: Path, n: int, job_nodes: int, api: str) -> dict[str, Any]:
    """Resume n nodes in jobs of `job_nodes` (n: one big job) through `api`'s pool; then terminate them (untimed)."""
    prefix = APIS[api]
    state_dir = workdir / f"state-{api}-{n}-{job_nodes}"
    final = _bigger(manifest, n).model_copy(update={"state_dir": str(state_dir)})
    nodes = [f"{prefix}{i}" for i in range(1, n + 1)]
    groups = [nodes[i : i + job_nodes] for i in range(0, n, job_nodes)]
    slurm = TimedSlurm()
    aws.reset_call_counts()
    start, cpu, moto = time.perf_counter(), time.process_time(), process_cpu(aws.pid)
    outcome = resume_nodes(final, nodes, groups, ec2_for(aws), slurm, rid("bench-jobs"))
    wall, cpu, moto = time.perf_counter() - start, time.process_time() - cpu, process_cpu(aws.pid) - moto
    calls = {k.removeprefix("ec2:"): v for k, v in sorted(aws.call_counts().items())}
    terminate_nodes(final, nodes, ec2_for(aws), FakeSlurm(), "bench-jobs-suspend")
    case = "one big job" if job_nodes >= n else f"jobs of {job_nodes}"
    return {
        "case": f"{case} ({api})", "n": n, "ec2_calls": calls, "wall_s": wall, "cpu_s": cpu,
        "nodeaddr": _nodeaddr_times(slurm.marks, start, n), "emulator_cpu_s": round(moto, 2),
        "launched": len(outcome.launched),
        "failed": len(outcome.failed), "nodeaddr_updates": len(slurm.marks),
    }  # fmt: skip


def _stop_spares(state_dirs: list[Path], quiet_s: float = 3.0, limit_s: float = 30.0) -> int:
    """Stop the spare workers the foreground runs left waiting (their pids name their FIFOs), until none has shown
    up for `quiet_s` (a claimed spare starts the next one, which may still be starting); how many. One that still
    slips through exits at its idle timeout: its manifest is gone with the bench's temporary directory."""
    stopped: set[int] = set()
    deadline, quiet_since = time.monotonic() + limit_s, time.monotonic()
    while time.monotonic() < deadline and time.monotonic() - quiet_since < quiet_s:
        for state_dir in state_dirs:
            room = Path(spares_dir(str(state_dir)))  # this host's waiting room (spare.py)
            for entry in room.iterdir() if room.exists() else ():
                pid = entry.name.split(".", 1)[0]
                if pid.isdigit() and int(pid) not in stopped:
                    stopped.add(int(pid))
                    quiet_since = time.monotonic()
                    if _is_our_spare(int(pid), state_dir.parent):
                        with contextlib.suppress(ProcessLookupError):
                            os.kill(int(pid), signal.SIGTERM)
        time.sleep(0.2)
    return len(stopped)


def _is_our_spare(pid: int, workdir: Path) -> bool:
    """Whether `pid` is still a spare worker of a manifest under `workdir` (never signal a reused pid)."""
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    return b"--spare" in argv and any(a.startswith(str(workdir).encode()) for a in argv)


def _percentile(values: list[float], share: float) -> float:
    """The nearest-rank percentile (share in 0..1) of `values`."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(share * len(ordered)) - 1)]


def deployed_console_script(prefix: Path, name: str) -> Path:
    """`name` (a console script of pyproject.toml) as the image installs it: a venv whose interpreter imports the
    project as a regular install does (its directory on sys.path), not through the development checkout's editable
    hook, whose finder alone imports pathlib, urllib.parse and ipaddress at every interpreter start (~40 ms; more than
    the rest of the foreground under load). The venv reads its dependencies from this interpreter's site-packages."""
    import sysconfig
    import venv
    from importlib.metadata import entry_points

    (target,) = [e.value for e in entry_points(group="console_scripts", name=name)]
    module, function = target.split(":")
    if not (prefix / "bin" / "python").exists():
        venv.EnvBuilder(with_pip=False, symlinks=True).create(prefix)
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    paths = [str(Path(__file__).resolve().parents[1]), sysconfig.get_paths()["purelib"]]  # the project, then its deps
    (prefix / "lib" / version / "site-packages" / "elastic-slurm-bench.pth").write_text("\n".join(paths) + "\n")
    script = prefix / "bin" / name
    script.write_text(
        f"#!{prefix / 'bin' / 'python'}\nimport sys\nfrom {module} import {function}\n"
        f"if __name__ == '__main__':\n    sys.exit({function}())\n",
        encoding="utf-8",
    )
    script.chmod(0o755)
    return script


def bench_foreground(manifest: Manifest, workdir: Path, n: int, runs: int = FOREGROUND_RUNS) -> list[dict[str, Any]]:
    """Wall time of the ResumeProgram console script until it returns (the worker runs on, detached): p50 and p95
    of `runs` runs with a spare worker waiting (each run's spare starts the next one), and of runs without one."""
    bindir = workdir / "bin"
    bindir.mkdir(exist_ok=True)
    scontrol = bindir / "scontrol"
    scontrol.write_text("#!/bin/sh\nexit 0\n", encoding="utf-8")
    scontrol.chmod(0o755)
    resume_file = workdir / "resume.json"
    jobs = [{"job_id": j, "nodes_alloc": f"cpu-c7i-[{j * 50 + 1}-{j * 50 + 50}]"} for j in range(n // 50)]
    resume_file.write_text(json.dumps({"all_nodes_resume": f"cpu-c7i-[1-{n}]", "jobs": jobs}), encoding="utf-8")
    command = [str(deployed_console_script(workdir / "deployed", "slurm-resume"))]
    rows = []
    state_dirs: list[Path] = []
    try:
        for with_spare in (True, False):
            walls: list[float] = []
            cpus: list[float] = []
            for run in range(runs):
                # a state dir per run without spares: none ever waits there
                state_dir = workdir / ("fg-spare" if with_spare else f"fg-none-{run}")
                if state_dir not in state_dirs:
                    state_dirs.append(state_dir)
                path = _foreground_manifest(manifest, n, bindir, state_dir, workdir)
                env = {**os.environ, "ELASTIC_SLURM_MANIFEST": str(path), "SLURM_RESUME_FILE": str(resume_file)}
                if with_spare:
                    _wait_idle(state_dir, want_spare=True, env=env, command=command)
                cpu_before = resource.getrusage(resource.RUSAGE_CHILDREN)
                start = time.perf_counter()
                done = subprocess.run([*command, f"cpu-c7i-[1-{n}]"], env=env, capture_output=True, text=True)
                walls.append(time.perf_counter() - start)
                cpu_after = resource.getrusage(resource.RUSAGE_CHILDREN)
                cpus.append(cpu_after.ru_utime + cpu_after.ru_stime - cpu_before.ru_utime - cpu_before.ru_stime)
                if done.returncode != 0:
                    raise RuntimeError(f"slurm-resume failed: {done.stderr.strip()}")
                # its worker must not compete with the next measured run: its work (expand, claim, plan) is over in
                # a second; it then waits up to 30 s for Slurm to show the nodes powering down (the no-op scontrol
                # never does), asleep: ended when the bench stops
                _wait_idle(state_dir, want_spare=False, limit=3.0)
            rows.append(
                {"case": f"ResumeProgram foreground, {'a spare waiting' if with_spare else 'no spare'}", "n": n,
                 "ec2_calls": {}, "wall_s": statistics.median(walls), "cpu_s": statistics.median(cpus),
                 "p50_s": round(statistics.median(walls), 4), "p95_s": round(_percentile(walls, 0.95), 4),
                 "max_s": round(max(walls), 4), "runs": runs, "over_100ms": sum(1 for w in walls if w > 0.1)}
            )  # fmt: skip
    finally:
        _stop_spares(state_dirs)
        _stop_leftovers(workdir)
    return rows


def _stop_leftovers(workdir: Path, limit_s: float = 15.0) -> None:
    """SIGTERM every process still running from this bench's temporary `workdir` (a worker waiting out its 30 s for
    Slurm, a spare started after _stop_spares looked, one a worker primed), until none is left: the path is this
    run's own, so nothing else matches."""
    mark = str(workdir).encode()
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        left = []
        for entry in os.listdir("/proc"):
            if not entry.isdigit() or int(entry) == os.getpid():
                continue
            try:
                argv = Path(f"/proc/{entry}/cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if any(a.startswith(mark) for a in argv):
                left.append(int(entry))
                with contextlib.suppress(ProcessLookupError):
                    os.kill(int(entry), signal.SIGTERM)
        if not left:
            return
        time.sleep(0.2)


def _foreground_manifest(manifest: Manifest, n: int, bindir: Path, state_dir: Path, workdir: Path) -> Path:
    """A manifest whose every location is in capacity cool-down: the workers the foreground starts make no EC2 call
    (they power the nodes down through a no-op scontrol); only the foreground is measured."""
    final = _bigger(manifest, n).model_copy(
        update={"slurm_bin_dir": str(bindir), "aws_endpoint_url": "http://127.0.0.1:9", "state_dir": str(state_dir)}
    )
    cooling = [(p.key, loc.availability_zone) for p in final.pools for loc in p.locations]
    capacity.add_cooling(final.state_dir, cooling, time.time(), 3600)
    path = workdir / f"manifest-{state_dir.name}.json"
    if not path.exists():
        write_manifest(final, path)
    return path


def _wait_idle(
    state_dir: Path,
    want_spare: bool,
    env: dict[str, str] | None = None,
    command: list[str] | None = None,
    limit: float = 60.0,
) -> None:
    """Wait until no request is left in `state_dir`, and (want_spare) a spare waits there (primed if none)."""
    from slurm_plugin.powersave import spare

    requests = state_dir / "requests"
    room = spare.spares_dir(str(state_dir))
    if want_spare and spare.waiting(room) == 0 and command is not None:
        subprocess.run([*command, "--prime"], env=env, capture_output=True, check=False)
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        busy = requests.exists() and any(requests.iterdir())
        if not busy and (not want_spare or spare.waiting(room) > 0):
            return
        time.sleep(0.1)


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


def _parallelcluster(aws: EmulatedAws, network: Any, workdir: Path) -> ParallelClusterSide | None:
    """ParallelCluster's side of the jobs rows, or None (said in one line) when its source is nowhere to be had."""
    try:
        return ParallelClusterSide(aws, network, ROOT_CACHE, workdir)
    except ImageBuildError as exc:
        print(f"jobs rows without ParallelCluster's side: {exc}", flush=True)
        return None


def _ratio(ours: dict[str, Any], theirs: dict[str, Any]) -> float | None:
    """Our seconds to the last NodeAddr over ParallelCluster's in the same run (issue 33: <= 0.45 at N=4000)."""
    mine, pc = ours["nodeaddr"]["last_s"], theirs["nodeaddr"]["last_s"]
    return round(mine / pc, 2) if mine is not None and pc else None


def _table(rows: list[dict[str, Any]]) -> str:
    lines = [f"{'case':<52} {'N':>6} {'wall s':>8} {'CPU s':>7}  EC2 calls / NodeAddr first, half, last / p50, p95",
             "-" * 128]  # fmt: skip
    for row in rows:
        wall = "-" if row["wall_s"] is None else f"{row['wall_s']:.3f}"
        calls = ", ".join(f"{k}={v}" for k, v in row["ec2_calls"].items()) or "-"
        if "nodeaddr" in row:
            t = row["nodeaddr"]
            calls += f" / {t['first_s']}, {t['half_s']}, {t['last_s']} s"
            calls += "" if row["emulator_cpu_s"] is None else f" (moto CPU {row['emulator_cpu_s']} s)"
            calls += f" / {row['vs_parallelcluster']}x PC" if row.get("vs_parallelcluster") is not None else ""
        if "p95_s" in row:
            calls += f" / p50 {row['p50_s'] * 1000:.0f} ms, p95 {row['p95_s'] * 1000:.0f} ms ({row['runs']} runs)"
        lines.append(f"{row['case']:<52} {row['n']:>6} {wall:>8} {row['cpu_s']:>7.3f}  {calls}")
    return "\n".join(lines)


def _ns(text: str) -> tuple[int, ...]:
    try:
        values = tuple(int(v) for v in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a comma-separated list of numbers: {text!r}") from None
    if not values or min(values) < 1:
        raise argparse.ArgumentTypeError(f"each N must be at least 1: {text!r}")
    return values


def main(argv: list[str] | None = None) -> int:
    """Run every case, print the table, write the JSON results (and the plots)."""
    parser = argparse.ArgumentParser(prog="python -m bench.run", description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="only the jobs and foreground rows (issue 33)")
    parser.add_argument("--out", type=Path, default=RESULTS, help=f"results JSON (default {RESULTS})")
    parser.add_argument(
        "--job-ns", type=_ns, default=JOB_NS, help="N of the jobs rows, comma-separated (default 1000,4000)"
    )
    parser.add_argument("--foreground-runs", type=int, default=FOREGROUND_RUNS, help="runs per foreground row")
    parser.add_argument("--no-jobs", action="store_true", help="leave the jobs rows out")
    parser.add_argument(
        "--no-parallelcluster", action="store_true", help="jobs rows without ParallelCluster's side by side"
    )
    args = parser.parse_args(argv)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # stopped: the finally blocks stop the emulator
    for key, value in DUMMY_CREDENTIALS.items():
        os.environ.setdefault(key, value)
    os.environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="elastic-slurm-bench-") as tmp:
        workdir = Path(tmp)
        aws = EmulatedAws.start(workdir / "aws")
        try:
            network = build_network(aws)
            manifest = make_manifest(aws, network, workdir / "cluster")
            rows = [] if args.quick else [row for n in LAUNCH_NS for row in bench_launch(aws, manifest, n)]
            pc = None if args.no_jobs or args.no_parallelcluster else _parallelcluster(aws, network, workdir)
            for n in () if args.no_jobs else args.job_ns:
                for api in APIS:
                    for job_nodes in (n, JOB_NODES) if n > JOB_NODES else (n,):
                        rows.append(bench_jobs(aws, manifest, workdir, n, job_nodes, api))
                        if pc is not None:
                            rows.append(pc.resume_row(n, job_nodes, api))
                            rows[-2]["vs_parallelcluster"] = _ratio(rows[-2], rows[-1])
                        for row in rows[-2 if pc else -1 :]:
                            print(_table([row]).splitlines()[-1], flush=True)
            rows.extend(bench_foreground(manifest, workdir, 5000, args.foreground_runs))
            if not args.quick:
                rows.append(bench_planning(manifest, 10_000))
                rows.extend(bench_lookup(aws, manifest, n) for n in (4000, 10_000))
        finally:
            aws.stop()
    print(_table(rows))
    stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    machine = {
        "cpus": os.cpu_count(), "load_avg_1m_before": round(load_before[0], 2),
        "load_avg_1m": round(os.getloadavg()[0], 2), "python": sys.version.split()[0],
    }  # fmt: skip
    print(f"machine: {machine}")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(
        json.dumps({"recorded": stamp, "machine": machine, "quick": args.quick, "rows": rows}, indent=2) + "\n",
        encoding="utf-8",
    )
    print(f"\nwritten to {args.out}")
    from bench.plots import plot_results  # matplotlib: a dev dependency (requirements-dev.txt)

    for path in plot_results(args.out):
        print(f"plot: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
