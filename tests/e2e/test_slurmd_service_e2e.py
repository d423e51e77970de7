"""slurmd and slurmctld as systemd's, in the local cloud (issue 31, items 2 and 3).

- A compute instance's slurmd is started by Slurm's own slurmd.service with our drop-in (the bootstrap's options,
  the unit's limits, Restart=on-failure), not by the user data: the boot returns, slurmd keeps the machine's boot
  clock, and a crashed slurmd comes back on the same node.
- The cluster manager's unit (Type=notify) is started once the manager has run its first cycle.
- Resume workers survive `systemctl restart slurmctld` (the drop-in's KillMode=process): a restart while a worker is
  still launching leaves the worker running, and its node comes up.
- A node Slurm's ResumeAfter brought back from a capacity cool-down is idle~ but NOT_RESPONDING, and after a
  slurmctld restart never available; one manager cycle heals it (reconcile's REFRESH) and a job pinned to it runs.
The units run under the systemctl stand-in, which tracks each unit's processes by cgroup as systemd does
(tests/e2e/test_slurmd_service_units.py).
"""

from __future__ import annotations

import json
import os
import re
import resource
import signal
from pathlib import Path

import pytest

from localcloud.aws.faults import Faults
from localcloud.cloud import LocalCloud
from localcloud.instances.instance_runner import unit_dir
from localcloud.services import procs
from slurm_plugin.hostlists import expand
from slurm_plugin.manager.metrics import METRICS_FILE
from slurm_plugin.manifest import load_manifest
from slurm_plugin.powersave import spare
from tests.e2e.conftest import assert_no_orphans, cold_nodes, kept_up, manager_cycle

pytestmark = pytest.mark.e2e
MANAGER_UNIT = "slurm-clustermgr.service"


def _slurmd(cloud: LocalCloud, instance_id: str) -> int:
    """The PID of the instance's slurmd.service (the stand-in's PID file, in the instance's own /run)."""
    pid = procs.read_pid(unit_dir(cloud.layout, instance_id) / "slurmd.service.pid")
    assert pid is not None and procs.cmdline(pid).startswith("/usr/sbin/slurmd --systemd"), pid
    return pid


def _limit(pid: int, name: str) -> list[str]:
    lines = Path(f"/proc/{pid}/limits").read_text().splitlines()
    return next(line for line in lines if line.startswith(name)).split()[-3:-1]


def _expected(wanted: int | None, resource_id: int) -> str:
    """What a unit's limit is here: as asked, or this machine's hard limit when lower (no CAP_SYS_RESOURCE)."""
    hard = resource.getrlimit(resource_id)[1]
    if wanted is None:
        return "unlimited" if hard == resource.RLIM_INFINITY else str(hard)
    return str(wanted if hard == resource.RLIM_INFINITY else min(wanted, hard))


def test_compute_slurmd_is_slurmd_service_and_the_boot_returns(cloud: LocalCloud) -> None:
    (node,) = cold_nodes(cloud, 1)
    with kept_up(cloud, node):  # read after the job: the node must not power down meanwhile
        (record,) = cloud.wait_jobs_done([cloud.sbatch("-w", node, wrap="true")], timeout=150)
        assert record.state == "COMPLETED"
        instance = cloud.instance_of_node(node)
        pid = _slurmd(cloud, instance.instance_id)
        # the bootstrap's options reached Slurm's unit through SLURMD_OPTIONS (configless)
        assert re.search(rf"--systemd -N {node} --conf-server \S+", procs.cmdline(pid)), procs.cmdline(pid)
        # the unit's limits (LimitMEMLOCK=infinity, LimitNOFILE=131072; capped by this machine's hard limits)
        assert _limit(pid, "Max locked memory") == [_expected(None, resource.RLIMIT_MEMLOCK)] * 2
        assert _limit(pid, "Max open files") == [_expected(131072, resource.RLIMIT_NOFILE)] * 2
        # in the unit's own cgroup, not in the boot's: the user data ended once slurmd.service had started
        cgroup = Path((unit_dir(cloud.layout, instance.instance_id) / "slurmd.service.cgroup").read_text().strip())
        assert str(pid) in (cgroup / "cgroup.procs").read_text().split()
        boot_log = (cloud.layout.log / "instances" / f"{instance.instance_id}.log").read_text()
        assert f"slurmd.service started: node {node}" in boot_log
        boot = json.loads((cloud.layout.instances_dir / f"{instance.instance_id}.json").read_text())
        assert "user-data" not in procs.cmdline(boot["pid"])  # the user data (cloud-init's part) has ended
        # the machine's boot clock: slurmd runs in the time namespace the whole instance booted in, not the host's
        assert procs.time_namespace(pid) != procs.HOST_TIME_NS


