"""Using a running local cloud: submit jobs, read Slurm and emulated-EC2 state, inject faults, interrupt instances.

`CloudOps` is mixed into `LocalCloud`; the demo and the e2e tests drive the cloud only through these methods, so
what they assert is what a user would see with sbatch/squeue/sacct/sinfo and the EC2 API.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from localcloud.aws.emulated_aws import EmulatedAws
from localcloud.aws.faults import Faults
from localcloud.instances import enter
from localcloud.layout import Layout
from localcloud.services import procs
from slurm_plugin.manifest import TAG_CLUSTER, TAG_POOL

LIVE = ("pending", "running")
TERMINAL_JOB_STATES = {
    "COMPLETED",
    "FAILED",
    "CANCELLED",
    "TIMEOUT",
    "NODE_FAIL",
    "OUT_OF_MEMORY",
    "BOOT_FAIL",
    "DEADLINE",
    "PREEMPTED",
}


# the command lines of the plugin's workers on a controller (slurmctld's programs, their background workers, spares)
WORKER_MARKERS = ("slurm-resume", "slurm-suspend", "prolog-wait-for-boot")


class OpsError(RuntimeError):
    """A Slurm command failed or a wait ran out (one line)."""


@dataclass(frozen=True)
class Instance:
    """One emulated EC2 instance of the cluster."""

    instance_id: str
    state: str
    region: str
    availability_zone: str
    instance_type: str
    private_ip: str
    pool: str
    market: str


@dataclass(frozen=True)
class JobRecord:
    """One job as sacct reports it (allocation line only)."""

    job_id: str
    state: str
    nodes: str
    exit_code: str
    restarts: int


def job_root(job_id: str) -> str:
    """The job id without its array task (`12_3`) or hetjob component (`12+1`) suffix."""
    return re.split(r"[_+]", job_id, maxsplit=1)[0]


class CloudOps:
    """Slurm and EC2 operations on a running local cloud (mixed into LocalCloud)."""

    layout: Layout

    def env(self) -> dict[str, str]:  # pragma: no cover - provided by LocalCloud
        raise NotImplementedError

    def aws(self) -> EmulatedAws:  # pragma: no cover - provided by LocalCloud
        raise NotImplementedError

    def info(self) -> Any:  # pragma: no cover - provided by LocalCloud
        raise NotImplementedError

    def root(self) -> Path:  # pragma: no cover - provided by LocalCloud
        raise NotImplementedError

    # ------------------------------------------------------------------ controllers
    def controller_roles(self) -> dict[str, str]:
        """`scontrol ping` as host -> "acting", "standby" or "down" (slurm_plugin/primary.py decides the same way)."""
        from slurm_plugin import primary

        return dict(primary.describe(primary.parse_ping(self.slurm("scontrol", "ping", check=False)), "-"))

    def crash_controller(self, index: int) -> list[int]:
        """Crash controller `index` (0: the primary, 1: the backup) as a failing host would: SIGKILL its slurmctld and
        the plugin workers of its machine (resume/suspend/resume-fail workers, spare workers, prologs: the processes
        of its slurmctld's UTS namespace, i.e. its machine, with such a command line), by PID. Its munged, manager,
        boot watch and exporter keep running. Returns the PIDs killed (OpsError when its slurmctld is not running)."""
        pid = procs.read_pid(self.layout.pid_file("slurmctld" if index == 0 else f"slurmctld@{index}"))
        if pid is None or not procs.is_ours(pid, "slurmctld"):
            raise OpsError(f"controller {index}: slurmctld is not running")
        machine = os.readlink(f"/proc/{pid}/ns/uts")
        victims = [pid]
        for entry in os.listdir("/proc"):
            if not entry.isdigit() or int(entry) in (pid, os.getpid()):
                continue
            if not any(marker in procs.cmdline(int(entry)) for marker in WORKER_MARKERS):
                continue
            try:
                if os.readlink(f"/proc/{entry}/ns/uts") == machine:
                    victims.append(int(entry))
            except OSError:
                continue  # gone meanwhile
        procs.kill_all(victims, signal.SIGKILL)
        return victims

    # ------------------------------------------------------------------ Slurm
    def slurm(self, *args: str, check: bool = True, timeout: float = 30, user: str | None = None) -> str:
        """Run a Slurm client command (sbatch, squeue, ...) on the controller (as `user`, default root); stdout."""
        env = self.env()
        if user is not None:
            account = enter.user(self.root(), user)
            env.update(enter.user_env(account, {"ES_LOCAL_USER": f"{account.uid}:{account.gid}"}))
            env["PATH"] = f"{self.layout.hostbin}:{env['PATH']}"
        result = subprocess.run(
            list(args), env=env, capture_output=True, text=True, timeout=timeout, cwd=self.layout.jobs
        )
        if check and result.returncode != 0:
            raise OpsError(f"{' '.join(args)}: {result.stderr.strip() or result.stdout.strip()}")
        return result.stdout

    def sbatch(self, *args: str, wrap: str | None = None, user: str | None = None) -> str:
        """Submit a batch job (output under the jobs/ dir) as `user` (default root); returns the job id."""
        extra = ["--wrap", wrap] if wrap is not None else []
        out = self.slurm("sbatch", "--parsable", "-o", str(self.layout.jobs / "%j.out"), *args, *extra, user=user)
        return out.strip().split(";")[0]

    def queue(self) -> dict[str, str]:
        """Job id (array tasks as `id_task`) -> state, for every job still in squeue."""
        out = self.slurm("squeue", "-h", "-o", "%i %T", check=False)
        return dict(line.split(None, 1) for line in out.splitlines() if line.strip())

    def nodes(self) -> dict[str, str]:
        """Node name -> sinfo state (e.g. `idle~`, `alloc`, `down~`)."""
        out = self.slurm("sinfo", "-h", "-N", "-o", "%N %t", check=False)
        return dict(line.split(None, 1) for line in out.splitlines() if line.strip())

    def node_addr(self, node: str) -> str:
        """The node's NodeAddr as slurmctld has it."""
        for word in self.slurm("scontrol", "show", "node", node, "--oneliner").split():
            if word.startswith("NodeAddr="):
                return word.split("=", 1)[1]
        raise OpsError(f"node {node}: no NodeAddr")

    def node_addrs(self) -> dict[str, str]:
        """Node name -> NodeAddr for every node (powered-down nodes have their own name as address)."""
        table: dict[str, str] = {}
        for line in self.slurm("scontrol", "show", "nodes", "--oneliner").splitlines():
            fields = dict(word.split("=", 1) for word in line.split() if "=" in word)
            if "NodeName" in fields:
                table[fields["NodeName"]] = fields.get("NodeAddr", "")
        return table

    def orphan_instances(self) -> list[Instance]:
        """Live instances that no powered-up Slurm node claims (by NodeAddr): what the cluster would leak."""
        states = self.nodes()
        claimed = {addr for node, addr in self.node_addrs().items() if not states.get(node, "~").endswith("~")}
        return [inst for inst in self.instances(LIVE) if inst.private_ip not in claimed]

    def job_restarts(self, job_id: str) -> int:
        """How often slurmctld has requeued the job so far (scontrol's Restarts=)."""
        for word in self.slurm("scontrol", "show", "job", job_id, "--oneliner", check=False).split():
            if word.startswith("Restarts="):
                return int(word.split("=", 1)[1])
        return 0

    def jobs(self, job_ids: Sequence[str]) -> list[JobRecord]:
        """sacct records (allocations only, array tasks expanded) of the given jobs."""
        out = self.slurm("sacct", "-n", "-X", "-P", "-j", ",".join(job_ids), "-o", "JobID,State,NodeList,ExitCode")
        restarts = self._restarts(job_ids)
        records = []
        for line in out.splitlines():
            job_id, state, nodes, exit_code = line.split("|")
            records.append(JobRecord(job_id, state.split()[0], nodes, exit_code, restarts.get(job_id, 0)))
        return records

    def _restarts(self, job_ids: Sequence[str]) -> dict[str, int]:
        """How often each job was requeued (sacct --duplicates lists each run)."""
        out = self.slurm("sacct", "-n", "-X", "-P", "-D", "-j", ",".join(job_ids), "-o", "JobID", check=False)
        counts: dict[str, int] = {}
        for job_id in out.split():
            counts[job_id] = counts.get(job_id, 0) + 1
        return {job_id: count - 1 for job_id, count in counts.items()}

    def wait_jobs_done(
        self, job_ids: Sequence[str], timeout: float, on_tick: Callable[[], None] | None = None
    ) -> list[JobRecord]:
        """Wait until none of the jobs is in squeue any more, then return their sacct records."""
        roots = {job_root(job_id) for job_id in job_ids}
        deadline = time.monotonic() + timeout
        while True:
            queued = {job_root(job) for job in self.queue()}
            if not roots & queued:
                break
            if time.monotonic() > deadline:
                reasons = self.slurm("squeue", "-h", "-o", "%i %T %r %N", check=False).strip().replace("\n", "; ")
                nodes = self.slurm("sinfo", "-h", "-N", "-o", "%N %t %E", check=False).strip().replace("\n", "; ")
                raise OpsError(
                    f"jobs {sorted(roots & queued)} still queued after {timeout:.0f} s: {reasons}; nodes: {nodes}"
                )
            if on_tick:
                on_tick()
            time.sleep(1)
        return self._settled_records(list(roots))

    def _settled_records(self, job_ids: list[str]) -> list[JobRecord]:
        """sacct lags slurmctld by up to a few seconds: wait until every record is in a terminal state."""
        deadline = time.monotonic() + 30
        while True:
            records = self.jobs(job_ids)
            if (records and all(r.state in TERMINAL_JOB_STATES for r in records)) or time.monotonic() > deadline:
                return records
            time.sleep(1)

    def wait_until(
        self, predicate: Callable[[], bool], timeout: float, what: str, detail: Callable[[], object] | None = None
    ) -> None:
        """Poll `predicate` every second; OpsError naming `what` (and what `detail` shows then) when it stays false."""
        deadline = time.monotonic() + timeout
        while not predicate():
            if time.monotonic() > deadline:
                seen = f"; at the end: {detail()}" if detail is not None else ""
                raise OpsError(f"timed out after {timeout:.0f} s waiting for {what}{seen}")
            time.sleep(1)

    def wait_all_powered_down(self, timeout: float) -> None:
        """Wait until every node is powered down (sinfo state ends with `~`) and no instance is live in EC2."""

        def done() -> bool:
            return all(state.endswith("~") for state in self.nodes().values()) and not self.instances(LIVE)

        self.wait_until(done, timeout, "every node powered down and every instance terminated")

    # ------------------------------------------------------------------ EC2
    def instances(self, states: Sequence[str] | None = None) -> list[Instance]:
        """The cluster's compute instances in every region, as the emulated EC2 reports them."""
        info = self.info()
        aws = self.aws()
        found = []
        # compute instances (they carry their pool), not the controllers
        filters = [{"Name": f"tag:{TAG_CLUSTER}", "Values": [info.cluster]}, {"Name": "tag-key", "Values": [TAG_POOL]}]
        if states:
            filters.append({"Name": "instance-state-name", "Values": list(states)})
        for region in info.regions:
            pages = aws.client("ec2", region).get_paginator("describe_instances").paginate(Filters=filters)
            for page in pages:
                for reservation in page["Reservations"]:
                    for inst in reservation["Instances"]:
                        tags = {t["Key"]: t["Value"] for t in inst.get("Tags", [])}
                        found.append(
                            Instance(
                                instance_id=inst["InstanceId"],
                                state=inst["State"]["Name"],
                                region=region,
                                availability_zone=inst.get("Placement", {}).get("AvailabilityZone", ""),
                                instance_type=inst.get("InstanceType", ""),
                                private_ip=inst.get("PrivateIpAddress", ""),
                                pool=tags.get(TAG_POOL, ""),
                                market=inst.get("InstanceLifecycle", "on-demand"),
                            )
                        )
        return found

    def instance_of_node(self, node: str) -> Instance:
        """The live instance whose private IP is the node's NodeAddr."""
        addr = self.node_addr(node)
        for inst in self.instances(LIVE):
            if inst.private_ip == addr:
                return inst
        raise OpsError(f"node {node} (NodeAddr {addr}) has no live instance")

    def interrupt(self, instance_id: str) -> None:
        """Emulate a spot interruption: AWS terminates the instance (the runner then stops what it runs)."""
        info = self.info()
        for inst in self.instances():
            if inst.instance_id == instance_id:
                self.aws().client("ec2", inst.region).terminate_instances(InstanceIds=[instance_id])
                return
        raise OpsError(f"no instance {instance_id} in cluster {info.cluster}")

    def set_faults(self, faults: Faults) -> None:
        """Replace the emulated AWS's active faults (capacity errors, throttling, ...)."""
        self.aws().set_faults(faults)

    def clear_faults(self) -> None:
        """Emulated AWS behaves again."""
        self.aws().clear_faults()
