"""`make demo`: start the local cloud, run a small mixed workload, show the elastic loop, print what happened.

Steps: validate every example config; bring the local cloud up with `local-demo.yaml` (real slurmctld/slurmd/slurmdbd,
emulated EC2); submit single-node jobs, one 4-node job and a 20-task job array; show nodes powering up across AZs
while jobs run; wait for scale-down and for every instance to be terminated; draw the run's timeline (a PNG from the
cluster's Prometheus, in the state dir) and print what it cost (sacct x prices); print a summary. The last line is
machine-readable: `demo: J jobs completed, F failed, I instances left running, N nodes launched in Z AZs, Slurm V`.
The workload is submitted by an ordinary user (neither root nor a Slurm admin), as on a real cluster.
Nothing is left running unless `--keep` is given.
"""

from __future__ import annotations

import argparse
import contextlib
import glob
import sys
import time
from collections import Counter
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path

from cluster_config import ConfigInvalid, load
from elastic_slurm.commands.config_cmds import summary
from localcloud.aws.faults import CapacityFault, Faults
from localcloud.cloud import LocalCloud, LocalCloudError
from localcloud.image.slurm_root import JOB_USER
from localcloud.instances.login_nodes import sbatch_on_login, wait_ready
from localcloud.layout import DEFAULT_STATE_DIR, REPO_ROOT
from localcloud.ops import LIVE, OpsError

DEMO_CONFIG = REPO_ROOT / "cluster_config" / "examples" / "local-demo.yaml"
JOB_TIMEOUT = 240
# A capacity shortage the demo injects, so the launch visibly falls over to other instance types / AZs.
SHORTAGE = Faults(capacity=(CapacityFault(instance_type="c7i.large", availability_zone="us-east-1a"),))
SCALE_DOWN_TIMEOUT = 180


def _say(text: str) -> None:
    print(text, flush=True)


def validate_examples() -> bool:
    """Validate every example config and print its summary."""
    ok = True
    for path in sorted(glob.glob(str(REPO_ROOT / "cluster_config" / "examples" / "*.yaml"))):
        try:
            config = load(path)
        except ConfigInvalid as exc:
            ok = False
            for error in exc.errors:
                _say(f"  {exc.source}: {error}")
            continue
        _say(f"  {Path(path).name}: valid")
        for line in summary(config):
            _say(f"  {line}")
    return ok


def submit_workload(cloud: LocalCloud) -> dict[str, str]:
    """Submit the sample workload; returns job id → description."""
    jobs: dict[str, str] = {}
    login = wait_ready(cloud)  # the config's login node: users submit there (docs/login-nodes.md)
    for i in range(1, 4):
        jid = sbatch_on_login(
            cloud, login, "-J", f"single{i}", wrap=f"echo single {i} on $SLURMD_NODENAME; sleep 4", user=JOB_USER
        )
        jobs[jid] = f"single-node job {i} (from login node {login.hostname})"
    jid = cloud.sbatch("-J", "mpi4", "-N", "4", wrap="srun -l printenv SLURMD_NODENAME; sleep 3", user=JOB_USER)
    jobs[jid] = "4-node job (all-or-nothing launch)"
    jid = cloud.sbatch("-J", "array20", "--array=1-20", wrap="echo task $SLURM_ARRAY_TASK_ID; sleep 2", user=JOB_USER)
    jobs[jid] = "job array, 20 tasks"
    return jobs


class Progress:
    """Prints one line whenever the cluster's picture changes (jobs, nodes, instances)."""

    def __init__(self, cloud: LocalCloud, start: float) -> None:
        self.cloud = cloud
        self.start = start
        self.last = ""
        self.azs_seen: set[str] = set()

    def tick(self) -> None:
        """Sample the cluster and print a line if anything changed."""
        try:
            queue = Counter(self.cloud.queue().values())
            nodes = Counter(_node_class(state) for state in self.cloud.nodes().values())
            live = self.cloud.instances(LIVE)
        except (OpsError, LocalCloudError):
            return
        per_az = Counter(inst.availability_zone for inst in live)
        self.azs_seen |= set(per_az)
        jobs = ", ".join(f"{n} {s.lower()}" for s, n in sorted(queue.items())) or "none queued"
        node_text = ", ".join(f"{n} {s}" for s, n in sorted(nodes.items()))
        az_text = ", ".join(f"{az}:{n}" for az, n in sorted(per_az.items())) or "none"
        line = f"jobs: {jobs} | nodes: {node_text} | instances: {az_text}"
        if line != self.last:
            _say(f"  t={time.monotonic() - self.start:5.1f}s  {line}")
            self.last = line


def _node_class(state: str) -> str:
    if state.endswith("~"):
        return "powered-down" if state.startswith(("idle", "down")) else "powering-up"
    if state.endswith("%"):
        return "powering-down"
    if state.endswith("#"):
        return "booting"
    return state.rstrip("*$") or state


def job_table(cloud: LocalCloud, job_ids: Sequence[str]) -> list[tuple[str, str, str, str, float | None]]:
    """(job id, name, state, nodes, submit→start seconds) per allocation, from sacct."""
    out = cloud.slurm(
        "sacct",
        "-n",
        "-X",
        "-P",
        "-j",
        ",".join(job_ids),
        "-o",
        "JobID,JobName,State,NodeList,Submit,Start",
        check=False,
    )
    rows = []
    for line in out.splitlines():
        parts = line.split("|")
        if len(parts) != 6:
            continue
        job_id, name, state, nodes, submit, start = parts
        wait = None
        with contextlib.suppress(ValueError):  # "Unknown" start of a job that never ran
            wait = (datetime.fromisoformat(start) - datetime.fromisoformat(submit)).total_seconds()
        rows.append((job_id, name, state.split()[0], nodes, wait))
    return rows


