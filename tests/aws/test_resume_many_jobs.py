"""Many jobs in one resume (issue 33) and recorded instances EC2 no longer knows (issue 32), against the emulated EC2.

Jobs launch whole, in few calls, at once (planner.job_batches, launcher.in_threads); each job's nodes share an AZ;
a recorded instance EC2 does not return is gone (launched anew), one EC2 cannot be asked about holds its node back.
"""

from __future__ import annotations

import threading
import time
from collections import Counter

from localcloud.aws.emulated_aws import EmulatedAws
from localcloud.aws.faults import CapacityFault, Faults
from slurm_plugin.manifest import Manifest
from slurm_plugin.powersave import state
from slurm_plugin.powersave.binder import LOOKUP_FAILED_CODE
from slurm_plugin.powersave.launch_calls import LaunchDone
from slurm_plugin.powersave.launcher import LAUNCH_WORKERS, in_threads, resume_nodes
from tests.aws.plugin_env import FakeSlurm, ec2_for, live_instances, rid


def _jobs(count: int, size: int) -> list[list[str]]:
    return [[f"cpu-c7i-{j * size + i}" for i in range(1, size + 1)] for j in range(count)]


def _az_of(aws: EmulatedAws, manifest: Manifest) -> dict[str, str]:
    return {i["PrivateIpAddress"]: i["Placement"]["AvailabilityZone"] for i in live_instances(aws, manifest.cluster)}


def test_twenty_jobs_launch_in_five_fleet_calls_each_job_whole_in_one_az(aws: EmulatedAws, manifest: Manifest) -> None:
    jobs = _jobs(20, 5)
    slurm = FakeSlurm()
    nodes = [n for g in jobs for n in g]
    outcome = resume_nodes(manifest, nodes, jobs, ec2_for(aws), slurm, rid("many"))
    assert sorted(outcome.launched) == sorted(nodes) and not outcome.failed
    # batches of 5, 10, 20, 40, 25 nodes: one CreateFleet and one describe each, instead of 20 + 20
    assert aws.call_counts() == {"ec2:CreateFleet": 5, "ec2:DescribeInstances": 5}
    assert len(live_instances(aws, manifest.cluster)) == 100
    az = _az_of(aws, manifest)
    assert all(len({az[slurm.addresses[n]] for n in job}) == 1 for job in jobs)
    assert slurm.update_calls == 5  # each launch bound as its answer came


def test_jobs_an_az_cannot_hold_move_whole_to_the_next_az(aws: EmulatedAws, manifest: Manifest) -> None:
    aws.set_faults(Faults(capacity=(CapacityFault(availability_zone="us-east-1a"),)))
    jobs = _jobs(6, 3)
    slurm = FakeSlurm()
    outcome = resume_nodes(manifest, [n for g in jobs for n in g], jobs, ec2_for(aws), slurm, rid("move"))
    assert len(outcome.launched) == 18 and not outcome.failed and not outcome.terminated
    az = _az_of(aws, manifest)
    assert set(az.values()) <= {"us-east-1b", "us-east-1c"}
    assert all(len({az[slurm.addresses[n]] for n in job}) == 1 for job in jobs)


def test_jobs_with_no_capacity_anywhere_fail_whole_and_leave_nothing_running(
    aws: EmulatedAws, manifest: Manifest
) -> None:
    aws.set_faults(Faults(capacity=(CapacityFault(),)))
    jobs = _jobs(4, 3)
    slurm = FakeSlurm()
    outcome = resume_nodes(manifest, [n for g in jobs for n in g], jobs, ec2_for(aws), slurm, rid("none"))
    assert outcome.launched == {} and sorted(slurm.powered_down) == sorted(n for g in jobs for n in g)
    assert live_instances(aws, manifest.cluster) == []


def test_a_recorded_instance_ec2_does_not_return_is_gone_and_its_node_is_launched_anew(
    aws: EmulatedAws, manifest: Manifest
) -> None:
    # the node map of a failed-back controller: an instance terminated long ago, which EC2 no longer returns
    gone = {"instance_id": "i-0123456789abcdef0", "region": "us-east-1", "private_ip": "192.0.2.7", "bound_at": "1.0"}
    state.remember_instances(manifest.state_dir, {"cpu-c7i-3": gone})
    slurm = FakeSlurm()
    outcome = resume_nodes(manifest, ["cpu-c7i-3"], [], ec2_for(aws), slurm, rid("gone"))
    (live,) = live_instances(aws, manifest.cluster)
    assert outcome.launched["cpu-c7i-3"].instance_id == live["InstanceId"] != gone["instance_id"]
    assert slurm.addresses == {"cpu-c7i-3": live["PrivateIpAddress"]}
    assert state.node_map(manifest.state_dir)["cpu-c7i-3"]["instance_id"] == live["InstanceId"]