def test_a_crashed_slurmd_is_started_again_on_the_same_node_and_boot_clock(cloud: LocalCloud) -> None:
    (node,) = cold_nodes(cloud, 1)
    with kept_up(cloud, node):  # the same instance throughout: never powered down while idle here
        (record,) = cloud.wait_jobs_done([cloud.sbatch("-w", node, wrap="true")], timeout=150)
        assert record.state == "COMPLETED"
        instance = cloud.instance_of_node(node)
        first = _slurmd(cloud, instance.instance_id)
        clock = procs.time_namespace(first)
        os.kill(first, signal.SIGKILL)  # a crash: Restart=on-failure starts it again after RestartSec=5

        def restarted() -> bool:
            pid = procs.read_pid(unit_dir(cloud.layout, instance.instance_id) / "slurmd.service.pid")
            return pid is not None and pid != first and procs.cmdline(pid).startswith("/usr/sbin/slurmd")

        cloud.wait_until(restarted, 30, f"slurmd of {node} started again")
        second = _slurmd(cloud, instance.instance_id)
        assert procs.time_namespace(second) == clock  # the same machine, not a reboot: slurmctld sees no new boot
        # the node serves jobs again, on the same instance
        (record,) = cloud.wait_jobs_done([cloud.sbatch("-w", node, wrap="true")], timeout=90)
        assert record.state == "COMPLETED"
        assert cloud.instance_of_node(node).instance_id == instance.instance_id
        log = (unit_dir(cloud.layout, instance.instance_id) / "slurmd.service.log").read_text()
        assert "restarting in 5 s (Restart=on-failure)" in log


def _unit_processes(cloud: LocalCloud, unit: str) -> set[int]:
    """The processes of a controller unit's cgroup (the stand-in's, as systemd's)."""
    cgroup = Path((cloud.layout.run / "units" / f"{unit}.cgroup").read_text().strip())
    return {int(pid) for pid in (cgroup / "cgroup.procs").read_text().split()}


def test_resume_workers_survive_a_slurmctld_restart_and_their_nodes_come_up(cloud: LocalCloud) -> None:
    old = procs.read_pid(cloud.layout.run / "units" / "slurmctld.service.pid")
    assert old is not None
    request: tuple[str, int] | None = None
    for _ in range(3):
        (node,) = cold_nodes(cloud, 1)
        # the spare the boot started (elastic-slurm-config-apply) waits outside slurmctld's cgroup and would take the
        # request: without it, ResumeProgram starts the worker itself, in slurmctld's cgroup, where a restart could
        # kill it
        _withdraw_waiting_spares(cloud)
        # every AWS call takes 8 s: the resume worker is still launching when slurmctld restarts
        cloud.set_faults(Faults(latency_ms=8000))
        since = len(_plugin_log(cloud))
        job = cloud.sbatch("-w", node, wrap="true")
        cloud.wait_until(
            lambda n=node, s=since: _resume_request(cloud, n, s) is not None, 60, f"ResumeProgram ran for {node}"
        )
        request = _resume_request(cloud, node, since)
        assert request is not None
        if request[1] in _unit_processes(cloud, "slurmctld.service"):
            break
        # a spare started between the kill and the request (the config-sync timer primes one every minute) and
        # took it, outside slurmctld's cgroup (seen once in a busy run): not this test's case; again on another node
        request = None
        cloud.clear_faults()
        cloud.wait_jobs_done([job], timeout=180)
    assert request is not None, "no resume worker in slurmctld's cgroup in 3 attempts"
    request_id, worker = request
    # the spares in slurmctld's cgroup (a worker the foreground started starts one for the next request before it
    # works): they have no request and must still wait after the restart
    spares = _waiting_spares(cloud) & _unit_processes(cloud, "slurmctld.service")
    _restart_slurmctld(cloud)
    new = procs.read_pid(cloud.layout.run / "units" / "slurmctld.service.pid")
    assert new is not None and new != old and procs.cmdline(new).startswith("/usr/sbin/slurmctld")
    assert not procs.cmdline(old).startswith("/usr/sbin/slurmctld")
    # KillMode=process: only slurmctld itself was stopped. The worker still launches (or has finished its request: a
    # killed one never logs `done`)
    assert procs.cmdline(worker) or _done(cloud, worker, request_id), "the worker was killed with slurmctld"
    assert all("--spare" in procs.cmdline(p) for p in spares), f"idle spares of {spares} ended with slurmctld"
    cloud.clear_faults()
    # (not restarts == 0: every AWS call took 8 s until now, and a launch past ResumeTimeout is requeued by Slurm; the
    # worker's own survival is what `_done` checks)
    with kept_up(cloud, node):  # set after the restart, which forgets it; the instance is read after the job
        (record,) = cloud.wait_jobs_done([job], timeout=180)
        assert (record.state, record.nodes) == ("COMPLETED", node)
        assert cloud.instance_of_node(node).private_ip == cloud.node_addr(node)
    cloud.wait_until(lambda: _done(cloud, worker, request_id), 60, f"worker {worker} done with request {request_id}")


