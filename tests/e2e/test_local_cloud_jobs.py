"""End to end in the local cloud: sbatch → ResumeProgram → emulated EC2 → instance boots slurmd → job → scale-down.

Tests share one local cloud; each pins its job to powered-down nodes when it needs a launch, so order does not matter.
Each asserts Slurm's view (sacct) and the emulated EC2's view (instances, no orphans).
"""

from __future__ import annotations

import json

import pytest

from localcloud.cloud import LocalCloud
from localcloud.ops import LIVE, OpsError
from localcloud.services import procs
from tests.e2e.conftest import assert_no_orphans, cold_nodes, replaced_boots

pytestmark = pytest.mark.e2e


def test_one_node_job_runs_on_a_freshly_launched_instance(cloud: LocalCloud) -> None:
    (node,) = cold_nodes(cloud, 1)
    before = {i.instance_id for i in cloud.instances()}
    job = cloud.sbatch("-w", node, wrap="echo ran-on=$SLURMD_NODENAME")
    (record,) = cloud.wait_jobs_done([job], timeout=120)
    assert (record.state, record.nodes, record.exit_code) == ("COMPLETED", node, "0:0")
    assert f"ran-on={node}" in (cloud.layout.jobs / f"{job}.out").read_text()
    launched = [i for i in cloud.instances() if i.instance_id not in before]
    assert len(launched) == 1 + len(replaced_boots(cloud, launched))
    assert all(i.pool == "cpu-small" and i.private_ip.startswith("127.16.") for i in launched), launched
    assert_no_orphans(cloud)


def test_four_node_job_gets_four_instances_at_once(cloud: LocalCloud) -> None:
    nodes = cold_nodes(cloud, 4)
    before = {i.instance_id for i in cloud.instances()}
    job = cloud.sbatch("-N4", "-w", ",".join(nodes), wrap="srun hostname >/dev/null; echo nodes=$SLURM_JOB_NUM_NODES")
    (record,) = cloud.wait_jobs_done([job], timeout=150)
    assert record.state == "COMPLETED"
    assert "nodes=4" in (cloud.layout.jobs / f"{job}.out").read_text()
    launched = [i for i in cloud.instances() if i.instance_id not in before]
    assert len(launched) == 4 + len(replaced_boots(cloud, launched))
    # the instance runner learnt each machine's boot clock (time namespace) while its user data ran: stopping the
    # instance, and tearing the cloud down, find its processes by it
    for instance in launched:
        record = json.loads((cloud.layout.instances_dir / f"{instance.instance_id}.json").read_text())
        assert record["time_ns"] and record["time_ns"] != procs.HOST_TIME_NS, record
    assert_no_orphans(cloud)


def test_job_array_of_20_tasks_all_complete(cloud: LocalCloud) -> None:
    job = cloud.sbatch("--array=1-20", "-n1", wrap="sleep 1")
    records = cloud.wait_jobs_done([job], timeout=240)
    assert len(records) == 20
    assert {r.state for r in records} == {"COMPLETED"}
    assert_no_orphans(cloud)


def test_idle_nodes_are_powered_down_and_their_instances_terminated(cloud: LocalCloud) -> None:
    (node,) = cold_nodes(cloud, 1, prefix="cpu-")
    before = {i.instance_id for i in cloud.instances()}
    (record,) = cloud.wait_jobs_done([cloud.sbatch("-w", node, wrap="true")], timeout=120)
    assert record.state == "COMPLETED"
    # the job's own instance (on a loaded machine it may already be powered down by the time the job is seen done)
    assert [i for i in cloud.instances() if i.instance_id not in before]
    cloud.wait_all_powered_down(timeout=150)
    assert not cloud.instances(LIVE)
    assert {i.state for i in cloud.instances()} == {"terminated"}
    assert all(state.endswith("~") for state in cloud.nodes().values())


def test_jobs_without_mem_share_a_node_with_the_partitions_default_memory_per_cpu(cloud: LocalCloud) -> None:
    # c7i.large: 2 CPUs, RealMemory 4096 - 512 MiB → DefMemPerCPU=1792 on partition cpu (the leanest of its pools).
    # CR_Core allocates whole cores (ThreadsPerCore=2): a -n1 job gets a core's 2 CPUs, so two share the big pool's
    # c7i.xlarge (2 cores)
    (node,) = cold_nodes(cloud, 1, prefix="cpu-big-")
    long_job = cloud.sbatch("-w", node, "-n1", wrap="sleep 600")  # cancelled below: still running when asserted
    short_job = cloud.sbatch("-w", node, "-n1", wrap="echo shared")
    (short,) = cloud.wait_jobs_done([short_job], timeout=120)
    assert (short.state, short.nodes) == ("COMPLETED", node)
    assert cloud.queue().get(long_job) == "RUNNING"  # both on one 2-CPU node at once: no job took the whole node
    alloc = cloud.slurm("sacct", "-n", "-X", "-P", "-o", "AllocTRES", "-j", long_job).strip()
    assert {"cpu=2", "mem=3.50G"} <= set(alloc.split(",")), alloc
    assert "DefMemPerCPU=1792" in cloud.slurm("scontrol", "show", "partition", "cpu", "--oneliner").split()
    # local-demo.yaml's custom settings reached the real slurmctld: the cluster's and the pool's
    (small,) = [n for n in cloud.nodes() if n.startswith("cpu-small-")][:1]
    assert "TmpDisk=1024" in cloud.slurm("scontrol", "show", "node", small, "--oneliner").split()
    show = cloud.slurm("scontrol", "show", "config").splitlines()
    config = {key.strip(): value.strip() for key, _, value in (line.partition(" = ") for line in show)}
    product = "batch_sched_delay=0,nohold_on_prolog_fail"  # + the product's
    assert config.get("SchedulerParameters") == f"bf_continue,bf_interval=10,{product}"
    cloud.slurm("scancel", long_job)
    (long,) = cloud.wait_jobs_done([long_job], timeout=60)
    assert (long.state, long.nodes) == ("CANCELLED", node)
    assert_no_orphans(cloud)


def test_a_job_larger_than_its_partition_is_refused_at_submit(cloud: LocalCloud) -> None:
    before = len(cloud.instances())
    queued = set(cloud.queue())
    # partition cpu has 14 nodes (pools small 10 + big 4): 15 can never run, so EnforcePartLimits=ANY refuses it
    with pytest.raises(OpsError, match="Node count specification invalid"):
        cloud.sbatch("-p", "cpu", "-N15", wrap="true")
    assert set(cloud.queue()) <= queued
    assert len(cloud.instances()) == before
