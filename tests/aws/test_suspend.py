"""SuspendProgram / ResumeFailProgram against the emulated AWS: find by tag per region, terminate in batches, reset."""

from __future__ import annotations

from localcloud.aws.emulated_aws import EmulatedAws
from slurm_plugin.manifest import Manifest
from slurm_plugin.powersave import state
from slurm_plugin.powersave.launcher import resume_nodes
from slurm_plugin.powersave.terminator import terminate_nodes
from tests.aws.plugin_env import FakeSlurm, ec2_for, live_instances, rid


def _nodes(prefix: str, count: int) -> list[str]:
    return [f"{prefix}{i}" for i in range(1, count + 1)]


def test_suspend_terminates_the_instance_behind_one_node_and_resets_it(aws: EmulatedAws, manifest: Manifest) -> None:
    slurm = FakeSlurm()
    resume_nodes(manifest, ["cpu-c7i-1", "cpu-c7i-2"], [], ec2_for(aws), slurm, rid("r"))
    outcome = terminate_nodes(manifest, ["cpu-c7i-1"], ec2_for(aws), slurm, "suspend")
    assert list(outcome.terminated.values()) == ["cpu-c7i-1"]
    live = live_instances(aws, manifest.cluster)
    assert [i["PrivateIpAddress"] for i in live] == [slurm.addresses["cpu-c7i-2"]]
    assert slurm.resets == ["cpu-c7i-1"]


def test_suspend_of_100_nodes_makes_one_describe_and_one_terminate(aws: EmulatedAws, manifest: Manifest) -> None:
    slurm = FakeSlurm()
    nodes = _nodes("cpu-c7i-", 100)
    resume_nodes(manifest, nodes, [], ec2_for(aws), slurm, rid("r"))
    aws.reset_call_counts()
    outcome = terminate_nodes(manifest, nodes, ec2_for(aws), slurm, "suspend")
    assert aws.call_counts() == {"ec2:DescribeInstances": 1, "ec2:TerminateInstances": 1}
    assert len(outcome.terminated) == 100
    assert live_instances(aws, manifest.cluster) == []


def test_suspend_finds_instances_in_another_region(aws: EmulatedAws, manifest: Manifest) -> None:
    from localcloud.aws.faults import CapacityFault, Faults

    slurm = FakeSlurm()
    resume_nodes(manifest, ["far-x-1"], [], ec2_for(aws), slurm, rid("r-home"))
    aws.set_faults(Faults(capacity=(CapacityFault(region="us-east-1"),)))
    resume_nodes(manifest, ["far-x-2"], [], ec2_for(aws), slurm, rid("r-remote"))
    aws.clear_faults()
    regions = {i["Placement"]["AvailabilityZone"][:-1] for i in live_instances(aws, manifest.cluster)}
    assert regions == {"us-east-1", "us-west-2"}
    outcome = terminate_nodes(manifest, ["far-x-1", "far-x-2"], ec2_for(aws), slurm, "suspend")
    assert sorted(outcome.terminated.values()) == ["far-x-1", "far-x-2"]
    assert live_instances(aws, manifest.cluster) == []


def test_suspend_finds_an_instance_whose_node_address_was_never_set(aws: EmulatedAws, manifest: Manifest) -> None:
    resume_nodes(manifest, ["cpu-c7i-7"], [], ec2_for(aws), FakeSlurm(), rid("r"))
    forgetful = FakeSlurm()  # Slurm never got NodeAddr (scontrol failed): the node map still knows the instance
    outcome = terminate_nodes(manifest, ["cpu-c7i-7"], ec2_for(aws), forgetful, "suspend")
    assert list(outcome.terminated.values()) == ["cpu-c7i-7"]
    assert live_instances(aws, manifest.cluster) == []


def test_suspend_leaves_instances_of_other_nodes_alone(aws: EmulatedAws, manifest: Manifest) -> None:
    slurm = FakeSlurm()
    resume_nodes(manifest, _nodes("cpu-c7i-", 3), [], ec2_for(aws), slurm, rid("r"))
    state.forget_instances(manifest.state_dir, ["cpu-c7i-1", "cpu-c7i-2", "cpu-c7i-3"])
    outcome = terminate_nodes(manifest, ["cpu-c7i-9"], ec2_for(aws), slurm, "suspend")
    assert outcome.terminated == {} and outcome.not_found == ["cpu-c7i-9"]
    assert len(live_instances(aws, manifest.cluster)) == 3


def test_resume_fail_terminates_and_powers_nodes_down_with_a_code(aws: EmulatedAws, manifest: Manifest) -> None:
    slurm = FakeSlurm()
    resume_nodes(manifest, ["cpu-c7i-1"], [], ec2_for(aws), slurm, rid("r"))
    terminate_nodes(manifest, ["cpu-c7i-1"], ec2_for(aws), slurm, "resume-fail", "(Code:ResumeFailed) test")
    assert live_instances(aws, manifest.cluster) == []
    assert slurm.powered_down == {"cpu-c7i-1": "(Code:ResumeFailed) test"}


# Last: moto slows down as its instance table grows.
def test_resume_and_suspend_of_1000_nodes_leave_nothing_behind(aws: EmulatedAws, manifest: Manifest) -> None:
    slurm = FakeSlurm()
    nodes = _nodes("cpu-c7i-", 1000)
    resumed = resume_nodes(manifest, nodes, [], ec2_for(aws), slurm, rid("r1000"))
    assert len(resumed.launched) == 1000
    assert aws.call_counts() == {"ec2:CreateFleet": 1, "ec2:DescribeInstances": 1}
    outcome = terminate_nodes(manifest, nodes, ec2_for(aws), slurm, "suspend")
    assert len(outcome.terminated) == 1000
    assert live_instances(aws, manifest.cluster) == []
