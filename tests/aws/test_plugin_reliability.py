"""The power-save plugin under faults, against the emulated EC2: one test per defect of issue 14 that EC2 alone shows.

Retries by error class, nothing lost after a launch, instances identified by id, no double launch, claims that
survive PID reuse, scontrol retried chunk by chunk and parsed field by field. (The real-slurmctld halves live in
tests/e2e/test_plugin_reliability_e2e.py.)
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path

import pytest

from localcloud.aws.emulated_aws import EmulatedAws
from localcloud.aws.faults import CapacityFault, Faults
from slurm_plugin.manifest import Manifest
from slurm_plugin.powersave import state
from slurm_plugin.powersave.ec2 import Ec2, Instance
from slurm_plugin.powersave.launcher import resume_nodes
from slurm_plugin.powersave.slurm import Scontrol, SlurmError, SlurmNode, parse_show_nodes
from slurm_plugin.powersave.terminator import terminate_nodes
from tests.aws.plugin_env import FakeSlurm, ec2_for, live_instances, rid


def test_a_capacity_error_is_not_retried_the_launch_fails_over_at_once(aws: EmulatedAws, manifest: Manifest) -> None:
    # far-x: one type in us-east-1a, then us-west-2a; RunInstances answers a capacity error with HTTP 500
    aws.set_faults(Faults(capacity=(CapacityFault(region="us-east-1"),)))
    outcome = resume_nodes(manifest, ["far-x-1"], [], ec2_for(aws), FakeSlurm(), rid("rice-once"))
    assert {i.region for i in outcome.launched.values()} == {"us-west-2"}
    assert aws.call_counts()["ec2:RunInstances"] == 2  # one refused in us-east-1 (not 6), one launch in us-west-2


def test_throttling_is_still_retried_after_many_capacity_errors(aws: EmulatedAws, manifest: Manifest) -> None:
    ec2 = ec2_for(aws)  # one client: capacity errors must not have drained its retry quota
    aws.set_faults(Faults(capacity=(CapacityFault(instance_type="g5.xlarge"),)))
    for n in range(1, 9):
        resume_nodes(manifest, [f"gpu-g5-{n}"], [], ec2, FakeSlurm(), rid("rice"))
    state.write_json(Path(manifest.state_dir) / "capacity.json", {})  # forget the cool-down of those failures
    aws.set_faults(Faults(throttle_every=2))
    outcome = resume_nodes(manifest, [f"cpu-c7i-{n}" for n in range(1, 11)], [], ec2, FakeSlurm(), rid("rthr"))
    assert len(outcome.launched) == 10 and len(live_instances(aws, manifest.cluster)) == 10


def test_instances_whose_lookup_keeps_failing_are_terminated_not_leaked(aws: EmulatedAws, manifest: Manifest) -> None:
    # CreateFleet answers ids only; every DescribeInstances after it loses its answer: nobody can bind them
    aws.set_faults(Faults(lose_responses={"DescribeInstances": 1000}))
    slurm = FakeSlurm()
    nodes = [f"cpu-c7i-{n}" for n in range(1, 5)]
    outcome = resume_nodes(manifest, nodes, [], ec2_for(aws), slurm, rid("rdesc"))
    aws.clear_faults()
    assert outcome.launched == {} and live_instances(aws, manifest.cluster) == []
    assert len(outcome.terminated) == 4
    assert sorted(slurm.powered_down) == nodes and slurm.addresses == {}


def test_each_pool_is_bound_as_soon_as_it_is_launched(aws: EmulatedAws, manifest: Manifest) -> None:
    seen: list[tuple[list[str], int]] = []

    class Recording(FakeSlurm):
        def set_addresses(self, addresses: dict[str, str]) -> None:  # type: ignore[override]
            seen.append((sorted(addresses), aws.call_counts().get("ec2:RunInstances", 0)))
            super().set_addresses(addresses)

    resume_nodes(manifest, ["cpu-c7i-1", "cpu-c7i-2", "gpu-g5-1"], [], ec2_for(aws), Recording(), rid("rbind"))
    # cpu-c7i (CreateFleet) is bound before gpu-g5 (RunInstances) is even launched
    # the pools launch at once (launcher.in_threads); each is bound by itself, as its own launch answers
    assert sorted(sorted(a) for a, _ in seen) == [["cpu-c7i-1", "cpu-c7i-2"], ["gpu-g5-1"]]
    assert len(live_instances(aws, manifest.cluster)) == 3


def test_suspend_never_terminates_the_new_instance_that_got_a_stale_nodes_address(
    aws: EmulatedAws, manifest: Manifest
) -> None:
    slurm = FakeSlurm()
    first = resume_nodes(manifest, ["cpu-c7i-1"], [], ec2_for(aws), slurm, rid("ra"))
    old = first.launched["cpu-c7i-1"]
    aws.client("ec2", old.region).terminate_instances(InstanceIds=[old.instance_id])  # e.g. a spot interruption
    second = resume_nodes(manifest, ["cpu-c7i-2"], [], ec2_for(aws), slurm, rid("rb"))
    new = second.launched["cpu-c7i-2"]
    slurm.addresses["cpu-c7i-1"] = new.private_ip or ""  # EC2 gave node 1's old address to node 2's instance
    outcome = terminate_nodes(manifest, ["cpu-c7i-1"], ec2_for(aws), slurm, "suspend")
    assert outcome.terminated == {}
    assert [i["InstanceId"] for i in live_instances(aws, manifest.cluster)] == [new.instance_id]


def test_suspend_leaves_an_instance_launched_after_its_request_alone(aws: EmulatedAws, manifest: Manifest) -> None:
    slurm = FakeSlurm()
    launched = resume_nodes(manifest, ["cpu-c7i-3"], [], ec2_for(aws), slurm, rid("rc")).launched["cpu-c7i-3"]
    assert launched.launch_time is not None
    stale = launched.launch_time - 60  # the suspend request predates this resume (a slow suspend worker)
    outcome = terminate_nodes(manifest, ["cpu-c7i-3"], ec2_for(aws), slurm, "suspend", requested_at=stale)
    assert outcome.terminated == {} and len(live_instances(aws, manifest.cluster)) == 1


def test_suspend_tells_a_newer_instance_by_when_the_resume_bound_it(aws: EmulatedAws, manifest: Manifest) -> None:
    """The node map's bind time (this host's clock, to the ms) decides, not EC2's LaunchTime (whole seconds)."""
    slurm = FakeSlurm()
    launched = resume_nodes(manifest, ["cpu-c7i-7"], [], ec2_for(aws), slurm, rid("rf")).launched["cpu-c7i-7"]
    bound_at = float(state.node_map(manifest.state_dir)["cpu-c7i-7"]["bound_at"])
    before = bound_at - 0.05  # a slow suspend asked for before this resume
    outcome = terminate_nodes(manifest, ["cpu-c7i-7"], ec2_for(aws), slurm, "suspend", requested_at=before)
    assert outcome.terminated == {} and len(live_instances(aws, manifest.cluster)) == 1
    assert state.node_map(manifest.state_dir)["cpu-c7i-7"]["instance_id"] == launched.instance_id  # still its node's
    assert slurm.addresses == {"cpu-c7i-7": launched.private_ip}  # and its NodeAddr (the later resume's)
    after = bound_at + 0.05  # within the second of its LaunchTime, but after the bind
    outcome = terminate_nodes(manifest, ["cpu-c7i-7"], ec2_for(aws), slurm, "suspend", requested_at=after)
    assert outcome.terminated == {launched.instance_id: "cpu-c7i-7"} and live_instances(aws, manifest.cluster) == []
    assert "cpu-c7i-7" not in state.node_map(manifest.state_dir)


