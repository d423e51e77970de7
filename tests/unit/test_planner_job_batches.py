"""Whole jobs packed into launches of growing size (planner.job_batches), and what plan_launch makes of them."""

from __future__ import annotations

from slurm_plugin.manifest import Location, PoolManifest
from slurm_plugin.powersave.planner import job_batches, plan_launch


def _jobs(count: int, size: int, prefix: str = "p-cpu-") -> list[tuple[str, ...]]:
    return [tuple(f"{prefix}{j * size + i}" for i in range(1, size + 1)) for j in range(count)]


def test_the_first_job_goes_alone_and_each_next_launch_doubles() -> None:
    batches = job_batches(_jobs(80, 50))
    assert [sum(len(g) for g in b) for b in batches] == [50, 100, 200, 400, 800, 1600, 850]
    assert [g for b in batches for g in b] == _jobs(80, 50)  # every job once, in order, never split


def test_one_big_job_is_one_launch() -> None:
    assert job_batches(_jobs(1, 4000)) == [tuple(_jobs(1, 4000))]


def test_a_job_bigger_than_the_next_launch_goes_alone_and_launches_stop_at_the_limit() -> None:
    jobs = [*_jobs(1, 2), tuple(f"p-big-{i}" for i in range(1, 11)), *_jobs(6, 3, "p-small-")]
    sizes = [[len(g) for g in b] for b in job_batches(jobs, limit=8)]
    assert sizes == [[2], [10], [3, 3], [3, 3], [3, 3]]


def test_no_jobs_no_launches() -> None:
    assert job_batches([]) == []


def _pool() -> PoolManifest:
    azs = ["us-east-1a", "us-east-1b"]
    return PoolManifest(
        partition="p",
        pool="cpu",
        node_prefix="p-cpu-",
        min_nodes=0,
        max_nodes=10_000,
        instance_types=["c7i.large"],
        purchase_option="on_demand",
        locations=[
            Location(region="us-east-1", availability_zone=az, subnet_id=f"subnet-{az}", launch_template_id="lt-1")
            for az in azs
        ],
    )


def test_a_pools_jobs_launch_in_batches_each_one_az_and_its_single_nodes_apart() -> None:
    jobs = _jobs(7, 4)
    singles = [f"p-cpu-{n}" for n in range(100, 103)]
    plan = plan_launch([n for g in jobs for n in g] + singles, [_pool()], [], jobs)
    assert [len(launch.groups) for launch in plan.launches] == [1, 2, 4, 0]
    assert [len(launch.nodes) for launch in plan.launches] == [4, 8, 16, 3]
    assert all(a.single_availability_zone for launch in plan.launches[:3] for a in launch.attempts)
    assert not any(a.single_availability_zone for a in plan.launches[3].attempts)
