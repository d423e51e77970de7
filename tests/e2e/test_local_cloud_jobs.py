"""End to end in the local cloud: sbatch → ResumeProgram → emulated EC2 → instance boots slurmd → job → scale-down.

Tests share one local cloud; each pins its job to powered-down nodes when it needs a launch, so order does not matter.
Each asserts Slurm's view (sacct) and the emulated EC2's view (instances, no orphans).
"""

from __future__ import annotations

import pytest

from localcloud.cloud import LocalCloud
from localcloud.ops import LIVE
from tests.e2e.conftest import assert_no_orphans, cold_nodes

pytestmark = pytest.mark.e2e


def test_one_node_job_runs_on_a_freshly_launched_instance(cloud: LocalCloud) -> None:
    (node,) = cold_nodes(cloud, 1)
    before = {i.instance_id for i in cloud.instances()}
    job = cloud.sbatch("-w", node, wrap="echo ran-on=$SLURMD_NODENAME")
    (record,) = cloud.wait_jobs_done([job], timeout=120)
    assert (record.state, record.nodes, record.exit_code) == ("COMPLETED", node, "0:0")
    assert f"ran-on={node}" in (cloud.layout.jobs / f"{job}.out").read_text()
    launched = [i for i in cloud.instances() if i.instance_id not in before]
    assert len(launched) == 1
    assert launched[0].pool == "cpu-small"
    assert launched[0].private_ip.startswith("127.16.")
    assert_no_orphans(cloud)


def test_four_node_job_gets_four_instances_at_once(cloud: LocalCloud) -> None:
    nodes = cold_nodes(cloud, 4)
    before = {i.instance_id for i in cloud.instances()}
    job = cloud.sbatch("-N4", "-w", ",".join(nodes), wrap="srun hostname >/dev/null; echo nodes=$SLURM_JOB_NUM_NODES")
    (record,) = cloud.wait_jobs_done([job], timeout=150)
    assert record.state == "COMPLETED"
    assert "nodes=4" in (cloud.layout.jobs / f"{job}.out").read_text()
    launched = [i for i in cloud.instances() if i.instance_id not in before]
    assert len(launched) == 4
    assert_no_orphans(cloud)


def test_job_array_of_20_tasks_all_complete(cloud: LocalCloud) -> None:
    job = cloud.sbatch("--array=1-20", "-n1", wrap="sleep 1")
    records = cloud.wait_jobs_done([job], timeout=240)
    assert len(records) == 20
    assert {r.state for r in records} == {"COMPLETED"}
    assert_no_orphans(cloud)


def test_idle_nodes_are_powered_down_and_their_instances_terminated(cloud: LocalCloud) -> None:
    (node,) = cold_nodes(cloud, 1, prefix="cpu-")
    (record,) = cloud.wait_jobs_done([cloud.sbatch("-w", node, wrap="true")], timeout=120)
    assert record.state == "COMPLETED"
    assert cloud.instances(LIVE)
    cloud.wait_all_powered_down(timeout=150)
    assert not cloud.instances(LIVE)
    assert {i.state for i in cloud.instances()} == {"terminated"}
    assert all(state.endswith("~") for state in cloud.nodes().values())