class _RebindingEc2:
    """The node is resumed again while this suspend describes: a later resume binds it anew to the same live
    instance (already_running), after the suspend's request."""

    def __init__(self, ec2: Ec2, state_dir: str, node: str) -> None:
        self.ec2, self.state_dir, self.node = ec2, state_dir, node

    def cluster_instances(self, region: str, cluster: str, keys: set[str]) -> list[Instance]:
        found = self.ec2.cluster_instances(region, cluster, keys)
        entry = state.node_map(self.state_dir)[self.node]
        state.remember_instances(self.state_dir, {self.node: {**entry, "bound_at": f"{time.time():.3f}"}})
        return found

    def terminate(self, region: str, ids: list[str]) -> None:
        self.ec2.terminate(region, ids)


def test_a_node_bound_again_while_its_suspend_runs_keeps_its_instance_address_and_map_entry(
    aws: EmulatedAws, manifest: Manifest
) -> None:
    slurm = FakeSlurm()
    launched = resume_nodes(manifest, ["cpu-c7i-8"], [], ec2_for(aws), slurm, rid("rg")).launched["cpu-c7i-8"]
    requested_at = time.time()  # after the first binding: this suspend is for it
    rebinding = _RebindingEc2(ec2_for(aws), manifest.state_dir, "cpu-c7i-8")
    outcome = terminate_nodes(manifest, ["cpu-c7i-8"], rebinding, slurm, "suspend", requested_at=requested_at)  # type: ignore[arg-type]
    assert outcome.terminated == {}
    assert [i["InstanceId"] for i in live_instances(aws, manifest.cluster)] == [launched.instance_id]
    assert state.node_map(manifest.state_dir)["cpu-c7i-8"]["instance_id"] == launched.instance_id
    assert slurm.addresses == {"cpu-c7i-8": launched.private_ip}  # the later resume's NodeAddr, not reset


