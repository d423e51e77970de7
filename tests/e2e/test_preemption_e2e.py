"""Partition-priority preemption in the local cloud: an interactive job requeues a batch job on a shared node.

One module-scoped local cloud of configs/preemption.yaml (its own state dir): `batch` (PriorityTier 1) has one pool of
one 2-CPU node; `interactive` (PriorityTier 10) has no pool and `share_nodes_of: [batch]`; preemption
`partition_priority` / `requeue`, rendered by slurm_plugin/render/cluster.py as PreemptType=preempt/partition_prio and
PreemptMode=REQUEUE. The test asserts what slurmctld and slurmdbd say (scontrol, sacct -D) and that no instance is
left without a node.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from localcloud.cloud import LocalCloud
from tests.e2e.conftest import assert_no_orphans, module_cloud

pytestmark = pytest.mark.e2e

CONFIG = Path(__file__).resolve().parent / "configs" / "preemption.yaml"
# Not under pytest's tmp dir: munged wants every directory above its socket to be world-searchable.
STATE_DIR = Path("/var/tmp/elastic-slurm-preempt-e2e")
JOB_TIMEOUT = 120.0


@pytest.fixture(scope="module")
def preempt_cloud(request: pytest.FixtureRequest) -> Iterator[LocalCloud]:
    """A local cloud of the preemption config, always torn down; STATE_DIR (logs) is kept only after a failure."""
    with module_cloud(request, CONFIG, STATE_DIR, "preemption e2e") as cloud:
        yield cloud


def job_fields(cloud: LocalCloud, job_id: str) -> dict[str, str]:
    """`scontrol show job` of one job as a key → value table (empty once slurmctld forgot the job)."""
    out = cloud.slurm("scontrol", "show", "job", job_id, "--oneliner", check=False)
    return dict(word.split("=", 1) for word in out.split() if "=" in word)


def accounted_states(cloud: LocalCloud, job_id: str) -> list[str]:
    """The state of every run of the job in slurmdbd (sacct --duplicates lists each requeued run)."""
    out = cloud.slurm("sacct", "-n", "-X", "-P", "-D", "-j", job_id, "-o", "State", check=False)
    return [line.split()[0] for line in out.splitlines() if line.strip()]


def test_rendered_slurm_conf_has_partition_priority_requeue_and_a_shared_node(preempt_cloud: LocalCloud) -> None:
    conf = preempt_cloud.layout.fragments_conf.read_text().splitlines()
    assert "PreemptType=preempt/partition_prio" in conf
    assert "PreemptMode=REQUEUE" in conf
    partitions = preempt_cloud.slurm("scontrol", "show", "partition", "--oneliner").splitlines()
    nodes = {
        f["PartitionName"]: f["Nodes"]
        for f in (dict(w.split("=", 1) for w in p.split() if "=" in w) for p in partitions)
    }
    assert nodes == {"batch": "batch-c-1", "interactive": "batch-c-1"}


def test_interactive_job_requeues_the_batch_job_on_the_shared_node_which_later_completes(
    preempt_cloud: LocalCloud,
) -> None:
    cloud = preempt_cloud
    # the first run outlasts the preemption; the requeued run (Slurm sets SLURM_RESTART_COUNT) ends at once
    batch = cloud.sbatch(
        "-p", "batch", "-c", "2", wrap='[ -n "$SLURM_RESTART_COUNT" ] || sleep 600; echo rerun=$SLURM_RESTART_COUNT'
    )
    cloud.wait_until(lambda: job_fields(cloud, batch).get("JobState") == "RUNNING", JOB_TIMEOUT, "batch job running")
    node = job_fields(cloud, batch)["NodeList"]
    interactive = cloud.sbatch("-p", "interactive", "-c", "2", wrap="echo ran-on=$SLURMD_NODENAME; sleep 2")
    cloud.wait_until(lambda: cloud.job_restarts(batch) >= 1, 60, "the batch job requeued by preemption")
    (record,) = cloud.wait_jobs_done([interactive], timeout=JOB_TIMEOUT)
    assert (record.state, record.nodes) == ("COMPLETED", node)
    assert f"ran-on={node}" in (cloud.layout.jobs / f"{interactive}.out").read_text()
    (again,) = cloud.wait_jobs_done([batch], timeout=JOB_TIMEOUT)
    assert (again.state, again.nodes, again.exit_code) == ("COMPLETED", node, "0:0")
    assert again.restarts >= 1
    assert f"rerun={again.restarts}" in (cloud.layout.jobs / f"{batch}.out").read_text()
    runs = accounted_states(cloud, batch)
    assert runs[-1] == "COMPLETED"
    assert {"PREEMPTED", "REQUEUED"} & set(runs[:-1]), runs
    assert_no_orphans(cloud)
