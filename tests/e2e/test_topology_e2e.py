"""Topology-aware scheduling end to end in the session's local cloud (local-demo.yaml: pool `small` has
`network_topology`): real slurmctld/slurmd (26.05) with topology/tree, the emulated EC2 answering
DescribeInstanceTopology (one bottom network node per launch: localcloud/aws/instance_topology.py), and the cluster
manager run as its real CLI.

Two launches place four nodes on two network nodes, interleaved by index (n1, n3 | n2, n4). A held 2-node job that
can only use those four is released once all four are idle: Slurm's default (no topology) gives it the two lowest
nodes, n1 + n2, on two network nodes; with the manager's tree it gets one launch's pair, on one network node.

On Slurm 25.05+ the manager moves the nodes in the running slurmctld (`scontrol update ... Topology=`): slurmctld is
the same process (PID and start time) before and after every tree change; `scontrol reconfigure` (a restart since
23.11) is for older releases only.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from localcloud.cloud import LocalCloud
from localcloud.ops import LIVE
from slurm_plugin.hostlists import compress, expand
from slurm_plugin.manager.metrics import METRICS_FILE
from slurm_plugin.manager.topology_live import LIVE_SINCE
from slurm_plugin.manifest import load_manifest
from slurm_plugin.powersave.state import process_start
from tests.e2e.conftest import cold_nodes, manager_cycle, replaced_boots

pytestmark = pytest.mark.e2e

POOL_SWITCH = "cpu-small"  # the pool's switch in topology.conf: its nodes with no known place
SLEEP = "sleep 600"
POOL_SIZE = 10  # local-demo.yaml: pool small, max_nodes


def topology_updates(cloud: LocalCloud) -> int:
    """The manager's `topology_updates` counter (0 before its first cycle)."""
    path = Path(load_manifest(cloud.layout.manifest).state_dir) / METRICS_FILE
    return int(json.loads(path.read_text())["counters"].get("topology_updates", 0)) if path.exists() else 0


def slurm_leaves(cloud: LocalCloud) -> dict[str, list[str]]:
    """Leaf switch -> nodes, as slurmctld holds the tree (`scontrol show topology`); {} while it reconfigures."""
    out = cloud.slurm("scontrol", "show", "topology", check=False)
    leaves = {}
    for line in out.splitlines():
        match = re.search(r"SwitchName=(\S+) Level=0 .*Nodes=(\S+)", line)
        if match:
            leaves[match[1]] = expand(match[2])
    return leaves


def leaf_of(leaves: dict[str, list[str]], node: str) -> str:
    return next((name for name, members in leaves.items() if node in members), "")


def slurmctld_identity(cloud: LocalCloud) -> tuple[int, str | None]:
    """slurmctld's PID and start time (a restart, e.g. by `scontrol reconfigure`, changes both or the latter)."""
    pid = cloud.running_daemons().get("slurmctld")
    assert pid, "slurmctld is not running"
    return pid, process_start(pid)


def slurm_release(cloud: LocalCloud) -> tuple[int, int]:
    major, minor = re.findall(r"(\d+)\.(\d+)", cloud.slurm("scontrol", "--version"))[0]
    return int(major), int(minor)


def ec2_leaves(cloud: LocalCloud, nodes: list[str]) -> dict[str, str]:
    """Each node's bottom network node, as the emulated EC2 answers DescribeInstanceTopology for its instance."""
    leaves = {}
    for node in nodes:
        inst = cloud.instance_of_node(node)
        ec2 = cloud.aws().client("ec2", inst.region)
        (answer,) = ec2.describe_instance_topology(InstanceIds=[inst.instance_id])["Instances"]
        leaves[node] = answer["NetworkNodes"][-1]
    return leaves


def running_on(cloud: LocalCloud, job: str, nodes: list[str]) -> bool:
    return cloud.queue().get(job) == "RUNNING" and all(cloud.nodes().get(n) in ("alloc", "mix") for n in nodes)


