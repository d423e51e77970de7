"""End to end in the local cloud, when AWS misbehaves: capacity errors, boots that fail, spot interruptions.

Every test ends with its job COMPLETED (nothing lost) and no live instance without a powered-up node (no orphans).
"""

from __future__ import annotations

import pytest

from localcloud.aws.faults import CapacityFault, Faults
from localcloud.cloud import LocalCloud
from localcloud.ops import LIVE
from tests.e2e.conftest import assert_no_orphans, cold_nodes, exclude_warm, replaced_boots
from tests.e2e.requeue_helpers import start_after_requeue_hold

pytestmark = pytest.mark.e2e


def test_ice_in_first_az_lands_the_node_in_the_next_az(cloud: LocalCloud) -> None:
    (node,) = cold_nodes(cloud, 1)
    before = {i.instance_id for i in cloud.instances()}
    cloud.set_faults(Faults(capacity=(CapacityFault(availability_zone="us-east-1a"),)))
    job = cloud.sbatch("-w", node, wrap="true")
    (record,) = cloud.wait_jobs_done([job], timeout=120)
    assert record.state == "COMPLETED"
    launched = [i for i in cloud.instances() if i.instance_id not in before]
    assert [i.availability_zone for i in launched] == ["us-east-1b"] * (1 + len(replaced_boots(cloud, launched)))
    assert_no_orphans(cloud)


def test_no_capacity_in_the_home_region_lands_the_node_in_the_remote_region(cloud: LocalCloud) -> None:
    (node,) = cold_nodes(cloud, 1)
    before = {i.instance_id for i in cloud.instances()}
    cloud.set_faults(Faults(capacity=(CapacityFault(region="us-east-1"),)))
    job = cloud.sbatch("-w", node, wrap="true")
    (record,) = cloud.wait_jobs_done([job], timeout=120)
    assert record.state == "COMPLETED"
    launched = [i for i in cloud.instances() if i.instance_id not in before]
    assert [(i.region, i.availability_zone) for i in launched] == [("us-west-2", "us-west-2a")]
    assert launched[0].private_ip.startswith("127.17.")
    assert_no_orphans(cloud)


def test_ice_everywhere_requeues_the_job_and_it_runs_once_capacity_is_back(cloud: LocalCloud) -> None:
    (node,) = cold_nodes(cloud, 1)
    before = {i.instance_id for i in cloud.instances()}
    cloud.set_faults(Faults(capacity=(CapacityFault(),)))
    job = cloud.sbatch("-w", node, wrap="true")
    cloud.wait_until(lambda: cloud.job_restarts(job) >= 1, 90, f"job {job} requeued after the capacity error")
    assert [i for i in cloud.instances() if i.instance_id not in before] == []
    assert cloud.queue().get(job) in {"PENDING", "CONFIGURING"}
    cloud.clear_faults()
    start_after_requeue_hold(cloud, job, 60)
    (record,) = cloud.wait_jobs_done([job], timeout=180)
    assert record.state == "COMPLETED"
    assert_no_orphans(cloud)


def test_boot_failure_times_out_terminates_the_instance_and_the_job_completes_elsewhere(cloud: LocalCloud) -> None:
    before = {i.instance_id for i in cloud.instances()}
    cloud.fail_next_boots(1)
    job = cloud.sbatch(*exclude_warm(cloud), wrap="echo ran-on=$SLURMD_NODENAME")
    start_after_requeue_hold(cloud, job, 180)  # ResumeTimeout requeues it
    (record,) = cloud.wait_jobs_done([job], timeout=240)
    assert record.state == "COMPLETED"
    assert record.restarts >= 1
    launched = [i for i in cloud.instances() if i.instance_id not in before]
    assert len(launched) >= 2, "the failed instance and its replacement"
    failed = [i for i in launched if i.state != "running"]
    assert failed and {i.state for i in failed} <= {"terminated", "shutting-down"}
    assert_no_orphans(cloud)


def test_spot_interruption_mid_job_requeues_the_job_and_it_completes(cloud: LocalCloud) -> None:
    # the first run outlasts the interruption, however slow the runner is to end the instance (under load it once
    # took 13 s, and a 10 s job completed before its node went); the requeued run ends at once
    job = cloud.sbatch(*exclude_warm(cloud), wrap='[ "${SLURM_RESTART_COUNT:-0}" -gt 0 ] || sleep 300; echo done')
    cloud.wait_until(lambda: cloud.queue().get(job) == "RUNNING", 90, f"job {job} running")
    node = cloud.slurm("squeue", "-h", "-j", job, "-o", "%N").strip()
    victim = cloud.instance_of_node(node)
    cloud.interrupt(victim.instance_id)
    start_after_requeue_hold(cloud, job, 180)  # slurmctld requeues it once the node stops responding
    (record,) = cloud.wait_jobs_done([job], timeout=240)
    assert record.state == "COMPLETED"
    assert record.restarts >= 1
    assert victim.instance_id not in {i.instance_id for i in cloud.instances(LIVE)}
    assert_no_orphans(cloud)
