"""bench/ec2_sim with multi-node jobs (issue 33): the job-aware floor, the launcher's runner on the virtual clock,
and scale-outs whose jobs each land whole in one AZ (counts and outcomes, no timing)."""

from __future__ import annotations

from collections import Counter

import pytest

from bench.ec2_sim import floor
from bench.ec2_sim.buckets import BucketSpec
from bench.ec2_sim.clock import VirtualClock
from bench.ec2_sim.driver import EPOCH, Scenario, job_groups, launch_runner, simulate
from bench.ec2_sim.ec2_model import ModelParams
from slurm_plugin.powersave.launch_calls import LaunchDone


def test_a_job_launches_when_the_bucket_has_given_its_last_nodes_token() -> None:
    bucket = BucketSpec(1000, 2)
    assert floor.launch_schedule(1100, bucket, job_nodes=50) == [(0.0, 1000), (25.0, 50), (50.0, 50)]
    assert floor.launch_floor(4000, bucket, job_nodes=1000) == 1500
    assert floor.launch_schedule(3, bucket, job_nodes=2) == [(0.0, 3)]  # the last job may be short
    with pytest.raises(ValueError, match="never fits"):
        floor.launch_schedule(2000, bucket, job_nodes=1001)


def test_the_resume_files_jobs_are_runs_of_consecutive_nodes() -> None:
    nodes = ["cpu-c7i-1", "cpu-c7i-2", "cpu-c7i-3", "cpu-c7i-5"]
    assert job_groups(nodes, 2) == [["cpu-c7i-1", "cpu-c7i-2"], ["cpu-c7i-3"], ["cpu-c7i-5"]]
    assert job_groups(nodes, 1) == []


def test_the_runner_runs_launches_as_processes_at_most_workers_at_once() -> None:
    clock = VirtualClock(EPOCH)
    running = Counter[str]()

    def task(seconds: float) -> LaunchDone:
        running["now"] += 1
        running["most"] = max(running["most"], running["now"])
        clock.sleep(seconds)
        running["now"] -= 1
        return LaunchDone(failed=[str(seconds)])

    tasks = [lambda s=s: task(s) for s in (5.0, 1.0, 3.0, 2.0)]
    done = [(i, r.failed, clock.monotonic()) for i, r in launch_runner(clock, workers=2)(tasks)]  # type: ignore[union-attr]
    clock.close()
    # two at a time: 1 s ends first, then 3 s (started at 1), then 5 s, then 2 s (started at 4)
    assert [(i, t) for i, _, t in done] == [(1, 1.0), (2, 4.0), (0, 5.0), (3, 6.0)]
    assert running["most"] == 2 and clock.errors == []


def test_two_hundred_nodes_in_jobs_of_fifty_all_run_each_job_in_one_az_without_a_leak() -> None:
    row = simulate(Scenario("jobs", 200, model=ModelParams(ice_rate=0.0), job_nodes=50, capacity_share=None))
    assert row["nodes_running"] == 200 and row["instances_leaked"] == 0 and row["instances_launched"] == 200
    # jobs of 50: launches of 50, 100 and 50 nodes (job_batches), each one fleet call and one describe
    assert row["aws_calls"] == {"CreateFleet": 3, "DescribeInstances": 3}
    assert row["resume_calls"] == 1 and row["powered_down_by_plugin"] == {} and row["jobs_across_azs"] == 0


def test_jobs_spill_whole_into_other_azs_when_one_az_runs_short() -> None:
    # each (AZ, type) holds 0.3 x 400 = 120: no AZ holds all 400, every job still lands whole in one AZ
    row = simulate(Scenario("spill", 400, model=ModelParams(ice_rate=0.0), job_nodes=50))
    assert row["nodes_running"] == 400 and row["instances_leaked"] == 0 and row["jobs_across_azs"] == 0
    assert row["floor_s"] >= floor.all_running_floor(200, BucketSpec(1000, 2), floor.BootTime(75, 0.25)) - 1e-6