def test_without_a_node_map_entry_suspend_reads_launch_time_as_whole_seconds(
    aws: EmulatedAws, manifest: Manifest
) -> None:
    """Matched by address alone, an instance whose LaunchTime is x s may have started at x.9 s, after a request
    made at x.5 s: left alone."""
    slurm = FakeSlurm()
    launched = resume_nodes(manifest, ["cpu-c7i-5"], [], ec2_for(aws), slurm, rid("rd")).launched["cpu-c7i-5"]
    state.forget_instances(manifest.state_dir, ["cpu-c7i-5"])  # a node the map does not know: matched by NodeAddr
    assert launched.launch_time is not None and launched.launch_time == int(launched.launch_time)
    address = slurm.addresses["cpu-c7i-5"]
    same_second = launched.launch_time + 0.5
    outcome = terminate_nodes(manifest, ["cpu-c7i-5"], ec2_for(aws), slurm, "suspend", requested_at=same_second)
    assert outcome.terminated == {} and len(live_instances(aws, manifest.cluster)) == 1
    slurm.addresses["cpu-c7i-5"] = address
    later = launched.launch_time + 1.5  # surely after the launch
    outcome = terminate_nodes(manifest, ["cpu-c7i-5"], ec2_for(aws), slurm, "suspend", requested_at=later)
    assert outcome.terminated == {launched.instance_id: "cpu-c7i-5"} and live_instances(aws, manifest.cluster) == []


class _RefusingSlurm(FakeSlurm):
    def reset_addresses(self, nodes: list[str]) -> None:  # type: ignore[override]
        raise SlurmError("scontrol update: Unable to contact slurm controller")