def run(keep: bool, state_dir: str) -> int:
    """The whole demo; returns the exit code (0 when every job completed and nothing is left running)."""
    _say("== 1/6 validating the example configs")
    if not validate_examples():
        return 2
    cloud = LocalCloud(state_dir)
    _say(f"== 2/6 starting the local cloud ({DEMO_CONFIG.name}) in {state_dir}")
    started = time.monotonic()
    try:
        info = cloud.up(DEMO_CONFIG)
    except (LocalCloudError, OpsError, ConfigInvalid) as exc:
        _say(f"demo: local cloud did not start: {exc}")
        return 1
    _say(f"  up in {time.monotonic() - started:.0f} s: cluster {info.cluster}, emulated AWS at {info.aws_endpoint_url}")
    try:
        return _workload(cloud, info.suspend_time)
    finally:
        if keep:
            _say(f"--keep: the local cloud stays up (state dir {state_dir}); stop it with `elastic-slurm local down`")
        else:
            cloud.down()
            _say("local cloud stopped")


def _workload(cloud: LocalCloud, suspend_time: int) -> int:
    started = time.time()
    cloud.set_faults(SHORTAGE)
    _say(
        f"== 3/6 emulated EC2 has no {SHORTAGE.capacity[0].instance_type} capacity in "
        f"{SHORTAGE.capacity[0].availability_zone} (InsufficientInstanceCapacity): watch the plugin fall over"
    )
    _say("  submitting: 3 single-node jobs from the login node, one 4-node job, a 20-task job array")
    start = time.monotonic()
    try:
        jobs = submit_workload(cloud)
    except OpsError as exc:
        _say(f"demo: could not submit the workload: {exc}")
        return 1
    progress = Progress(cloud, start)
    failures: list[str] = []
    try:
        records = cloud.wait_jobs_done(list(jobs), timeout=JOB_TIMEOUT, on_tick=progress.tick)
    except OpsError as exc:
        failures.append(str(exc))
        records = cloud.jobs(list(jobs))
    _say(f"== 4/6 jobs done; waiting for scale-down (SuspendTime={suspend_time}s) and instance termination")

    def scaled_down() -> bool:
        progress.tick()
        return all(s.endswith("~") for s in cloud.nodes().values()) and not cloud.instances(LIVE)

    try:
        cloud.wait_until(scaled_down, SCALE_DOWN_TIMEOUT, "every node powered down and every instance terminated")
    except OpsError as exc:
        failures.append(str(exc))
    _say("== 5/6 what it looked like and what it cost (from the cluster's Prometheus and sacct)")
    _picture_and_cost(cloud, started)
    _say("== 6/6 summary")
    return _summary(cloud, jobs, records, progress, failures)


def _picture_and_cost(cloud: LocalCloud, since: float) -> None:
    """The timeline PNG (elastic_slurm/report) and the cost report (`elastic-slurm local cost`) of the run."""
    from elastic_slurm.cli import main as cli
    from elastic_slurm.report import PrometheusError, ReportError
    from elastic_slurm.report.local_cloud import write_timeline

    try:
        _say(f"  timeline: {write_timeline(cloud, since)}  (nodes, instances per AZ, jobs, launches, capacity errors)")
    except (PrometheusError, ReportError, OSError) as exc:
        _say(f"  timeline: not drawn: {' '.join(str(exc).split())}")
    when = f"uts{int(since)}"  # an instant, whatever the controller's time zone
    cli(["local", "cost", "--since", when, "--by", "user", "--state-dir", str(cloud.layout.root)])


def _summary(
    cloud: LocalCloud, jobs: dict[str, str], records: Sequence[object], progress: Progress, failures: list[str]
) -> int:
    rows = job_table(cloud, list(jobs))
    _say(f"  {'job':<12} {'name':<10} {'state':<11} {'submit→start':>12}  nodes")
    for job_id, name, state, nodes, wait in rows:
        wait_text = f"{wait:.0f} s" if wait is not None else "-"
        _say(f"  {job_id:<12} {name:<10} {state:<11} {wait_text:>12}  {nodes}")
    everything = cloud.instances()
    by_place = Counter((inst.availability_zone, inst.instance_type, inst.market) for inst in everything)
    _say(f"  {'AZ':<12} {'type':<12} {'market':<10} instances launched")
    for (az, itype, market), count in sorted(by_place.items()):
        _say(f"  {az:<12} {itype:<12} {market:<10} {count}")
    completed = sum(1 for r in rows if r[2] == "COMPLETED")
    failed = len(rows) - completed
    left = len(cloud.instances(LIVE))
    azs = {inst.availability_zone for inst in everything}
    for failure in failures:
        _say(f"  problem: {failure}")
    _say(
        f"demo: {completed} jobs completed, {failed} failed, {left} instances left running, "
        f"{len(everything)} nodes launched in {len(azs)} AZs, Slurm {cloud.info().slurm_version}"
    )
    return 0 if failed == 0 and left == 0 and not failures and rows else 1


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of `make demo` / `python -m elastic_slurm.demo`."""
    parser = argparse.ArgumentParser(prog="elastic-slurm demo", description=__doc__.splitlines()[0])
    parser.add_argument("--keep", action="store_true", help="leave the local cloud running afterwards")
    parser.add_argument("--state-dir", default=str(DEFAULT_STATE_DIR), help="state directory of the local cloud")
    args = parser.parse_args(argv)
    return run(args.keep, args.state_dir)


if __name__ == "__main__":
    sys.exit(main())
