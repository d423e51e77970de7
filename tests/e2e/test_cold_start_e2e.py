"""End to end in the local cloud: what a cold start costs slurmctld, counted by slurmctld itself (sdiag).

A 3-node job on powered-down nodes boots 3 instances. The boot path must ask Slurm about its own nodes and job only:
the node bootstrap reads its node name from the shared file system and asks about that one node (sinfo -n); the
prolog looks at each of its nodes once and then waits for the controller's boot watch, which asks about the waited
nodes only. So no whole-node-table request may come from it: the window holds only the background's (the metrics
exporter's), whose rate is measured in a quiet window first. Counts, never timing.
"""

from __future__ import annotations

import math
import time
from pathlib import Path

from bench.timeline_logs import rpc_counts
from localcloud.cloud import LocalCloud
from localcloud.ops import LIVE
from slurm_plugin import bootwatch
from slurm_plugin.manager import daemon as manager
from tests.e2e.conftest import cold_nodes, replaced_boots

NODES = 3
QUIET = 10.0  # seconds of the quiet window measuring the background (a multiple of the exporter's intervals)


def _running(cloud: LocalCloud, job_id: str) -> bool:
    # a single-job question (not the node table): the window must hold only what the boot path asks
    return cloud.slurm("squeue", "-h", "-j", job_id, "-o", "%T", check=False).strip() in ("RUNNING", "COMPLETED")


def _line(log: Path, job: str) -> str:
    return next((line for line in log.read_text().splitlines() if f"prolog job {job}: nodes" in line), "")


def test_a_cold_start_asks_slurmctld_only_about_its_own_nodes_and_job(cloud: LocalCloud) -> None:
    nodes = cold_nodes(cloud, NODES)
    live_before = {i.instance_id for i in cloud.instances(LIVE)}
    # the background: what reads the whole node table while nothing boots (the exporter, for Prometheus's scrapes and
    # its CloudWatch publisher), over a quiet window
    quiet_start = rpc_counts(cloud.slurm("sdiag"))
    time.sleep(QUIET)
    before = rpc_counts(cloud.slurm("sdiag"))
    background = (before.get("REQUEST_NODE_INFO", 0) - quiet_start.get("REQUEST_NODE_INFO", 0)) / QUIET
    started = time.monotonic()
    job = cloud.sbatch("-N", str(NODES), "-w", ",".join(nodes), wrap="sleep 5")
    deadline = started + 120
    while not _running(cloud, job):
        assert time.monotonic() < deadline, f"job {job} not RUNNING on cold nodes {nodes}"
        time.sleep(1)
    elapsed = time.monotonic() - started
    after = rpc_counts(cloud.slurm("sdiag"))
    delta = {k: after.get(k, 0) - before.get(k, 0) for k in after}
    launched = {i.instance_id for i in cloud.instances(LIVE)} - live_before
    assert len(launched) == NODES, launched  # one instance per node: the early launch and ResumeProgram agree
    # a boot past ResumeTimeout (a busy machine) was ended and its node booted again: that boot asked too
    extra = len(replaced_boots(cloud, [i for i in cloud.instances() if i.instance_id not in live_before]))
    # each booting node: one configless config fetch (the login node's sackd may fetch once in the window too) and one
    # `scontrol show config` (its bootstrap) ...
    assert NODES <= delta.get("REQUEST_CONFIG", 0) <= NODES + extra + 1, (delta, extra)
    assert NODES <= delta.get("REQUEST_BUILD_INFO", 0) <= NODES + extra, (delta, extra)
    assert delta.get("MESSAGE_NODE_REGISTRATION_STATUS", 0) >= NODES, delta
    # ... and no whole node table from the boot path: no more than the background's rate, with room for a sample
    # that caught one collection fewer than the average (x1.5) and for reads in flight at each end of the window
    # (+3), plus the cluster manager's cycles that may fall in the window (one whole-table read every
    # manager.INTERVAL: longer than the quiet window, which may hold none); before, each booting node and each
    # waiting prolog read it every second (NODES more a second: far above this)
    allowed = math.ceil(1.5 * background * elapsed) + 3 + math.ceil(elapsed / manager.INTERVAL)
    assert delta.get("REQUEST_NODE_INFO", 0) <= allowed, (delta, elapsed, background)
    # single-node questions: the bootstrap's (1 per node when its NodeAddr is set), the prolog's first look (1 per
    # node), the boot watch's (its waited nodes, every bootwatch.INTERVAL while they boot): bounded by time, not cluster size
    bound = (NODES + extra) * (2 + 2 + math.ceil(elapsed / bootwatch.INTERVAL))
    assert delta.get("REQUEST_NODE_INFO_SINGLE", 0) <= bound, (delta, elapsed)
    # the prolog was woken by the boot watch, not by polling Slurm itself
    prolog_log = cloud.layout.log / "prolog.log"
    assert "(boot watch)" in _line(prolog_log, job), prolog_log.read_text()[-2000:]
    per_node = (
        sum(delta.get(k, 0) for k in ("REQUEST_NODE_INFO_SINGLE", "REQUEST_CONFIG", "REQUEST_BUILD_INFO")) / NODES
    )
    print(f"cold start of {NODES} nodes in {elapsed:.1f} s: {per_node:.1f} node-path RPCs per node; {delta}")
    cloud.wait_jobs_done([job], timeout=120)