def test_a_suspend_slurm_did_not_hear_keeps_the_node_map_so_no_address_names_another_nodes_instance(
    aws: EmulatedAws, manifest: Manifest
) -> None:
    """The node keeps its stale NodeAddr; EC2 gives that address to another node's instance, launched but not yet
    bound (its resume is mid-flight); the next suspend of the first node matches by the node map and ends nothing."""
    slurm = FakeSlurm()
    old = resume_nodes(manifest, ["cpu-c7i-6"], [], ec2_for(aws), slurm, rid("re")).launched["cpu-c7i-6"]
    refusing = _RefusingSlurm(addresses=dict(slurm.addresses))
    outcome = terminate_nodes(manifest, ["cpu-c7i-6"], ec2_for(aws), refusing, "suspend")
    assert outcome.terminated == {old.instance_id: "cpu-c7i-6"} and "slurm" in outcome.errors
    assert state.node_map(manifest.state_dir)["cpu-c7i-6"]["instance_id"] == old.instance_id
    new = aws.client("ec2", "us-east-1").run_instances(
        ImageId="ami-12c6146b", MinCount=1, MaxCount=1, SubnetId=_subnet_of(aws, old.instance_id),
        TagSpecifications=[{"ResourceType": "instance", "Tags": _tags_of(aws, old.instance_id)}],
    )["Instances"][0]  # fmt: skip
    refusing.addresses["cpu-c7i-6"] = new["PrivateIpAddress"]  # EC2 gave the old address to the new instance
    outcome = terminate_nodes(manifest, ["cpu-c7i-6"], ec2_for(aws), refusing, "suspend")
    assert outcome.terminated == {}
    assert [i["InstanceId"] for i in live_instances(aws, manifest.cluster)] == [new["InstanceId"]]


def _described(aws: EmulatedAws, instance_id: str) -> dict[str, object]:
    answer = aws.client("ec2", "us-east-1").describe_instances(InstanceIds=[instance_id])
    instance: dict[str, object] = answer["Reservations"][0]["Instances"][0]
    return instance


def _subnet_of(aws: EmulatedAws, instance_id: str) -> str:
    return str(_described(aws, instance_id)["SubnetId"])


def _tags_of(aws: EmulatedAws, instance_id: str) -> list[dict[str, str]]:
    tags: list[dict[str, str]] = _described(aws, instance_id)["Tags"]  # type: ignore[assignment]
    return tags


def test_a_node_resumed_again_keeps_its_live_instance(aws: EmulatedAws, manifest: Manifest) -> None:
    first = resume_nodes(manifest, ["cpu-c7i-4"], [], ec2_for(aws), FakeSlurm(), rid("r1"))
    slurm = FakeSlurm()
    again = resume_nodes(manifest, ["cpu-c7i-4"], [], ec2_for(aws), slurm, rid("r2"))  # its worker starts later
    assert len(live_instances(aws, manifest.cluster)) == 1
    assert again.launched["cpu-c7i-4"].instance_id == first.launched["cpu-c7i-4"].instance_id
    assert slurm.addresses == {"cpu-c7i-4": first.launched["cpu-c7i-4"].private_ip}


@pytest.mark.parametrize("holder", ["reused-pid", "pid-0", "no-start-time"])
def test_a_claim_whose_process_is_gone_never_blocks_its_node(holder: str, aws: EmulatedAws, manifest: Manifest) -> None:
    claim = {
        "reused-pid": {"request": "old", "pid": os.getpid(), "started": "1"},  # this PID now runs another process
        "pid-0": {"request": "old", "pid": 0, "started": "1"},
        "no-start-time": {"request": "old", "pid": os.getpid()},
    }[holder]
    Path(manifest.state_dir).mkdir(parents=True, exist_ok=True)
    state.write_json(Path(manifest.state_dir) / state.CLAIMS_FILE, {"cpu-c7i-5": claim})
    outcome = resume_nodes(manifest, ["cpu-c7i-5"], [], ec2_for(aws), FakeSlurm(), rid("rclaim"))
    assert outcome.busy == [] and list(outcome.launched) == ["cpu-c7i-5"]
    assert [i["InstanceId"] for i in live_instances(aws, manifest.cluster)] == [
        outcome.launched["cpu-c7i-5"].instance_id
    ]


