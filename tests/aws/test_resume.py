"""ResumeProgram against the emulated AWS: launches, capacity failover, idempotency, concurrency, all-or-nothing."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from pathlib import Path

from localcloud.aws.emulated_aws import EmulatedAws
from localcloud.aws.faults import CapacityFault, Faults
from slurm_plugin.manifest import Manifest
from slurm_plugin.powersave import capacity
from slurm_plugin.powersave.launcher import resume_nodes
from tests.aws.plugin_env import FakeSlurm, ec2_for, live_instances, rid


def _nodes(prefix: str, count: int, start: int = 1) -> list[str]:
    return [f"{prefix}{i}" for i in range(start, start + count)]


def test_resume_of_one_node_launches_one_instance_and_sets_its_address(aws: EmulatedAws, manifest: Manifest) -> None:
    slurm = FakeSlurm()
    outcome = resume_nodes(manifest, ["cpu-c7i-1"], [], ec2_for(aws), slurm, rid("r1"))
    live = live_instances(aws, manifest.cluster)
    assert [i["InstanceId"] for i in live] == [outcome.launched["cpu-c7i-1"].instance_id]
    assert slurm.addresses == {"cpu-c7i-1": live[0]["PrivateIpAddress"]}
    tags = {t["Key"]: t["Value"] for t in live[0]["Tags"]}
    assert tags["elastic-slurm:pool"] == "cpu-c7i" and tags["project"] == "plugin-tests"
    assert tags["elastic-slurm:launch-request"].startswith("r1-")


def test_resume_of_100_nodes_uses_one_fleet_call_and_one_describe(aws: EmulatedAws, manifest: Manifest) -> None:
    slurm = FakeSlurm()
    nodes = _nodes("cpu-c7i-", 100)
    outcome = resume_nodes(manifest, nodes, [], ec2_for(aws), slurm, rid("r100"))
    assert aws.call_counts() == {"ec2:CreateFleet": 1, "ec2:DescribeInstances": 1}
    assert sorted(outcome.launched) == sorted(nodes)
    assert len(live_instances(aws, manifest.cluster)) == 100
    assert len(set(slurm.addresses.values())) == 100
    assert slurm.update_calls == 1


def test_single_type_single_az_pool_uses_run_instances(aws: EmulatedAws, manifest: Manifest) -> None:
    outcome = resume_nodes(manifest, _nodes("gpu-g5-", 4), [], ec2_for(aws), FakeSlurm(), rid("rgpu"))
    assert len(outcome.launched) == 4
    counts = aws.call_counts()
    # moto launches MinCount (EC2 launches up to MaxCount), so the emulator may need one call per instance here.
    assert counts.get("ec2:RunInstances", 0) >= 1 and "ec2:CreateFleet" not in counts
    assert {i["InstanceType"] for i in live_instances(aws, manifest.cluster)} == {"g5.xlarge"}


def test_ice_in_one_az_falls_back_to_next_az(aws: EmulatedAws, manifest: Manifest) -> None:
    aws.set_faults(Faults(capacity=(CapacityFault(availability_zone="us-east-1a"),)))
    outcome = resume_nodes(manifest, _nodes("cpu-c7i-", 10), [], ec2_for(aws), FakeSlurm(), rid("rice-az"))
    live = live_instances(aws, manifest.cluster)
    assert len(outcome.launched) == 10 and len(live) == 10
    assert {i["Placement"]["AvailabilityZone"] for i in live} <= {"us-east-1b", "us-east-1c"}
    assert ("cpu-c7i", "us-east-1a") in capacity.load_cooling(manifest.state_dir, 0)


def test_ice_for_preferred_type_falls_back_to_next_type(aws: EmulatedAws, manifest: Manifest) -> None:
    aws.set_faults(Faults(capacity=(CapacityFault(instance_type="c7i.large"),)))
    outcome = resume_nodes(manifest, _nodes("cpu-c7i-", 5), [], ec2_for(aws), FakeSlurm(), rid("rice-type"))
    assert len(outcome.launched) == 5
    assert {i["InstanceType"] for i in live_instances(aws, manifest.cluster)} == {"c6i.large"}
    assert capacity.load_cooling(manifest.state_dir, 0) == []


def test_ice_in_home_region_falls_back_to_remote_region(aws: EmulatedAws, manifest: Manifest) -> None:
    aws.set_faults(Faults(capacity=(CapacityFault(region="us-east-1"),)))
    outcome = resume_nodes(manifest, _nodes("far-x-", 3), [], ec2_for(aws), FakeSlurm(), rid("rregion"))
    assert {i.region for i in outcome.launched.values()} == {"us-west-2"}
    assert len(live_instances(aws, manifest.cluster, ["us-east-1"])) == 0
    assert len(live_instances(aws, manifest.cluster, ["us-west-2"])) == 3


def test_spot_shortage_falls_back_to_on_demand(aws: EmulatedAws, manifest: Manifest) -> None:
    aws.set_faults(Faults(capacity=(CapacityFault(market="spot", code="InsufficientInstanceCapacity"),)))
    outcome = resume_nodes(manifest, _nodes("spot-s-", 3), [], ec2_for(aws), FakeSlurm(), rid("rspot"))
    live = live_instances(aws, manifest.cluster)
    assert len(outcome.launched) == 3 and len(live) == 3
    assert all(i.get("InstanceLifecycle") != "spot" for i in live)


def test_no_capacity_anywhere_powers_nodes_down_and_starts_cooldown(aws: EmulatedAws, manifest: Manifest) -> None:
    aws.set_faults(Faults(capacity=(CapacityFault(),)))
    slurm = FakeSlurm()
    nodes = _nodes("cpu-c7i-", 4)
    outcome = resume_nodes(manifest, nodes, [], ec2_for(aws), slurm, rid("rnone"))
    assert outcome.launched == {} and live_instances(aws, manifest.cluster) == []
    assert sorted(slurm.powered_down) == sorted(nodes)
    assert all(r.startswith("(Code:InsufficientInstanceCapacity)") for r in slurm.powered_down.values())
    assert sorted(az for _, az in capacity.load_cooling(manifest.state_dir, 0)) == [
        "us-east-1a",
        "us-east-1b",
        "us-east-1c",
    ]
    # The next resume skips the cooling pool without calling EC2 and powers the nodes down at once.
    aws.clear_faults()
    aws.reset_call_counts()
    again = FakeSlurm()
    resume_nodes(manifest, nodes, [], ec2_for(aws), again, rid("rnone2"))
    assert aws.call_counts().get("ec2:CreateFleet", 0) == 0
    assert all(r.startswith("(Code:CapacityCooldown)") for r in again.powered_down.values())


def test_throttled_calls_are_retried_without_duplicates(aws: EmulatedAws, manifest: Manifest) -> None:
    aws.set_faults(Faults(throttle_every=2))
    outcome = resume_nodes(manifest, _nodes("cpu-c7i-", 20), [], ec2_for(aws), FakeSlurm(), rid("rthrottle"))
    assert len(outcome.launched) == 20
    assert len(live_instances(aws, manifest.cluster)) == 20


def test_lost_fleet_response_after_launch_creates_no_duplicates(aws: EmulatedAws, manifest: Manifest) -> None:
    aws.set_faults(Faults(lose_responses={"CreateFleet": 1}))
    outcome = resume_nodes(manifest, _nodes("cpu-c7i-", 10), [], ec2_for(aws), FakeSlurm(), rid("rlost"))
    assert len(outcome.launched) == 10
    assert len(live_instances(aws, manifest.cluster)) == 10


def test_every_answer_lost_still_finds_the_launched_instances(aws: EmulatedAws, manifest: Manifest) -> None:
    aws.set_faults(Faults(lose_responses={"CreateFleet": 50, "RunInstances": 50}))
    outcome = resume_nodes(manifest, _nodes("cpu-c7i-", 6), [], ec2_for(aws), FakeSlurm(), rid("rlostall"))
    live = live_instances(aws, manifest.cluster)
    assert len(live) == 6
    assert sorted(i.instance_id for i in outcome.launched.values()) == sorted(i["InstanceId"] for i in live)


def test_multi_node_job_is_all_or_nothing_across_pools(aws: EmulatedAws, manifest: Manifest) -> None:
    aws.set_faults(Faults(capacity=(CapacityFault(instance_type="g5.xlarge"),)))
    slurm = FakeSlurm()
    job = ["cpu-c7i-1", "cpu-c7i-2", "gpu-g5-1"]
    outcome = resume_nodes(manifest, [*job, "cpu-c7i-3"], [job], ec2_for(aws), slurm, rid("rjob"))
    assert sorted(outcome.launched) == ["cpu-c7i-3"]
    assert len(live_instances(aws, manifest.cluster)) == 1
    assert sorted(slurm.powered_down) == sorted(job)
    assert "cpu-c7i-3" in slurm.addresses


def test_concurrent_resumes_of_overlapping_nodes_do_not_double_launch(aws: EmulatedAws, manifest: Manifest) -> None:
    results = {}

    def run(name: str, nodes: list[str]) -> None:
        results[name] = resume_nodes(manifest, nodes, [], ec2_for(aws), FakeSlurm(), name)

    threads = [
        threading.Thread(target=run, args=(rid("ra"), _nodes("cpu-c7i-", 20))),
        threading.Thread(target=run, args=(rid("rb"), _nodes("cpu-c7i-", 20, start=11))),
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    launched = [n for r in results.values() for n in r.launched]
    skipped = [n for r in results.values() for n in r.busy]
    assert len(live_instances(aws, manifest.cluster)) == len(launched)
    assert len(launched) == len(set(launched))
    # Overlap is launched once; a node skipped as busy was launched by the other resume.
    assert set(launched) | set(skipped) == set(_nodes("cpu-c7i-", 30))
    assert set(skipped) <= set(launched)


def _fleet_calls(aws: EmulatedAws, log: Path, run: Callable[[], object]) -> list[dict[str, str]]:
    """The parameters of every CreateFleet `run` makes (the emulator's request log)."""
    aws.log_requests(log)
    try:
        run()
    finally:
        aws.log_requests(None)
    entries = [json.loads(line) for line in log.read_text().splitlines()]
    return [e["params"] for e in entries if e["action"] == "CreateFleet"]


def test_a_multi_node_jobs_nodes_launch_all_or_nothing_in_one_az(
    aws: EmulatedAws, manifest: Manifest, tmp_path: Path
) -> None:
    job = _nodes("cpu-c7i-", 4)
    calls = _fleet_calls(
        aws,
        tmp_path / "requests.jsonl",
        lambda: resume_nodes(manifest, job, [job], ec2_for(aws), FakeSlurm(), rid("j")),
    )
    (fleet,) = calls
    assert fleet["OnDemandOptions.SingleAvailabilityZone"] == "true"
    assert fleet["OnDemandOptions.MinTargetCapacity"] == "4"
    live = live_instances(aws, manifest.cluster)
    assert len(live) == 4 and len({i["Placement"]["AvailabilityZone"] for i in live}) == 1


def test_a_pool_that_allows_spreading_launches_its_jobs_in_any_azs(
    aws: EmulatedAws, manifest: Manifest, tmp_path: Path
) -> None:
    pools = [p.model_copy(update={"spread_jobs_across_azs": p.pool == "c7i"}) for p in manifest.pools]
    spread = manifest.model_copy(update={"pools": pools})
    job = _nodes("cpu-c7i-", 4)
    calls = _fleet_calls(
        aws, tmp_path / "requests.jsonl", lambda: resume_nodes(spread, job, [job], ec2_for(aws), FakeSlurm(), rid("s"))
    )
    (fleet,) = calls
    assert not any(key.endswith(("SingleAvailabilityZone", "MinTargetCapacity")) for key in fleet)
    azs = {fleet[k] for k in fleet if k.endswith(".SubnetId")}
    assert len(azs) == 3  # the overrides of every AZ in one call


def test_only_the_jobs_nodes_are_held_to_one_az_not_the_single_nodes_beside_them(
    aws: EmulatedAws, manifest: Manifest, tmp_path: Path
) -> None:
    job = _nodes("cpu-c7i-", 4)
    singles = _nodes("cpu-c7i-", 10, start=5)
    outcome: list[object] = []
    calls = _fleet_calls(
        aws,
        tmp_path / "requests.jsonl",
        lambda: outcome.append(resume_nodes(manifest, [*job, *singles], [job], ec2_for(aws), FakeSlurm(), rid("m"))),
    )
    minimums = sorted(c.get("OnDemandOptions.MinTargetCapacity", "-") for c in calls)
    assert minimums == ["-", "4"]  # the job all-or-nothing; the 10 others in any AZ, best effort
    assert len(live_instances(aws, manifest.cluster)) == 14
