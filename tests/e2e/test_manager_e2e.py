"""The cluster manager end to end in the local cloud: real slurmctld/slurmd, emulated EC2 + SQS, and the manager run
as its real CLI (`python -m slurm_plugin.manager.daemon --once`) between the steps of each scenario.

One local cloud of tests/e2e/configs/manager.yaml (cluster `mgr`, pool cpu-small, cpu-small-1 always on) is shared by
the module, in its own state dir and on its own random ports, so it never meets the session cloud of conftest.py.
Tests run in file order: the always-on node is started by the first manager cycle and replaced by the later tests.
Nothing lost: every test ends with all its jobs COMPLETED (after a requeue where one is expected) and no orphan
instance in the emulated EC2.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from localcloud.cloud import LocalCloud
from localcloud.instances.instance_runner import instance_markers, unit_dir
from localcloud.layout import REPO_ROOT
from localcloud.ops import LIVE, Instance, JobRecord, OpsError
from localcloud.services import procs
from slurm_plugin.manager.metrics import METRICS_FILE
from slurm_plugin.manifest import TAG_CLUSTER, TAG_POOL, load_manifest
from slurm_plugin.naming import fleet_parameter
from tests.e2e.conftest import assert_no_orphans, module_cloud

pytestmark = pytest.mark.e2e

CONFIG = Path(__file__).resolve().parent / "configs" / "manager.yaml"
STATE_DIR = Path("/var/tmp/elastic-slurm-mgr-e2e")
ALWAYS_ON = "cpu-small-1"
DYING = "cpu-small-2"  # the node whose instance dies mid-job (the in_flight fixture)
HEALTHCHECK = REPO_ROOT / "assets" / "health" / "elastic-slurm-healthcheck"
NVSMI_FIXTURES = REPO_ROOT / "tests" / "fixtures" / "nvidia-smi"
ORPHAN_GRACE = 60  # long in every cycle but the orphan test's: a resume in flight is never mistaken for an orphan
# First run: stays busy until its node fails; after the requeue: done at once (SLURM_RESTART_COUNT counts requeues).
RUNS_UNTIL_REQUEUED = 'if [ "${SLURM_RESTART_COUNT:-0}" -ge 1 ]; then echo ran-on=$SLURMD_NODENAME; else sleep 600; fi'
TICK = 3.0  # seconds between manager cycles while a test waits
# the site Prolog of manager.yaml (slurmd runs it as root before a job's first step on a node): it fails once for each
# FAIL_NEXT_PROLOG file a test drops on the shared file system (only one prolog can remove it)
PROLOG = "/shared/e2e-prolog"
FAIL_NEXT_PROLOG = "e2e-fail-next-prolog"
PROLOG_SCRIPT = f"#!/bin/sh\nrm /shared/{FAIL_NEXT_PROLOG} 2>/dev/null && exit 1\nexit 0\n"


@dataclass
class Mgr:
    """The local cloud plus the manager CLI and the events queue it reads."""

    cloud: LocalCloud
    queue_url: str
    cycles: int = 0
    last: float = 0.0

    def cycle(self, orphan_grace: int = ORPHAN_GRACE) -> None:
        """One manager cycle as the real CLI; fails the test (with the manager's log) if the cycle failed."""
        cmd = [  # ResumeTimeout: each pool's, from the manifest, as the systemd unit runs it
            "/opt/elastic-slurm/bin/slurm-clustermgr", "--once",
            "--manifest", str(self.cloud.layout.manifest),
            "--orphan-grace", str(orphan_grace),
            "--events-queue-url", self.queue_url,
        ]  # fmt: skip
        # on the controller, as the user its systemd unit runs it as (assets/systemd/slurm-clustermgr.service)
        role = self.cloud.principals().controller.env()  # the controller role, as its instance profile
        done = self.cloud.on_controller(cmd, user="slurm", env={**role, "AWS_DEFAULT_REGION": "us-east-1"})
        self.cycles += 1
        self.last = time.monotonic()
        assert done.returncode == 0, f"manager cycle failed ({done.returncode}): {done.stderr}\n{self.log_tail()}"

    def tick(self) -> None:
        """A manager cycle if the last one is TICK seconds old (for wait loops)."""
        if time.monotonic() - self.last >= TICK:
            self.cycle()

    def log_tail(self, lines: int = 30) -> str:
        path = self.cloud.layout.log / "clustermgr.log"
        return "\n".join(path.read_text().splitlines()[-lines:]) if path.exists() else "(no clustermgr.log)"

    def wait(self, predicate: Callable[[], object], timeout: float, what: str) -> None:
        """Wait for `predicate()` with a manager cycle every TICK seconds."""

        def check() -> bool:
            self.tick()
            return bool(predicate())

        self.cloud.wait_until(check, timeout, what)

    def wait_jobs(self, jobs: list[str], timeout: float = 300) -> list[JobRecord]:
        return self.cloud.wait_jobs_done(jobs, timeout, on_tick=self.tick)

    def counters(self) -> dict[str, int]:
        """The manager's counters (manager-metrics.json in the manifest's state_dir)."""
        path = Path(load_manifest(self.cloud.layout.manifest).state_dir) / METRICS_FILE
        counters: dict[str, int] = json.loads(path.read_text())["counters"]
        return counters

    def replaced(self, node: str, old_instance: str) -> bool:
        """The node is idle again on a live instance other than `old_instance`."""
        if self.state(node) != "idle":
            return False
        try:
            return self.cloud.instance_of_node(node).instance_id != old_instance
        except OpsError:
            return False

    def state(self, node: str) -> str:
        return self.cloud.nodes().get(node, "?")

    def reason_logged(self, node: str) -> str:
        """The last reason slurmctld logged setting for `node` (`update_node: node N reason set to: R`)."""
        marker = f"update_node: node {node} reason set to: "
        lines = (self.cloud.layout.log / "slurmctld.log").read_text(errors="replace").splitlines()
        return next((line.split(marker, 1)[1] for line in reversed(lines) if marker in line), "")

    def reason(self, node: str) -> str:
        out = self.cloud.slurm("scontrol", "show", "node", node, "--oneliner")
        return out.split(" Reason=", 1)[1].strip() if " Reason=" in out else ""


@pytest.fixture(scope="module")
def mgr(request: pytest.FixtureRequest) -> Iterator[Mgr]:
    """A local cloud of manager.yaml with an SQS events queue, always torn down."""
    with module_cloud(request, CONFIG, STATE_DIR, "cluster manager e2e") as cloud:
        prolog = cloud.layout.shared / Path(PROLOG).name
        prolog.write_text(PROLOG_SCRIPT)
        prolog.chmod(0o755)
        sqs = cloud.aws().client("sqs", "us-east-1")
        queue_url = sqs.create_queue(QueueName="mgr-ec2-events")["QueueUrl"]
        yield Mgr(cloud, queue_url)


def nothing_lost(mgr: Mgr, jobs: list[str], records: list[JobRecord]) -> None:
    """Every job COMPLETED and, after the manager's cycles, no orphan instance left."""
    assert {r.job_id: r.state for r in records} == {j: "COMPLETED" for j in jobs}
    mgr.wait(lambda: not mgr.cloud.orphan_instances(), 60, "no orphan instances")
    assert_no_orphans(mgr.cloud)


def kill_node_instance(mgr: Mgr, node: str) -> subprocess.Popen[bytes]:
    """The node's instance "dies" while EC2 still says running: SIGKILL its slurmd, slurmstepd and job (everything in
    the emulated instance's own time namespace). Never by session: in some sandboxes every process shares one.

    A `sleep` placed in that namespace first keeps it alive until EC2 terminates the instance (the instance runner
    then stops it), so the kernel cannot hand the namespace's id to a new instance meanwhile. Returns the sleep, for
    the caller to stop if it is still there at the end.
    """
    units = unit_dir(mgr.cloud.layout, mgr.cloud.instance_of_node(node).instance_id)  # slurmd.service's PID file
    slurmd = procs.read_pid(units / "slurmd.service.pid")
    assert slurmd is not None and procs.is_ours(slurmd, "slurmd"), f"no slurmd for {node}"
    namespace = procs.time_namespace(slurmd)
    assert namespace and namespace != procs.HOST_TIME_NS, f"slurmd of {node} is not in an instance's namespace"
    holder = subprocess.Popen(["nsenter", f"--time=/proc/{slurmd}/ns/time", "sleep", "900"])
    mgr.cloud.wait_until(lambda: procs.time_namespace(holder.pid) == namespace, 10, "namespace holder")
    markers = instance_markers("", mgr.cloud.layout.root)  # only processes that carry this cloud's marker
    # the namespace is the instance's (its slurmd carries this cloud's marker): all of it goes, slurmstepd included
    assert procs.environ_has(slurmd, markers)
    members = [pid for pid in procs.pids_in_time_namespace(namespace) if pid not in (holder.pid, os.getpid())]
    assert slurmd in members and len(members) < 20, members
    procs.vanish(members)
    return holder


def test_always_on_node_is_started_by_the_first_cycle(mgr: Mgr) -> None:
    assert mgr.state(ALWAYS_ON).endswith("~")
    mgr.cycle()
    mgr.wait(lambda: mgr.state(ALWAYS_ON) == "idle", 90, f"{ALWAYS_ON} idle")
    assert mgr.cloud.instance_of_node(ALWAYS_ON).pool == "cpu-small"
    assert_no_orphans(mgr.cloud)


@dataclass(frozen=True)
class InFlight:
    """Two running jobs hit at once (their requeue waits overlap): one instance dies, the other gets a spot warning."""

    dying_job: str
    dead: Instance
    spot_job: str
    warned: Instance
    spot_restarts_after_cycle: int
    spot_reason_after_cycle: str
    counters_before: dict[str, int]


def spot_warning(inst: Instance) -> str:
    """The EventBridge event EC2 sends two minutes before it reclaims a spot instance (as SQS receives it)."""
    return json.dumps(
        {
            "version": "0",
            "id": "e2e-spot-warning",
            "detail-type": "EC2 Spot Instance Interruption Warning",
            "source": "aws.ec2",
            "account": "123456789012",
            "region": inst.region,
            "resources": [f"arn:aws:ec2:{inst.region}:123456789012:instance/{inst.instance_id}"],
            "detail": {"instance-id": inst.instance_id, "instance-action": "terminate"},
        }
    )


@pytest.fixture(scope="module")
def in_flight(mgr: Mgr) -> Iterator[InFlight]:
    """Jobs on cpu-small-2 and -3 running; then -2's instance dies and -3's gets a spot warning; one manager cycle."""
    dying_job = mgr.cloud.sbatch("-w", DYING, wrap=RUNS_UNTIL_REQUEUED)
    # both run until requeued: a job that ends by itself can end before a busy machine's cycle powers its node down
    spot_job = mgr.cloud.sbatch("-w", "cpu-small-3", wrap=RUNS_UNTIL_REQUEUED)
    mgr.wait(
        lambda: [mgr.cloud.queue().get(j) for j in (dying_job, spot_job)] == ["RUNNING", "RUNNING"],
        120,
        f"jobs {dying_job} and {spot_job} running",
    )
    dead = mgr.cloud.instance_of_node(DYING)
    warned = mgr.cloud.instance_of_node("cpu-small-3")
    before = mgr.counters()
    # Left to itself slurmctld powers the idle DOWN node down after SuspendTime (15 s; SuspendExcStates is empty and
    # idle_on_node_suspend erases the DOWN), and a busy machine's manager cycle can come later than that (CI, stop 45).
    # Kept out of SuspendTime, the node leaves DOWN only through the manager, which is what the test checks; the test
    # gives it back (the fixture's end too, should the test fail first).
    mgr.cloud.slurm("scontrol", "update", f"SuspendExcNodes+={DYING}")
    holder: subprocess.Popen[bytes] | None = None
    try:
        holder = kill_node_instance(mgr, DYING)
        sqs = mgr.cloud.aws().client("sqs", "us-east-1")
        sqs.send_message(QueueUrl=mgr.queue_url, MessageBody=spot_warning(warned))
        mgr.cycle()  # reads the warning: cpu-small-3 is powered down at once and its job requeued
        # the reason the cycle itself set, as slurmctld logged it: the node's own Reason= is cleared when the requeued
        # job takes it again, which on a loaded machine may come before a read here
        reason = mgr.reason_logged("cpu-small-3")
        # slurmctld requeues the job when its power-save thread starts that power-down (about a second; more when busy)
        deadline = time.monotonic() + 30
        while (restarts := mgr.cloud.job_restarts(spot_job)) < 1 and time.monotonic() < deadline:
            time.sleep(0.5)
        yield InFlight(dying_job, dead, spot_job, warned, restarts, reason, before)
    finally:
        if holder is not None:  # normally gone already: the instance runner stops it with the terminated instance
            holder.kill()
            holder.wait()
        mgr.cloud.slurm("scontrol", "update", f"SuspendExcNodes-={DYING}", check=False)


def test_instance_dying_mid_job_is_powered_down_and_the_job_requeued(mgr: Mgr, in_flight: InFlight) -> None:
    """slurmd dies while EC2 still says running: slurmctld marks the node DOWN (not responding) after SlurmdTimeout
    and requeues the job; the manager powers the node down, SuspendProgram terminates the instance, and the job
    (pinned to that node) runs again on a fresh one. Without the manager a node in SuspendExcNodes (or any node, with
    SuspendExcStates=DOWN) would stay DOWN for ever; others would wait for SuspendTime."""
    records = mgr.wait_jobs([in_flight.dying_job])
    assert records[0].restarts >= 1
    assert in_flight.dead.instance_id not in {i.instance_id for i in mgr.cloud.instances(LIVE)}
    # The node is out of SuspendTime (the fixture), so only the manager takes it out of DOWN: it powers the node down
    # (slurmd not responding: `nodes_replaced`), or its instance is found terminated by then (`instances_lost`).
    now = mgr.counters()
    before = in_flight.counters_before
    assert any(now[c] > before[c] for c in ("nodes_replaced", "instances_lost")), mgr.log_tail()
    mgr.cloud.slurm("scontrol", "update", f"SuspendExcNodes-={DYING}")
    nothing_lost(mgr, [in_flight.dying_job], records)


def test_spot_interruption_event_requeues_the_job_and_ends_the_instance(mgr: Mgr, in_flight: InFlight) -> None:
    assert in_flight.spot_restarts_after_cycle >= 1
    assert in_flight.spot_reason_after_cycle.startswith("(Spot:Interruption)")
    records = mgr.wait_jobs([in_flight.spot_job])
    assert records[0].restarts >= 1
    warned = in_flight.warned.instance_id
    mgr.wait(lambda: warned not in {i.instance_id for i in mgr.cloud.instances(LIVE)}, 60, f"{warned} terminated")
    assert mgr.counters()["spot_interruptions"] == in_flight.counters_before["spot_interruptions"] + 1
    assert mgr.cloud.aws().messages_in_queue(mgr.queue_url) == 0  # deleted, not merely invisible after a receive
    nothing_lost(mgr, [in_flight.spot_job], records)


def test_orphan_instance_is_terminated_after_the_grace_period(mgr: Mgr) -> None:
    manifest = load_manifest(mgr.cloud.layout.manifest)
    pool = manifest.pools[0]
    where = pool.locations[0]
    ec2 = mgr.cloud.aws().client("ec2", where.region)
    tags = [{"Key": TAG_CLUSTER, "Value": manifest.cluster}, {"Key": TAG_POOL, "Value": pool.key}]
    orphan = ec2.run_instances(
        LaunchTemplate={"LaunchTemplateId": where.launch_template_id},
        SubnetId=where.subnet_id,
        MinCount=1,
        MaxCount=1,
        TagSpecifications=[{"ResourceType": "instance", "Tags": tags}],
    )["Instances"][0]["InstanceId"]
    before = mgr.counters()["orphans_terminated"]
    mgr.cycle()  # within the (long) grace period: left alone
    assert orphan in {i.instance_id for i in mgr.cloud.instances(LIVE)}
    time.sleep(2)
    log = mgr.cloud.layout.log / "clustermgr.log"
    offset = log.stat().st_size if log.exists() else 0
    mgr.cycle(orphan_grace=1)
    assert orphan not in {i.instance_id for i in mgr.cloud.instances(LIVE)}
    # at least this one: an earlier test's node whose power-down reset its address before its slow suspend worker
    # terminated the instance counts too, rightly (that worker's terminate then finds it gone)
    assert mgr.counters()["orphans_terminated"] >= before + 1
    with log.open(errors="replace") as lines:
        lines.seek(offset)
        assert f"terminate {orphan}: " in lines.read()
    assert_no_orphans(mgr.cloud)


def test_always_on_node_terminated_externally_is_replaced(mgr: Mgr) -> None:
    mgr.wait(lambda: mgr.state(ALWAYS_ON) == "idle", 90, f"{ALWAYS_ON} idle")
    gone = mgr.cloud.instance_of_node(ALWAYS_ON)
    before = mgr.counters()
    mgr.cloud.interrupt(gone.instance_id)
    mgr.cycle()
    mgr.wait(lambda: mgr.replaced(ALWAYS_ON, gone.instance_id), 120, f"{ALWAYS_ON} back on a new instance")
    after = mgr.counters()
    assert after["instances_lost"] > before["instances_lost"]
    assert after["always_on_started"] > before["always_on_started"]
    job = mgr.cloud.sbatch("-w", ALWAYS_ON, wrap="echo ran-on=$SLURMD_NODENAME")
    records = mgr.wait_jobs([job])
    nothing_lost(mgr, [job], records)


def run_healthcheck(mgr: Mgr, node: str, nvsmi_fixture: str) -> subprocess.CompletedProcess[str]:
    """The real health check script (the image's /opt/elastic-slurm/bin/elastic-slurm-healthcheck) for `node`, with a
    fake nvidia-smi first on PATH and the root's real scontrol.

    The emulated node has no GPU (its slurmd runs the same script as HealthCheckProgram, which passes there), so this
    runs it on the controller's view of the root with SLURMD_NODENAME set the way slurmd sets it and EXPECTED_GPUS
    forcing the GPU check; draining goes through the real `scontrol update` against this cloud.
    """
    bin_dir = mgr.cloud.layout.root / "test-bin"
    bin_dir.mkdir(exist_ok=True)
    fake = bin_dir / "nvidia-smi"
    fixture = bin_dir / nvsmi_fixture
    shutil.copy(NVSMI_FIXTURES / nvsmi_fixture, fixture)
    fake.write_text(f"#!/bin/sh\ncat {fixture}\n")
    fake.chmod(0o755)
    conf = bin_dir / "healthcheck.conf"
    conf.write_text("EXPECTED_GPUS=8\nCHECK_SLURMD=0\nDISK_PATHS=/tmp\nMIN_FREE_MIB=1\n")
    env = {
        "PATH": f"{bin_dir}:/usr/sbin:/usr/bin:/sbin:/bin",
        "ELASTIC_SLURM_HEALTH_CONF": str(conf),
        "SLURMD_NODENAME": node,
    }
    return mgr.cloud.on_controller(["/opt/elastic-slurm/bin/elastic-slurm-healthcheck"], env=env, timeout=60)


def test_gpu_failure_drains_the_node_and_the_manager_replaces_it(mgr: Mgr) -> None:
    mgr.wait(lambda: mgr.state(ALWAYS_ON) == "idle", 90, f"{ALWAYS_ON} idle")
    sick = mgr.cloud.instance_of_node(ALWAYS_ON)
    result = run_healthcheck(mgr, ALWAYS_ON, "failing-p4d-7of8.csv")
    assert result.returncode == 1, result.stdout + result.stderr
    assert mgr.reason(ALWAYS_ON).startswith("(Health:gpu)")
    before = mgr.counters()["health_check_failures"]
    mgr.cycle()
    assert mgr.counters()["health_check_failures"] == before + 1
    mgr.wait(lambda: mgr.replaced(ALWAYS_ON, sick.instance_id), 120, f"{ALWAYS_ON} back on a new instance")
    assert sick.instance_id not in {i.instance_id for i in mgr.cloud.instances(LIVE)}
    job = mgr.cloud.sbatch("-w", ALWAYS_ON, wrap="echo ran-on=$SLURMD_NODENAME")
    records = mgr.wait_jobs([job])
    assert f"ran-on={ALWAYS_ON}" in (mgr.cloud.layout.jobs / f"{job}.out").read_text()
    nothing_lost(mgr, [job], records)


def test_a_job_whose_prolog_fails_is_requeued_not_held_and_its_node_replaced(mgr: Mgr) -> None:
    """The site prolog fails on the node: Slurm drains it `Prolog error` and requeues the job — not held
    (SchedulerParameters=nohold_on_prolog_fail, render/parameter_lists.py); the manager replaces the drained node once
    idle (SLURM_DRAIN_REASONS) and the job, pinned to it, runs on the new instance."""
    mgr.wait(lambda: mgr.state(ALWAYS_ON) == "idle", 90, f"{ALWAYS_ON} idle")
    failing = mgr.cloud.instance_of_node(ALWAYS_ON)
    before = mgr.counters()["nodes_replaced"]
    (mgr.cloud.layout.shared / FAIL_NEXT_PROLOG).touch()
    job = mgr.cloud.sbatch("-w", ALWAYS_ON, wrap="echo ran-on=$SLURMD_NODENAME")
    mgr.cloud.wait_until(lambda: mgr.cloud.job_restarts(job) >= 1, 60, f"job {job} requeued after its prolog failed")
    assert not (mgr.cloud.layout.shared / FAIL_NEXT_PROLOG).exists()
    assert mgr.reason(ALWAYS_ON).startswith("Prolog error")  # slurmd's word, as 26.05 has it
    shown = mgr.cloud.slurm("scontrol", "show", "job", job, "--oneliner").split()
    assert "Priority=0" not in shown and "Reason=JobHeldUser" not in shown and "Reason=JobHeldAdmin" not in shown
    records = mgr.wait_jobs([job], 240)
    # one requeue for the prolog (the marker is gone: it fails once); a loaded machine may add one more, e.g. the new
    # instance missing ResumeTimeout, which requeues the job again, never holds it
    assert records[0].restarts >= 1
    assert f"ran-on={ALWAYS_ON}" in (mgr.cloud.layout.jobs / f"{job}.out").read_text()
    assert mgr.counters()["nodes_replaced"] > before
    assert failing.instance_id not in {i.instance_id for i in mgr.cloud.instances(LIVE)}
    nothing_lost(mgr, [job], records)


def _powered_up_drained(mgr: Mgr, node: str, reason: str) -> Instance:
    """`node` powered up (as the manager powers up an always-on node) and drained by hand with `reason` while it
    boots; returns its instance once slurmd has registered (the node idle and drained)."""
    mgr.cloud.slurm("scontrol", "update", f"nodename={node}", "state=power_up")
    mgr.cloud.slurm("scontrol", "update", f"nodename={node}", "state=drain", f"reason={reason}")
    # no manager cycles meanwhile (Slurm's ResumeProgram powers it up): a cycle slowed down by a busy machine could
    # outlast the SuspendTime the drained node stays up for
    mgr.cloud.wait_until(lambda: mgr.state(node) == "drain", 120, f"{node} up, idle and drained")
    return mgr.cloud.instance_of_node(node)


def _held(mgr: Mgr, node: str, state: str, reason: str, seconds: float) -> None:
    """`node` stays in `state` with `reason` for `seconds` (manager.yaml: SuspendTime 15 s), manager cycles included."""
    until = time.monotonic() + seconds
    while time.monotonic() < until:
        mgr.tick()
        assert (mgr.state(node), mgr.reason(node).split(" [")[0]) == (state, reason)
        time.sleep(1)


def test_drains_by_hand_roll_a_node_out_keep_a_powered_down_one_and_suspend_exc_states_keeps_the_instance(
    mgr: Mgr,
) -> None:
    """Drains by hand (docs/operations.md). A drained powered-up node is rolled out once idle: Slurm powers it down
    after SuspendTime and idle_on_node_suspend returns it to service as idle~ (how drain-and-replace rolls a change
    out, docs/updates.md). A drain set on a powered-down node stays. With a site's SuspendExcStates=DRAIN the drained
    node keeps its instance, and the manager still replaces a drain it owns (its explicit power-down is not held
    back)."""
    cloud, node = mgr.cloud, "cpu-small-4"
    rolled = _powered_up_drained(mgr, node, "roll out by hand")
    mgr.wait(lambda: mgr.state(node) == "idle~", 90, f"{node} powered down and back in service")
    assert mgr.reason(node) == ""
    # (the suspend worker may still be terminating it when SuspendTimeout ends)
    mgr.wait(lambda: rolled.instance_id not in {i.instance_id for i in cloud.instances(LIVE)}, 60, "instance ended")

    cloud.slurm("scontrol", "update", f"nodename={node}", "state=drain", "reason=kept out by hand")
    _held(mgr, node, "drain~", "kept out by hand", 20)
    cloud.slurm("scontrol", "update", f"nodename={node}", "state=undrain")
    assert mgr.state(node) == "idle~"

    cloud.slurm("scontrol", "update", "SuspendExcStates=DRAIN")  # as clusters[].slurm_settings would set it
    try:
        kept = _powered_up_drained(mgr, node, "inspect by hand")
        _held(mgr, node, "drain", "inspect by hand", 25)
        assert kept.instance_id in {i.instance_id for i in cloud.instances(LIVE)}
        before = mgr.counters()["nodes_replaced"]
        cloud.slurm("scontrol", "update", f"nodename={node}", "state=drain", "reason=Kill task failed")
        mgr.wait(lambda: kept.instance_id not in {i.instance_id for i in cloud.instances(LIVE)}, 90, "instance ended")
        mgr.wait(lambda: mgr.state(node) == "idle~", 60, f"{node} replaced by the manager")
        assert mgr.counters()["nodes_replaced"] > before
    finally:
        cloud.slurm("scontrol", "update", "SuspendExcStates=")
    nothing_lost(mgr, [], [])  # no job here: no orphan instance after the manager's cycles


def test_fleet_stop_powers_every_node_down_keeps_jobs_queued_and_start_runs_them(mgr: Mgr) -> None:
    """`elastic-slurm fleet stop|start` writes the fleet parameter; the manager applies it (manager/fleet.py)."""
    cloud = mgr.cloud
    ssm = cloud.aws().client("ssm", "us-east-1")
    mgr.wait(lambda: mgr.state(ALWAYS_ON) == "idle", 90, f"{ALWAYS_ON} idle")
    ssm.put_parameter(Name=fleet_parameter("mgr"), Value="STOPPED", Type="String", Overwrite=True)
    try:
        mgr.cycle()
        assert "State=DOWN" in cloud.slurm("scontrol", "show", "partition", "cpu", "--oneliner").split()
        job = cloud.sbatch(wrap="echo ran-after-start")  # accepted: a DOWN partition queues jobs
        mgr.wait(lambda: not cloud.instances(LIVE), 150, "every instance terminated, the always-on one too")
        mgr.wait(lambda: all(s.endswith("~") for s in cloud.nodes().values()), 60, "every node powered down")
        for _ in range(2):  # a stopped fleet powers nothing up, always-on nodes included
            mgr.cycle()
        assert not cloud.instances(LIVE)
        assert cloud.slurm("squeue", "-h", "-j", job, "-o", "%T %r").split() == ["PENDING", "PartitionDown"]
    finally:
        ssm.put_parameter(Name=fleet_parameter("mgr"), Value="RUNNING", Type="String", Overwrite=True)
    mgr.cycle()
    assert "State=UP" in cloud.slurm("scontrol", "show", "partition", "cpu", "--oneliner").split()
    records = mgr.wait_jobs([job], 240)
    mgr.wait(lambda: mgr.state(ALWAYS_ON) == "idle", 120, f"{ALWAYS_ON} powered up again")
    nothing_lost(mgr, [job], records)
