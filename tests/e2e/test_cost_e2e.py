"""`elastic-slurm local cost` against real jobs in the local cloud: each job's cost is the price of the emulated EC2
instance that ran each of its nodes (its type, AZ and market as EC2 reports them, priced from the instance cache the
cloud's controller uses) x its elapsed time in sacct x its CPU share, and the total is the sum of the jobs.

Needs the resume worker's `node_launched` records in the event log (slurm_plugin/telemetry/events.py)."""

from __future__ import annotations

import contextlib
import json
import math
import time
from typing import Any

import pytest

from elastic_slurm.cli import main
from localcloud.cloud import LocalCloud
from localcloud.image.slurm_root import JOB_USER
from localcloud.ops import Instance, OpsError
from slurm_plugin.instance_cache import InstanceCache
from slurm_plugin.manifest import load_manifest
from tests.e2e.conftest import cold_nodes

pytestmark = pytest.mark.e2e


def _backing_instances(cloud: LocalCloud, nodes: list[str], timeout: float = 120) -> dict[str, Instance]:
    """The live EC2 instance whose private IP is each node's NodeAddr, once the node is bound to one."""
    found: dict[str, Instance] = {}

    def bound() -> bool:
        for node in nodes:
            if node not in found:
                with contextlib.suppress(OpsError):  # not bound to an instance yet
                    found[node] = cloud.instance_of_node(node)
        return len(found) == len(nodes)

    cloud.wait_until(bound, timeout, f"instances behind {nodes}")
    return found


def _sacct(cloud: LocalCloud, jobs: list[str]) -> dict[str, tuple[int, int, str]]:
    """Job id -> (ElapsedRaw, AllocCPUS, NodeList) as sacct reports them."""
    out = cloud.slurm("sacct", "-n", "-X", "-P", "-j", ",".join(jobs), "-o", "JobID,ElapsedRaw,AllocCPUS,NodeList")
    rows = (line.split("|") for line in out.splitlines() if line.strip())
    return {job: (int(elapsed), int(cpus), nodes) for job, elapsed, cpus, nodes in rows}


def _controller_cache(cloud: LocalCloud) -> InstanceCache:
    """The instance cache the controller's plugin reads (its manifest's instance_cache_path, on the controller)."""
    path = load_manifest(cloud.layout.manifest).instance_cache_path
    result = cloud.on_controller(["cat", path])
    assert result.returncode == 0, result.stderr
    return InstanceCache.model_validate_json(result.stdout)


def _hourly(cache: InstanceCache, instance: Instance) -> float:
    """USD/hour of an EC2 instance: the spot price of its AZ, or the on-demand price."""
    prices = cache.regions[instance.region][instance.instance_type].prices
    price = prices.spot.get(instance.availability_zone) if instance.market == "spot" else prices.on_demand
    assert price is not None, f"the cache has no {instance.market} price for {instance}"
    return price


def _local_cost(cloud: LocalCloud, capsys: pytest.CaptureFixture[str], since: float, *extra: str) -> dict[str, Any]:
    capsys.readouterr()
    seconds = math.ceil(time.time() - since)
    argv = ["local", "cost", "--state-dir", str(cloud.layout.root), "--since", f"now-{seconds}seconds", *extra]
    code = main([*argv, "--format", "json"])
    out, err = capsys.readouterr()
    assert code == 0, err
    data: dict[str, Any] = json.loads(out)
    return data


def test_each_job_costs_its_instances_price_times_elapsed_times_share(
    cloud: LocalCloud, capsys: pytest.CaptureFixture[str]
) -> None:
    started = time.time() - 2
    (whole,) = cold_nodes(cloud, 1)
    (shared,) = cold_nodes(cloud, 1, prefix="cpu-big-")
    jobs = [
        # two 1-task jobs on one 2-core node (c7i.xlarge): each gets a whole core, 2 of its 4 vCPUs
        cloud.sbatch("-w", shared, "-n1", wrap="sleep 8", user=JOB_USER),
        cloud.sbatch("-w", shared, "-n1", wrap="sleep 8", user=JOB_USER),
        cloud.sbatch("-w", whole, "--exclusive", wrap="sleep 8", user=JOB_USER),  # the whole node
    ]
    backing = _backing_instances(cloud, [shared, whole])
    records = cloud.wait_jobs_done(jobs, timeout=150)
    assert {r.state for r in records} == {"COMPLETED"}
    sacct = _sacct(cloud, jobs)
    cache = _controller_cache(cloud)

    report = _local_cost(cloud, capsys, started)

    by_id = {job["job_id"]: job for job in report["jobs"]}
    assert set(jobs) <= set(by_id), f"jobs missing from the report: {set(jobs) - set(by_id)}"
    shares = {}
    for job in jobs:
        elapsed, cpus, node = sacct[job]
        instance = backing[node]
        vcpus = cache.regions[instance.region][instance.instance_type].vcpus
        shares[job] = min(1.0, cpus / vcpus)
        priced = by_id[job]
        (reported,) = priced["nodes"]
        ec2 = (instance.instance_id, instance.instance_type, instance.availability_zone, instance.market)
        assert (reported["instance_id"], reported["instance_type"], reported["az"], reported["market"]) == ec2
        assert not priced["estimated"] and not priced["unpriced"], reported["basis"]
        assert (priced["user"], priced["seconds"], priced["share"]) == (JOB_USER, elapsed, pytest.approx(shares[job]))
        assert priced["usd"] == pytest.approx(_hourly(cache, instance) * elapsed / 3600 * shares[job], rel=1e-9)
    assert shares[jobs[0]] < 1.0 and shares[jobs[2]] == 1.0  # the shared node was shared, the exclusive one not
    assert report["total_usd"] == pytest.approx(sum(job["usd"] for job in report["jobs"]), rel=1e-9)
    assert sum(row["usd"] for row in report["rows"]) == pytest.approx(report["total_usd"], rel=1e-9)

    by_user = _local_cost(cloud, capsys, started, "--by", "user")
    rows = {row["key"]: row for row in by_user["rows"]}
    mine = [job for job in by_user["jobs"] if job["user"] == JOB_USER]
    assert rows[JOB_USER]["usd"] == pytest.approx(sum(job["usd"] for job in mine), rel=1e-9)
    assert rows[JOB_USER]["jobs"] == len({job["job_id"] for job in mine}) >= 3


def test_a_bad_since_is_one_line_and_exit_2(cloud: LocalCloud, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["local", "cost", "--state-dir", str(cloud.layout.root), "--since", "last tuesday"])
    out, err = capsys.readouterr()
    assert (code, out) == (2, "")
    assert err.splitlines() == [err.strip()] and "--since: 'last tuesday' is not a time sacct accepts" in err