def test_a_claim_of_a_live_worker_still_holds(aws: EmulatedAws, manifest: Manifest) -> None:
    with subprocess.Popen(["sleep", "30"]) as worker:
        held = {"request": "other", "pid": worker.pid, "started": state.process_start(worker.pid)}
        Path(manifest.state_dir).mkdir(parents=True, exist_ok=True)
        state.write_json(Path(manifest.state_dir) / state.CLAIMS_FILE, {"cpu-c7i-6": held})
        outcome = resume_nodes(manifest, ["cpu-c7i-6"], [], ec2_for(aws), FakeSlurm(), rid("rheld"))
        worker.kill()
    assert outcome.busy == ["cpu-c7i-6"] and live_instances(aws, manifest.cluster) == []


def _flaky_scontrol(tmp_path: Path, fail: str) -> tuple[Scontrol, Path]:
    """A recording scontrol that fails every call whose arguments contain `fail`, the first time only (or always,
    when `fail` starts with `always:`)."""
    calls = tmp_path / "calls"
    seen = tmp_path / "seen"
    always = fail.startswith("always:")
    pattern = fail.removeprefix("always:")
    script = tmp_path / "scontrol"
    script.write_text(
        "#!/bin/sh\n"
        f'echo "$*" >> {calls}\n'
        f'case "$*" in *{pattern}*)\n'
        f'  if {"true" if always else f"[ ! -e {seen} ]"}; then touch {seen}; echo "slurm_update error: busy" >&2;'
        " exit 1; fi;;\nesac\nexit 0\n",
        encoding="utf-8",
    )
    script.chmod(0o755)
    return Scontrol(str(tmp_path), pause=0.01), calls


def test_a_failed_scontrol_update_is_retried(tmp_path: Path) -> None:
    scontrol, calls = _flaky_scontrol(tmp_path, "n-600")
    scontrol.set_addresses({f"n-{i}": f"127.16.{i // 250}.{i % 250}" for i in range(1, 1201)})
    lines = calls.read_text().splitlines()
    assert len(lines) == 4  # three chunks of 500, the second tried twice
    assert sum("n-600" in line for line in lines) == 2


def test_a_chunk_that_keeps_failing_does_not_drop_the_other_chunks(tmp_path: Path) -> None:
    scontrol, calls = _flaky_scontrol(tmp_path, "always:n-600")
    with pytest.raises(SlurmError, match=r"500 nodes not updated \(n-\[501-1000\]\)"):
        scontrol.power_down([f"n-{i}" for i in range(1, 1201)], "(Code:Test) x")
    lines = calls.read_text().splitlines()
    assert any("n-1," in line for line in lines) and any("n-1200" in line for line in lines)


def test_a_reason_text_cannot_pose_as_the_nodes_address() -> None:
    line = (
        "NodeName=cpu-1 Arch=x86_64 NodeAddr=127.16.0.5 NodeHostName=cpu-1 State=IDLE+CLOUD Partitions=cpu "
        "Reason=was NodeAddr=127.16.9.9 State=DOWN [root@2026-11-24T10:00:00] Comment=NodeName=evil"
    )
    node = parse_show_nodes(line)["cpu-1"]
    assert (node.addr, node.state) == ("127.16.0.5", "IDLE+CLOUD")
    assert list(parse_show_nodes(line)) == ["cpu-1"]


def test_the_node_map_is_written_before_slurm_learns_the_address(aws: EmulatedAws, manifest: Manifest) -> None:
    recorded: list[dict[str, object]] = []

    class Failing(FakeSlurm):
        def set_addresses(self, addresses: dict[str, str]) -> None:  # type: ignore[override]
            recorded.append(json.loads((Path(manifest.state_dir) / state.NODES_FILE).read_text()))
            raise SlurmError("scontrol update: exit 1: slurmctld restarting")

    outcome = resume_nodes(manifest, ["cpu-c7i-7"], [], ec2_for(aws), Failing(), rid("rmap"))
    assert list(recorded[0]) == ["cpu-c7i-7"]
    # whatever happens next, suspend/resume-fail find the instance by id
    terminate_nodes(manifest, ["cpu-c7i-7"], ec2_for(aws), FakeSlurm(), "resume-fail", "(Code:ResumeFailed) t")
    assert live_instances(aws, manifest.cluster) == [] and "cpu-c7i-7" in outcome.launched