def _resume_request(cloud: LocalCloud, node: str, since: int) -> tuple[str, int] | None:
    """The request id and worker pid of the ResumeProgram run for `node` after plugin.log line `since`, from the
    foreground's `handed to worker pid` line and the request's own file (its hostlist; the worker removes it when
    done, and every AWS call takes seconds here); None before ResumeProgram ran."""
    handed = re.compile(r" INFO slurm-resume: request (\S+): slurm-resume of \d+ nodes handed to worker pid (\d+)$")
    requests = Path(load_manifest(cloud.layout.manifest).state_dir) / "requests"
    for line in _plugin_log(cloud)[since:]:
        match = handed.search(line)
        if match is None:
            continue
        try:
            hostlist = json.loads((requests / match[1] / "request.json").read_text())["hostlist"]
        except (OSError, ValueError):
            continue
        if node in expand(hostlist):
            return match[1], int(match[2])
    return None


def _restart_slurmctld(cloud: LocalCloud) -> None:
    restart = cloud.on_controller(
        ["/bin/bash", "-c", "set -a; . /etc/elastic-slurm/env; set +a; exec systemctl restart slurmctld"]
    )
    assert restart.returncode == 0, restart.stderr


def test_a_node_back_from_a_capacity_cool_down_runs_a_job_after_a_slurmctld_restart(cloud: LocalCloud) -> None:
    """Slurm's ResumeAfter (the plugin's capacity cool-down) RESUMEs the DOWN~ node, which sets NOT_RESPONDING until
    it registers; a powered-down node never does, and slurmctld's restart leaves it up but not available: a job pinned
    to it pends ReqNodeNotAvail (the negative half, asserted). The manager's cycle repeats its power-down (REFRESH),
    which clears the flag, and the job runs."""
    (node,) = cold_nodes(cloud, 1, prefix="cpu-big-")
    reason = "(Code:InsufficientInstanceCapacity) e2e cool-down"
    cloud.slurm("scontrol", "update", f"nodename={node}", "state=DOWN", f"reason={reason}", "resumeafter=1")

    def flags() -> str:
        out = cloud.slurm("scontrol", "show", "node", node, "--oneliner")
        return out.split(" State=", 1)[1].split()[0]

    cloud.wait_until(lambda: flags().startswith("IDLE+") and "NOT_RESPONDING" in flags(), 120, f"{node} resumed")
    assert "POWERED_DOWN" in flags()
    _restart_slurmctld(cloud)
    job = cloud.sbatch("-p", "cpu", "-w", node, wrap="true")
    try:

        def pending_reason() -> str:
            return cloud.slurm("squeue", "-h", "-j", job, "-o", "%T %r", check=False).strip()

        cloud.wait_until(lambda: "ReqNodeNotAvail" in pending_reason(), 90, f"job {job} held off {node}")
        before = _counter(cloud, "stale_not_responding_cleared")
        manager_cycle(cloud)
        assert _counter(cloud, "stale_not_responding_cleared") >= before + 1  # this node (and any an earlier test left)
        with kept_up(cloud, node):  # after the cycle's power-down: the instance is read after the job
            (record,) = cloud.wait_jobs_done([job], timeout=240)
            assert (record.state, record.nodes) == ("COMPLETED", node)
            assert cloud.instance_of_node(node).private_ip == cloud.node_addr(node)  # EC2's side: its live instance
        assert_no_orphans(cloud)
    finally:
        cloud.slurm("scancel", job, check=False)