def test_a_terminated_recorded_instance_is_gone_too(aws: EmulatedAws, manifest: Manifest) -> None:
    first = resume_nodes(manifest, ["cpu-c7i-5"], [], ec2_for(aws), FakeSlurm(), rid("t1"))
    aws.client("ec2", "us-east-1").terminate_instances(InstanceIds=[first.launched["cpu-c7i-5"].instance_id])
    again = resume_nodes(manifest, ["cpu-c7i-5"], [], ec2_for(aws), FakeSlurm(), rid("t2"))
    assert again.launched["cpu-c7i-5"].instance_id != first.launched["cpu-c7i-5"].instance_id
    assert len(live_instances(aws, manifest.cluster)) == 1


def test_a_recorded_instance_ec2_cannot_be_asked_about_holds_its_node_back(
    aws: EmulatedAws, manifest: Manifest
) -> None:
    first = resume_nodes(manifest, ["cpu-c7i-6"], [], ec2_for(aws), FakeSlurm(), rid("u1"))
    aws.set_faults(Faults(lose_responses={"DescribeInstances": 1000}))
    slurm = FakeSlurm()
    again = resume_nodes(manifest, ["cpu-c7i-6"], [], ec2_for(aws), slurm, rid("u2"))
    aws.clear_faults()
    assert again.launched == {} and again.failed == {"cpu-c7i-6": LOOKUP_FAILED_CODE}
    assert list(slurm.powered_down) == ["cpu-c7i-6"] and LOOKUP_FAILED_CODE in slurm.powered_down["cpu-c7i-6"]
    # nothing launched twice: the recorded instance is the only one, and suspend still finds it by the node map
    assert [i["InstanceId"] for i in live_instances(aws, manifest.cluster)] == [first.launched["cpu-c7i-6"].instance_id]
    assert state.node_map(manifest.state_dir)["cpu-c7i-6"]["instance_id"] == first.launched["cpu-c7i-6"].instance_id


def test_launches_run_at_once_but_never_more_than_the_bound() -> None:
    barrier = threading.Barrier(LAUNCH_WORKERS, timeout=20)
    lock = threading.Lock()
    now: Counter[str] = Counter()

    def task() -> LaunchDone:
        with lock:
            now["running"] += 1
            now["most"] = max(now["most"], now["running"])
        try:
            barrier.wait()  # passes only when LAUNCH_WORKERS tasks run at the same time
            time.sleep(0.01)
        finally:
            with lock:
                now["running"] -= 1
        return LaunchDone()

    results = list(in_threads([task] * (2 * LAUNCH_WORKERS)))
    assert sorted(i for i, _ in results) == list(range(2 * LAUNCH_WORKERS))
    assert all(isinstance(r, LaunchDone) for _, r in results)
    assert now["most"] == LAUNCH_WORKERS


def test_a_launch_that_raises_fails_its_nodes_and_the_others_still_bind(aws: EmulatedAws, manifest: Manifest) -> None:
    def runner(tasks):  # type: ignore[no-untyped-def]
        for index, result in in_threads(tasks):
            yield index, (RuntimeError("bug") if index == 0 else result)

    jobs = _jobs(3, 2)
    slurm = FakeSlurm()
    outcome = resume_nodes(manifest, [n for g in jobs for n in g], jobs, ec2_for(aws), slurm, rid("bug"), runner=runner)
    assert sorted(outcome.failed) == jobs[0] and set(outcome.failed.values()) == {"LaunchFailed"}
    assert sorted(outcome.launched) == sorted(jobs[1] + jobs[2])


def test_each_launch_is_bound_as_soon_as_its_answer_comes_while_the_others_still_run(
    aws: EmulatedAws, manifest: Manifest
) -> None:
    slurm = FakeSlurm()
    seen: list[list[str]] = []

    def runner(tasks):  # type: ignore[no-untyped-def]
        for index, result in in_threads(tasks):
            yield index, result
            seen.append(sorted(slurm.addresses))  # the resume has taken this answer: what Slurm knows by now

    nodes = ["cpu-c7i-1", "cpu-c7i-2", "gpu-g5-1"]
    resume_nodes(manifest, nodes, [], ec2_for(aws), slurm, rid("rbind"), runner=runner)
    # two launches (CreateFleet for cpu-c7i, RunInstances for gpu-g5), in either order: the first one's nodes had
    # their NodeAddr before the second answer was taken
    assert seen[0] in (["cpu-c7i-1", "cpu-c7i-2"], ["gpu-g5-1"])
    assert seen[1] == nodes and slurm.update_calls == 2