def test_a_pool_without_capacity_anywhere_is_down_for_its_cool_down(aws: EmulatedAws, manifest: Manifest) -> None:
    aws.set_faults(Faults(capacity=(CapacityFault(instance_type="g5.xlarge"),)))  # gpu-g5: one type, one AZ
    slurm = FakeSlurm(known=("gpu-g5-3", "gpu-g5-4", "cpu-c7i-9"))
    resume_nodes(manifest, ["gpu-g5-1"], [], ec2_for(aws), slurm, rid("rdown"))
    assert list(slurm.powered_down) == ["gpu-g5-1"]  # its job is requeued at once
    assert sorted(slurm.down) == ["gpu-g5-1", "gpu-g5-3", "gpu-g5-4"]  # the scheduler skips the whole pool
    reason, after = slurm.down["gpu-g5-1"]
    assert reason.startswith("(Code:InsufficientInstanceCapacity) no capacity in any location of pool gpu-g5")
    assert manifest.capacity_cooldown_seconds - 5 <= after <= manifest.capacity_cooldown_seconds


def test_a_pool_with_capacity_left_elsewhere_is_not_set_down(aws: EmulatedAws, manifest: Manifest) -> None:
    aws.set_faults(Faults(capacity=(CapacityFault(availability_zone="us-east-1a"),)))
    slurm = FakeSlurm(known=("cpu-c7i-9",))
    outcome = resume_nodes(manifest, ["cpu-c7i-1"], [], ec2_for(aws), slurm, rid("rpart"))
    assert list(outcome.launched) == ["cpu-c7i-1"] and slurm.down == {}


def _resume_failed(aws: EmulatedAws, manifest: Manifest, slurm: FakeSlurm, nodes: list[str]) -> list[str]:
    """What the resume-fail worker does: terminate and power down, then count the failed boots."""
    from slurm_plugin.powersave.unusable_pools import count_failed_boots

    terminate_nodes(manifest, nodes, ec2_for(aws), slurm, "resume-fail", "(Code:ResumeFailed) test")
    return count_failed_boots(manifest, slurm, nodes, "resume-fail", 0.0)


def test_a_pool_whose_boots_keep_failing_stops_launching_until_cleared_or_changed(
    aws: EmulatedAws, manifest: Manifest
) -> None:
    from slurm_plugin.powersave import protection

    limited = manifest.model_copy(update={"boot_failure_limit": 3})
    slurm = FakeSlurm(known=("gpu-g5-5",))
    assert _resume_failed(aws, limited, slurm, ["gpu-g5-1", "gpu-g5-2"]) == []
    assert _resume_failed(aws, limited, slurm, ["gpu-g5-3"]) == ["gpu-g5"]
    assert sorted(slurm.down) == ["gpu-g5-1", "gpu-g5-2", "gpu-g5-3", "gpu-g5-5"]  # every idle~ node of the pool
    assert slurm.down["gpu-g5-5"] == (protection.reason("gpu-g5", 3), 0)  # no ResumeAfter: an admin's call
    outcome = resume_nodes(limited, ["gpu-g5-6"], [], ec2_for(aws), slurm, rid("rprot"))
    assert outcome.launched == {} and live_instances(aws, limited.cluster) == []
    assert slurm.powered_down["gpu-g5-6"].startswith("(Code:ProtectedMode)")
    # a config change (here: another instance type) is a fresh start ...
    changed = limited.model_copy(
        update={
            "pools": [
                p.model_copy(update={"instance_types": ["g6.xlarge"]}) if p.key == "gpu-g5" else p
                for p in limited.pools
            ]
        }
    )
    assert list(resume_nodes(changed, ["gpu-g5-7"], [], ec2_for(aws), FakeSlurm(), rid("rnew")).launched) == [
        "gpu-g5-7"
    ]
    # ... and so is the admin's --clear
    _resume_failed(aws, limited, slurm, ["gpu-g5-1", "gpu-g5-2", "gpu-g5-3"])
    assert protection.clear(limited.state_dir, "gpu-g5")
    assert list(resume_nodes(limited, ["gpu-g5-8"], [], ec2_for(aws), FakeSlurm(), rid("rclr")).launched) == [
        "gpu-g5-8"
    ]