def _counter(cloud: LocalCloud, name: str) -> int:
    path = Path(load_manifest(cloud.layout.manifest).state_dir) / METRICS_FILE
    return int(json.loads(path.read_text())["counters"].get(name, 0)) if path.exists() else 0


def _withdraw_waiting_spares(cloud: LocalCloud) -> None:
    """Stop this cloud's waiting spare workers (slurm_plugin/powersave/spare.py) the way an idle spare withdraws: its
    FIFO renamed to `.idle` (no foreground can claim it any more; a rename that fails means it was just claimed, and
    a claimed spare is serving a request: never stopped here), then SIGTERM."""
    for fifo in _spare_fifos(cloud):
        idle = fifo.with_suffix(".idle")
        try:
            fifo.rename(idle)
        except FileNotFoundError:
            continue
        pid = int(fifo.stem)
        if "--spare" in procs.cmdline(pid):
            os.kill(pid, signal.SIGTERM)
            cloud.wait_until(lambda p=pid: not procs.cmdline(p), 30, f"spare {pid} gone")
        idle.unlink(missing_ok=True)


def _spare_fifos(cloud: LocalCloud) -> list[Path]:
    """The FIFOs of the spare workers waiting for a request (not claimed), every host's."""
    return sorted((Path(load_manifest(cloud.layout.manifest).state_dir) / spare.SPARES).glob("*/*.fifo"))


def _waiting_spares(cloud: LocalCloud) -> set[int]:
    """The spare workers waiting for a request (their FIFO not claimed): a claimed one ends once it has served."""
    return {int(fifo.stem) for fifo in _spare_fifos(cloud)}


def _plugin_log(cloud: LocalCloud) -> list[str]:
    return (cloud.layout.log / "plugin.log").read_text().splitlines()


def _done(cloud: LocalCloud, worker: int, request_id: str) -> bool:
    """Whether the resume worker `worker` logged the end of request `request_id`."""
    return any(f" {worker} INFO slurm-resume: request {request_id} done: " in line for line in _plugin_log(cloud))


def test_the_cluster_manager_unit_is_started_once_its_first_cycle_ran(cloud: LocalCloud) -> None:
    """slurm-clustermgr.service is Type=notify (slurm_plugin/manager/readiness.py): the controller's boot
    (`systemctl enable --now`, stacks/user_data.py) returns once the manager has run one cycle — its metrics are
    written by then — and not before. The session cloud boots without the manager (the tests drive its cycles, the
    unit is in ES_LOCAL_UNITS_SKIP); here it is started from its unit file as the boot starts it, then stopped."""
    metrics = Path(load_manifest(cloud.layout.manifest).state_dir) / METRICS_FILE
    before = metrics.stat().st_mtime if metrics.exists() else 0.0
    environment = "set -a; . /etc/elastic-slurm/env; set +a; ES_LOCAL_UNITS_SKIP="
    started = cloud.on_controller(["/bin/bash", "-c", f"{environment}; exec systemctl enable --now {MANAGER_UNIT}"])
    try:
        assert started.returncode == 0, started.stderr
        assert metrics.stat().st_mtime > before  # the first cycle ran before the start returned
        pid = procs.read_pid(cloud.layout.run / "units" / f"{MANAGER_UNIT}.pid")
        assert pid is not None and "slurm-clustermgr" in procs.cmdline(pid)
    finally:
        stopped = cloud.on_controller(
            ["/bin/bash", "-c", f"{environment}; exec systemctl disable --now {MANAGER_UNIT}"]
        )
    assert stopped.returncode == 0, stopped.stderr
    assert not procs.cmdline(pid)
