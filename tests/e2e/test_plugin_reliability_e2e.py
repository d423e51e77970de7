"""The power-save plugin's reliability against the real slurmctld of the local cloud (issue 14, defects 3, 4 and 8).

The plugin programs run as slurmctld runs them (the state dir's bin/ wrappers, as user `slurm`, on the controller).
Every test ends with its jobs COMPLETED and no orphan instance.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from localcloud.aws.faults import CapacityFault, Faults
from localcloud.cloud import LocalCloud
from localcloud.ops import LIVE
from slurm_plugin.manifest import load_manifest
from tests.e2e.conftest import assert_no_orphans, cold_nodes, replaced_boots
from tests.e2e.requeue_helpers import REQUEUE_HOLD, start_after_requeue_hold

pytestmark = pytest.mark.e2e

SMALL_TYPES = ("c7i.large", "c6i.large", "m7i.large")  # every type of local-demo.yaml's cpu-small pool
# slurmctld holds a requeued job for REQUEUE_HOLD s, then starts it at its next full-queue pass (every 60 s: measured
# 53 to 69 s after the requeue) unless something changes; the test ends that wait once the hold is over
# (tests/e2e/requeue_helpers.py), so the cool-down must outlast the hold plus one backfill pass (bf_interval 10 s), with
# room for a loaded machine; else the requeued job may find the pool back and bounce twice.
COOLDOWN = REQUEUE_HOLD + 40


def _run_plugin(cloud: LocalCloud, program: str, hostlist: str) -> None:
    """Run a plugin program as slurmctld would (user slurm, its wrapper) and wait for its worker to finish."""
    done = cloud.on_controller([str(cloud.layout.bin / program), hostlist], user="slurm")
    assert done.returncode == 0, done.stderr
    requests = Path(load_manifest(cloud.layout.manifest).state_dir) / "requests"
    cloud.wait_until(lambda: not requests.exists() or not any(requests.iterdir()), 60, f"{program} worker done")


def _reasons(cloud: LocalCloud, prefix: str) -> dict[str, tuple[str, str]]:
    """node -> (sinfo state, reason) for the nodes of a pool."""
    out = cloud.slurm("sinfo", "-h", "-N", "-o", "%N|%t|%E", check=False)
    rows = (line.split("|", 2) for line in out.splitlines() if line.startswith(prefix))
    return {name: (state, reason) for name, state, reason in rows}


def test_a_pool_without_capacity_is_down_for_its_cool_down_and_the_job_runs_on_another_pool(
    cloud: LocalCloud,
) -> None:
    # the whole partition powered down: cpu-small is then the scheduler's first choice (lowest weight); an idle, still
    # powered-up cpu-big node an earlier test left would take the job at once (Slurm prefers powered-up nodes)
    cold_nodes(cloud, 10)
    cold_nodes(cloud, 4, prefix="cpu-big-")
    # local-demo's 20 s cool-down is shorter than slurmctld's requeue delay plus its power-down cycle (~35 s here), so
    # the pool would be back before the job is eligible again: this test gives the pool one that outlasts it (COOLDOWN)
    manifest = cloud.layout.manifest
    original = manifest.read_text()
    manifest.write_text(json.dumps({**json.loads(original), "capacity_cooldown_seconds": COOLDOWN}, indent=2))
    try:
        cloud.set_faults(Faults(capacity=tuple(CapacityFault(instance_type=t) for t in SMALL_TYPES)))
        job = cloud.sbatch("-N1", wrap="echo ran-on=$SLURMD_NODENAME")
        _the_job_runs_elsewhere_while_the_pool_is_down(cloud, job)
    finally:
        manifest.write_text(original)
        cloud.clear_faults()
    # Slurm's ResumeAfter (the cool-down) brings the pool back, manager or not
    cloud.wait_until(
        lambda: all(s == "idle~" for s, _ in _reasons(cloud, "cpu-small-").values()), COOLDOWN + 120, "cpu-small idle~"
    )
    assert_no_orphans(cloud)


def _the_job_runs_elsewhere_while_the_pool_is_down(cloud: LocalCloud, job: str) -> None:
    before = {i.instance_id for i in cloud.instances()}  # cpu-small launches nothing: no capacity

    def pool_down() -> bool:
        table = _reasons(cloud, "cpu-small-")
        return all(
            s.startswith("down") and r.startswith("(Code:InsufficientInstanceCapacity)") for s, r in table.values()
        )

    def seen() -> str:
        log = cloud.layout.log / "plugin.log"
        tail = "\n".join(log.read_text(errors="replace").splitlines()[-30:]) if log.exists() else "(no plugin.log)"
        return f"{_reasons(cloud, 'cpu-small-')}, job {cloud.queue().get(job)}; plugin.log:\n{tail}"

    cloud.wait_until(pool_down, 90, "every cpu-small node DOWN with the capacity reason", seen)
    start_after_requeue_hold(cloud, job, REQUEUE_HOLD + 60)
    (record,) = cloud.wait_jobs_done([job], timeout=180)
    assert record.state == "COMPLETED" and record.nodes.startswith("cpu-big-"), record
    # requeued once from the empty pool, then placed on cpu-big at once (and once more per boot Slurm gave up on)
    assert record.restarts == 1 + len(
        replaced_boots(cloud, [i for i in cloud.instances() if i.instance_id not in before])
    )


def test_a_second_resume_of_a_running_node_launches_nothing(cloud: LocalCloud) -> None:
    (node,) = cold_nodes(cloud, 1)
    job = cloud.sbatch("-w", node, wrap="sleep 20")
    cloud.wait_until(lambda: cloud.queue().get(job) == "RUNNING", 120, f"job {job} running on {node}")
    # every instance in any state: another test's idle node may power down meanwhile (its instance leaves LIVE)
    before = {i.instance_id for i in cloud.instances()}
    instance, address = cloud.instance_of_node(node).instance_id, cloud.node_addr(node)
    _run_plugin(cloud, "slurm-resume", node)  # slurmctld (after a restart) or an admin resumes it again
    assert {i.instance_id for i in cloud.instances()} == before  # nothing launched
    # the node keeps its live instance (instance_of_node: the live one at its address)
    assert (cloud.instance_of_node(node).instance_id, cloud.node_addr(node)) == (instance, address)
    (record,) = cloud.wait_jobs_done([job], timeout=120)
    assert record.state == "COMPLETED" and record.restarts == 0
    assert_no_orphans(cloud)


def test_suspending_a_node_whose_stale_address_names_another_nodes_instance_leaves_that_instance(
    cloud: LocalCloud,
) -> None:
    stale, busy = cold_nodes(cloud, 2)
    job = cloud.sbatch("-w", busy, wrap="sleep 25")
    cloud.wait_until(lambda: cloud.queue().get(job) == "RUNNING", 120, f"job {job} running on {busy}")
    victim = cloud.instance_of_node(busy)
    # EC2 reused an address: the powered-down node still names it, and slurmctld suspends that node
    cloud.slurm("scontrol", "update", f"nodename={stale}", f"nodeaddr={victim.private_ip}")
    _run_plugin(cloud, "slurm-suspend", stale)
    assert victim.instance_id in {i.instance_id for i in cloud.instances(LIVE)}
    assert cloud.node_addr(stale) == stale  # the stale node itself was reset
    time.sleep(1)
    (record,) = cloud.wait_jobs_done([job], timeout=120)
    assert record.state == "COMPLETED" and record.restarts == 0
    assert_no_orphans(cloud)