def test_a_pool_entering_protected_mode_sets_down_its_nodes_still_powering_down_too(
    aws: EmulatedAws, manifest: Manifest
) -> None:
    """A node an earlier failed boot powered down is POWERING_DOWN for SuspendTimeout when the next failure protects
    the pool: it is set DOWN too (its power-down started, so idle_on_node_suspend cannot erase the DOWN), else it
    turns idle~ when that ends and the scheduler hands it a job the resume then refuses (seen under load: the job
    requeued a second time); one whose power-down is still queued — idle, or DOWN at ResumeTimeout with our reason
    and its failed boot's power-down repeated — is set DOWN once it started. A node drained or set DOWN by an admin,
    or running a job, is left alone."""
    limited = manifest.model_copy(update={"boot_failure_limit": 2})
    _resume_failed(aws, limited, FakeSlurm(), ["gpu-g5-1"])

    class Starting(FakeSlurm):
        """slurmctld starts the queued power-down of gpu-g5-3 once the protected pool's first nodes are DOWN."""

        def show_nodes(self, nodes: Sequence[str] | None) -> dict[str, SlurmNode]:
            if self.down:
                self.states["gpu-g5-3"] = "IDLE+CLOUD+POWERING_DOWN"
                self.states["gpu-g5-6"] = "IDLE+CLOUD+POWERING_DOWN"  # idle_on_node_suspend: DOWN erased at the start
            return super().show_nodes(nodes)

    slurm = Starting(
        states={
            "gpu-g5-1": "IDLE+CLOUD+POWERING_DOWN",  # the first failure's power-down, still going
            "gpu-g5-3": "IDLE+CLOUD+POWER_DOWN",  # a power-down queued (DOWN only once it started)
            "gpu-g5-4": "IDLE+DRAIN+CLOUD+POWERING_DOWN",  # an admin's drain
            "gpu-g5-5": "MIXED+CLOUD",  # running a job
            # DOWN at ResumeTimeout, its failed boot's power-down repeated and queued (seen on 26.05 under load)
            "gpu-g5-6": "DOWN+CLOUD+POWERED_DOWN+POWER_DOWN",
            "gpu-g5-7": "DOWN+CLOUD+POWERED_DOWN",  # an admin's DOWN
        },
        reasons={"gpu-g5-6": "(Code:ResumeFailed) Failure when resuming nodes [request r1]", "gpu-g5-7": "disk swap"},
    )
    assert _resume_failed(aws, limited, slurm, ["gpu-g5-2"]) == ["gpu-g5"]
    assert sorted(slurm.down) == ["gpu-g5-1", "gpu-g5-2", "gpu-g5-3", "gpu-g5-6"]


def test_a_boot_that_works_resets_the_count_of_failed_boots(aws: EmulatedAws, manifest: Manifest) -> None:
    from slurm_plugin.powersave import protection

    limited = manifest.model_copy(update={"boot_failure_limit": 3})
    _resume_failed(aws, limited, FakeSlurm(), ["gpu-g5-1", "gpu-g5-2"])
    booted = FakeSlurm(addresses={"gpu-g5-4": "127.16.0.9"})  # gpu-g5-4 is up and responding
    resume_nodes(limited, ["gpu-g5-6"], [], ec2_for(aws), booted, rid("rok"))
    pool = next(p for p in limited.pools if p.key == "gpu-g5")
    assert protection.failures_of(limited.state_dir, pool) == 0
    assert _resume_failed(aws, limited, FakeSlurm(), ["gpu-g5-6"]) == []