def test_multi_node_jobs_land_on_the_fewest_network_nodes(cloud: LocalCloud) -> None:
    assert slurm_release(cloud) >= LIVE_SINCE  # the local cloud's default release (26.05)
    conf = cloud.layout.etc / "topology.conf"
    assert f"SwitchName={POOL_SWITCH} Nodes=" in conf.read_text()  # render's tree, read by slurmctld at boot
    # the whole pool at rest first: a node an earlier test left warm would power down between two cycles below and
    # move back under the pool's switch (a tree change of its own, counted in `topology_updates`). A cycle first, as
    # the manager's unit runs one every minute: it heals nodes an earlier test's capacity cool-down and slurmctld
    # restart left idle~ but never available (REFRESH; seen: job B pending "ReqNodeNotAvail" on such a node)
    manager_cycle(cloud)
    n1, n2, n3, n4 = cold_nodes(cloud, POOL_SIZE, wait=150)[:4]
    four = [n1, n2, n3, n4]
    pair_a, pair_b = [n1, n3], [n2, n4]
    others = [n for n in cloud.nodes() if n.startswith("cpu-") and n not in four]  # partition cpu: small + big
    earlier = {i.instance_id for i in cloud.instances()}

    # two launches, one after the other: one bottom network node each
    def seen() -> str:
        jobs = cloud.slurm("squeue", "-h", "-o", "%i %T %r %N", check=False).strip().replace("\n", "; ")
        return f"jobs: {jobs}; nodes: {cloud.nodes()}"

    job_a = cloud.sbatch("-p", "cpu", "-N", "2", "-w", ",".join(pair_a), wrap=SLEEP)
    cloud.wait_until(lambda: running_on(cloud, job_a, pair_a), 120, f"job {job_a} running on {pair_a}", seen)
    job_b = cloud.sbatch("-p", "cpu", "-N", "2", "-w", ",".join(pair_b), wrap=SLEEP)
    cloud.wait_until(lambda: running_on(cloud, job_b, pair_b), 120, f"job {job_b} running on {pair_b}", seen)
    launched = {cloud.instance_of_node(n).instance_id for n in four}
    placed = ec2_leaves(cloud, four)  # before the counted calls below
    # one bottom network node per launch; a boot Slurm gave up on past ResumeTimeout (a busy machine) was launched
    # again on its own, in a place of its own
    if not replaced_boots(cloud, [i for i in cloud.instances() if i.instance_id not in earlier]):
        assert placed[n1] == placed[n3] != placed[n2] == placed[n4], placed
    job_c = ""
    try:
        cloud.slurm("scontrol", "update", f"SuspendExcNodes+={compress(four)}")  # kept up while job C waits
        aws = cloud.aws()
        aws.reset_call_counts()
        before = topology_updates(cloud)
        ctld = slurmctld_identity(cloud)
        manager_cycle(cloud)
        asked = aws.call_counts().get("ec2:DescribeInstanceTopology", 0)
        assert 1 <= asked <= 2  # the new instances, 100 ids a call, in the one or two regions they run in
        assert topology_updates(cloud) == before + 1  # one tree change applied
        # slurmctld reconfigured with the tree: each launch's pair under its own bottom network node
        cloud.wait_until(lambda: bool(leaf_of(slurm_leaves(cloud), n1).startswith("nn-")), 60, "the placed tree")
        leaves = slurm_leaves(cloud)
        assert {n: leaf_of(leaves, n) for n in four} == placed, leaves  # EC2's places, as the tree's leaves
        # moved in the running slurmctld: no restart (the old code's `scontrol reconfigure` restarted it)
        assert slurmctld_identity(cloud) == ctld
        # nothing changed: the next cycle asks EC2 nothing and leaves slurmctld alone
        aws.reset_call_counts()
        manager_cycle(cloud)
        assert aws.call_counts().get("ec2:DescribeInstanceTopology", 0) == 0
        assert topology_updates(cloud) == before + 1
        # a 2-node job that may use only the four, decided once all four are idle
        job_c = cloud.sbatch("-H", "-p", "cpu", "-N", "2", "-x", compress(others), wrap="hostname")
        cloud.slurm("scancel", job_a, job_b)
        cloud.wait_until(lambda: all(cloud.nodes().get(n) == "idle" for n in four), 60, f"{compress(four)} idle")
        cloud.slurm("scontrol", "release", job_c)
        (record,) = cloud.wait_jobs_done([job_c], 120)
        assert record.state == "COMPLETED", record
        # on one network node: one launch's pair (without the tree: the two lowest, n1 + n2, on two)
        assert len({placed[n] for n in expand(record.nodes)}) == 1, (record.nodes, placed)
    finally:
        for job in (job_a, job_b, job_c):
            if job:
                cloud.slurm("scancel", job, check=False)
        cloud.slurm("scontrol", "update", f"SuspendExcNodes-={compress(four)}", check=False)
    # the instances go: the next cycle puts the nodes back under their pool's switch, without asking EC2
    cloud.wait_until(
        lambda: (
            all(cloud.nodes().get(n, "").endswith("~") for n in four)
            and not launched & {i.instance_id for i in cloud.instances(LIVE)}
        ),
        120,
        f"{compress(four)} powered down and their instances gone",
    )
    aws = cloud.aws()
    aws.reset_call_counts()
    manager_cycle(cloud)
    assert aws.call_counts().get("ec2:DescribeInstanceTopology", 0) == 0
    cloud.wait_until(lambda: leaf_of(slurm_leaves(cloud), n1) == POOL_SWITCH, 60, f"{n1} back under {POOL_SWITCH}")
    leaves = slurm_leaves(cloud)
    assert {leaf_of(leaves, n) for n in four} == {POOL_SWITCH}
    assert slurmctld_identity(cloud) == ctld  # the nodes moved back in the same slurmctld too
