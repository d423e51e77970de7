"""`allocation: exclusive` against the real slurmctld of the session cloud (local-demo.yaml's partition `whole`, pool
`node` of c7i.large: 2 CPUs, RealMemory 3584 MiB) beside the shared partition `cpu` (same node size).

On `whole`, every job gets whole nodes and memory is not tracked: two one-CPU jobs run on two nodes (two instances
launched), each allocated both CPUs and no memory even when it asks `--mem`; a second job pinned to a busy node waits;
`--mem` beyond the node's RealMemory is still refused at submit.
On `cpu`, the same two jobs pinned to one node run on it at once, and the node's memory is counted.
"""

from __future__ import annotations

import pytest

from localcloud.cloud import LocalCloud
from localcloud.ops import LIVE, OpsError
from slurm_plugin.render.cluster import exclusive_node_pair
from tests.e2e.conftest import assert_no_orphans, cold_nodes

pytestmark = pytest.mark.e2e

NODE_CPUS, NODE_MEMORY, SHARED_MEM_PER_CPU = 2, 3584, 1792


def _show(cloud: LocalCloud, kind: str, name: str) -> dict[str, str]:
    """`scontrol show <kind> <name>` as Key -> value."""
    out = cloud.slurm("scontrol", "show", kind, name, "--oneliner")
    return dict(word.split("=", 1) for word in out.split() if "=" in word)


def _running(cloud: LocalCloud, *jobs: str) -> None:
    cloud.wait_until(lambda: all(cloud.queue().get(job) == "RUNNING" for job in jobs), 120, f"jobs {jobs} running")


def _whole_node_instances(cloud: LocalCloud) -> set[str]:
    return {i.instance_id for i in cloud.instances(LIVE) if i.pool == "whole-node"}


def test_one_cpu_jobs_on_the_exclusive_partition_get_a_whole_node_each_and_no_memory(cloud: LocalCloud) -> None:
    cold_nodes(cloud, 3, prefix="whole-")  # every node of the partition powered down: the jobs must launch
    # the release's own spelling: `Exclusive=NODE` from 26.05 (it shows OverSubscribe=NO), `OverSubscribe=EXCLUSIVE` before
    whole_node = "=".join(exclusive_node_pair(cloud.info().slurm_version))
    assert whole_node in cloud.slurm("scontrol", "show", "partition", "whole", "--oneliner").split()
    with_mem = cloud.sbatch("-p", "whole", "-n1", "--mem=3000", wrap="sleep 300")
    without_mem = cloud.sbatch("-p", "whole", "-n1", wrap="sleep 300")
    _running(cloud, with_mem, without_mem)

    jobs = {job: _show(cloud, "job", job) for job in (with_mem, without_mem)}
    nodes = {job: shown["NodeList"] for job, shown in jobs.items()}
    assert len(set(nodes.values())) == 2 and all(n.startswith("whole-node-") for n in nodes.values()), nodes
    for shown in jobs.values():
        # whole-node allocation: both CPUs of the node for a one-CPU job, and no memory in what it was given
        assert (shown["NumCPUs"], shown["OverSubscribe"]) == (str(NODE_CPUS), "NO"), shown
        assert shown["AllocTRES"].split(",")[:2] == [f"cpu={NODE_CPUS}", "node=1"], shown["AllocTRES"]
        assert "mem=" not in shown["AllocTRES"]
    assert jobs[with_mem]["MinMemoryNode"] == "3000M"  # asked for, but memory is not a scheduling resource here
    for node in nodes.values():
        shown = _show(cloud, "node", node)
        assert (shown["CPUAlloc"], shown["AllocMem"], shown["RealMemory"]) == (str(NODE_CPUS), "0", str(NODE_MEMORY))
    assert len(_whole_node_instances(cloud)) == 2  # EC2's view: one instance per job

    cloud.slurm("scancel", with_mem, without_mem)
    records = cloud.wait_jobs_done([with_mem, without_mem], timeout=60)
    assert {r.state for r in records} == {"CANCELLED"}
    assert_no_orphans(cloud)


def test_more_memory_than_a_whole_node_has_is_still_refused_at_submit(cloud: LocalCloud) -> None:
    # memory is not tracked on `whole`, but --mem still picks nodes by their RealMemory: none has 3585 MiB
    launched = len(cloud.instances())
    with pytest.raises(OpsError, match="Memory specification can not be satisfied"):
        cloud.sbatch("-p", "whole", "-n1", f"--mem={NODE_MEMORY + 1}", wrap="true")
    assert len(cloud.instances()) == launched


def test_two_jobs_pinned_to_one_node_share_it_on_cpu_but_queue_on_whole(cloud: LocalCloud) -> None:
    (shared_node,) = cold_nodes(cloud, 1, prefix="cpu-big-")  # c7i.xlarge: 2 cores, a -n1 job takes one
    (whole_node,) = cold_nodes(cloud, 1, prefix="whole-")
    shared = [cloud.sbatch("-p", "cpu", "-n1", "-w", shared_node, wrap="sleep 300") for _ in range(2)]
    pinned = [cloud.sbatch("-p", "whole", "-n1", "-w", whole_node, wrap="sleep 300") for _ in range(2)]
    _running(cloud, *shared)
    cloud.wait_until(lambda: "RUNNING" in {cloud.queue().get(job) for job in pinned}, 120, f"one of {pinned} running")

    # shared: both on the node at once, one CPU and the partition's DefMemPerCPU each; the node counts the memory
    assert {_show(cloud, "job", job)["NodeList"] for job in shared} == {shared_node}
    node = _show(cloud, "node", shared_node)
    assert (node["CPUAlloc"], node["AllocMem"]) == ("4", str(2 * 2 * SHARED_MEM_PER_CPU))
    # exclusive: the other job waits for the whole node, though a CPU's worth of work would fit beside the first
    first, second = sorted(pinned, key=lambda job: cloud.queue().get(job) != "RUNNING")
    cloud.wait_until(lambda: _show(cloud, "job", second)["Reason"] == "Resources", 60, f"job {second} waiting")
    assert _show(cloud, "job", second)["JobState"] == "PENDING"
    node = _show(cloud, "node", whole_node)
    assert (node["CPUAlloc"], node["AllocMem"]) == (str(NODE_CPUS), "0")

    cloud.slurm("scancel", first)
    _running(cloud, second)
    assert _show(cloud, "job", second)["NodeList"] == whole_node
    cloud.slurm("scancel", second, *shared)
    records = cloud.wait_jobs_done([first, second, *shared], timeout=60)
    assert {r.state for r in records} == {"CANCELLED"}
    assert_no_orphans(cloud)
