"""reconcile(): every row of the state → action table, including the races with resume and suspend."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from slurm_plugin.manager.model import Action, Instance, Kind, Node, ScheduledEvent, Settings
from slurm_plugin.manager.observe import parse_state
from slurm_plugin.manager.reconcile import reconcile
from slurm_plugin.manifest import Location, PoolManifest

NOW = datetime(2026, 11, 22, 3, 0, tzinfo=UTC)
POOL = PoolManifest(
    partition="cpu",
    pool="c7i",
    node_prefix="cpu-c7i-",
    min_nodes=2,
    max_nodes=10,
    instance_types=["c7i.large"],
    purchase_option="on_demand",
    locations=[Location(region="us-east-1", availability_zone="us-east-1a", subnet_id="s-1", launch_template_id="l")],
)
SETTINGS = Settings(cluster="alpha", pools=(POOL,))


def node(name: str, state: str, addr: str | None = None, reason: str = "", age: int | None = None) -> Node:
    base, flags = parse_state(state)
    when = NOW - timedelta(seconds=age) if age is not None else None
    return Node(name, base, flags, addr, reason, when)


def inst(
    ip: str | None,
    state: str = "running",
    age: int = 3600,
    iid: str = "i-1",
    cluster: str = "alpha",
    pool: str = "cpu-c7i",
    **extra: object,
) -> Instance:
    return Instance(iid, "us-east-1", state, ip, NOW - timedelta(seconds=age), cluster, pool, **extra)  # type: ignore[arg-type]


def kinds(actions: list[Action]) -> list[tuple[Kind, str]]:
    return [(a.kind, a.target) for a in actions]


def test_nodes_and_instances_in_agreement_need_nothing() -> None:
    nodes = [node("cpu-c7i-1", "IDLE+CLOUD", "127.1.0.1"), node("cpu-c7i-2", "ALLOCATED+CLOUD", "127.1.0.2")]
    instances = [inst("127.1.0.1", iid="i-1"), inst("127.1.0.2", iid="i-2")]
    assert reconcile(nodes, instances, NOW, SETTINGS) == []


# ---------------------------------------------------------------- orphans
def test_unclaimed_instance_older_than_grace_is_terminated_as_orphan() -> None:
    actions = reconcile([node("cpu-c7i-5", "IDLE+CLOUD+POWERED_DOWN")], [inst("127.1.0.9", age=301)], NOW, SETTINGS)
    assert kinds(actions) == [(Kind.TERMINATE, "i-1")]
    assert actions[0].counter == "orphans_terminated" and actions[0].region == "us-east-1"


def test_instance_launched_but_nodeaddr_not_yet_set_is_in_grace_not_orphan() -> None:
    nodes = [node("cpu-c7i-5", "IDLE+CLOUD+POWERING_UP")]
    assert reconcile(nodes, [inst("127.1.0.9", state="pending", age=20)], NOW, SETTINGS) == []


def test_instance_without_ip_yet_is_in_grace() -> None:
    assert reconcile([], [inst(None, state="pending", age=5)], NOW, SETTINGS) == []


def test_instance_of_powered_down_node_that_kept_its_addr_is_orphan() -> None:
    # Slurm keeps NodeAddr after a power-down: a powered-down node does not claim the instance.
    nodes = [node("cpu-c7i-5", "IDLE+CLOUD+POWERED_DOWN", "127.1.0.9")]
    assert kinds(reconcile(nodes, [inst("127.1.0.9")], NOW, SETTINGS)) == [(Kind.TERMINATE, "i-1")]


def test_stopped_unclaimed_instance_is_orphan_too() -> None:
    assert kinds(reconcile([], [inst("127.1.0.9", state="stopped")], NOW, SETTINGS)) == [(Kind.TERMINATE, "i-1")]


def test_shutting_down_unclaimed_instance_needs_nothing() -> None:
    assert reconcile([], [inst("127.1.0.9", state="shutting-down")], NOW, SETTINGS) == []


def test_instance_claimed_by_a_node_unknown_to_the_manifest_is_not_an_orphan() -> None:
    nodes = [node("login-1", "IDLE", "127.1.0.9")]
    actions = reconcile(nodes, [inst("127.1.0.9")], NOW, SETTINGS)
    assert kinds(actions) == [(Kind.IGNORE, "login-1")]


# ---------------------------------------------------------------- lost instances
@pytest.mark.parametrize("state", ["IDLE+CLOUD", "ALLOCATED+CLOUD", "MIXED+CLOUD", "IDLE+CLOUD+DRAIN"])
def test_powered_up_node_whose_instance_is_gone_is_powered_down_with_reason(state: str) -> None:
    actions = reconcile([node("cpu-c7i-3", state, "127.1.0.3")], [], NOW, SETTINGS)
    assert kinds(actions) == [(Kind.POWER_DOWN, "cpu-c7i-3")]
    assert actions[0].reason.startswith("(Manager:InstanceGone)") and actions[0].counter == "instances_lost"


@pytest.mark.parametrize("gone", ["terminated", "shutting-down", "stopped", "stopping"])
def test_powered_up_node_whose_instance_is_terminating_is_powered_down(gone: str) -> None:
    actions = reconcile([node("cpu-c7i-3", "ALLOCATED+CLOUD", "127.1.0.3")], [inst("127.1.0.3", gone)], NOW, SETTINGS)
    assert kinds(actions) == [(Kind.POWER_DOWN, "cpu-c7i-3")]


def test_node_powering_down_while_its_instance_is_still_shutting_down_needs_nothing() -> None:
    nodes = [node("cpu-c7i-3", "IDLE+CLOUD+POWERING_DOWN", "127.1.0.3")]
    assert reconcile(nodes, [inst("127.1.0.3", "shutting-down")], NOW, SETTINGS) == []
    assert reconcile(nodes, [inst("127.1.0.3", "running")], NOW, SETTINGS) == []


def test_live_instance_wins_over_a_dead_one_with_the_same_address() -> None:
    instances = [inst("127.1.0.3", "terminated", iid="i-old"), inst("127.1.0.3", "running", iid="i-new")]
    assert reconcile([node("cpu-c7i-3", "IDLE+CLOUD", "127.1.0.3")], instances, NOW, SETTINGS) == []


def test_down_not_responding_node_with_a_live_instance_is_powered_down_for_replacement() -> None:
    nodes = [node("cpu-c7i-3", "DOWN+CLOUD+NOT_RESPONDING", "127.1.0.3", "Not responding", age=60)]
    actions = reconcile(nodes, [inst("127.1.0.3")], NOW, SETTINGS)
    assert kinds(actions) == [(Kind.POWER_DOWN, "cpu-c7i-3")]
    assert actions[0].reason.startswith("(Manager:NotResponding)")


def test_down_node_set_by_an_administrator_is_left_alone() -> None:
    nodes = [node("cpu-c7i-3", "DOWN+CLOUD", "127.1.0.3", "disk replacement", age=60)]
    assert reconcile(nodes, [inst("127.1.0.3")], NOW, SETTINGS) == []


# ---------------------------------------------------------------- failed boots
def test_node_powering_up_past_resume_timeout_gets_instance_terminated_and_node_reset() -> None:
    nodes = [node("cpu-c7i-4", "ALLOCATED+CLOUD+NOT_RESPONDING+POWERING_UP", "127.1.0.4")]
    actions = reconcile(nodes, [inst("127.1.0.4", age=601, iid="i-4")], NOW, SETTINGS)
    assert kinds(actions) == [(Kind.TERMINATE, "i-4"), (Kind.POWER_DOWN, "cpu-c7i-4")]
    assert actions[1].reason.startswith("(Manager:ResumeTimeout)")


def test_node_powering_up_within_resume_timeout_is_left_booting() -> None:
    nodes = [node("cpu-c7i-4", "ALLOCATED+CLOUD+POWERING_UP", "127.1.0.4")]
    assert reconcile(nodes, [inst("127.1.0.4", age=599)], NOW, SETTINGS) == []


def test_each_pool_gets_its_own_resume_timeout_from_the_manifest() -> None:
    gpu = POOL.model_copy(update={"pool": "g5", "node_prefix": "gpu-g5-", "resume_timeout": 1200})
    settings = Settings(cluster="alpha", pools=(POOL, gpu))
    nodes = [node("gpu-g5-1", "ALLOCATED+CLOUD+POWERING_UP", "127.1.0.7")]
    booting = [inst("127.1.0.7", age=900, iid="i-7", pool="gpu-g5")]
    assert reconcile(nodes, booting, NOW, settings) == []  # past 600 s, well within the pool's 1200 s
    late = [inst("127.1.0.7", age=1201, iid="i-7", pool="gpu-g5")]
    assert kinds(reconcile(nodes, late, NOW, settings)) == [(Kind.TERMINATE, "i-7"), (Kind.POWER_DOWN, "gpu-g5-1")]


def test_the_manager_takes_resume_timeouts_from_the_manifest_unless_overridden() -> None:
    from slurm_plugin.manager.daemon import build_parser, settings_of
    from slurm_plugin.manifest import Manifest

    manifest = Manifest(
        cluster="alpha", home_region="us-east-1", instance_cache_path="/x", state_dir="/x", log_file="/x", pools=[POOL]
    )
    assert settings_of(manifest, build_parser().parse_args(["--manifest", "m"])).resume_timeout is None
    forced = settings_of(manifest, build_parser().parse_args(["--manifest", "m", "--resume-timeout", "60"]))
    assert forced.resume_timeout == timedelta(seconds=60)


def test_the_manager_takes_the_impaired_threshold_from_the_config_through_the_manifest() -> None:
    from cluster_config import parse
    from slurm_plugin.manager.daemon import build_parser, settings_of
    from slurm_plugin.render.manifest import build_manifest, placeholder_infra

    pool = {"name": "c7i", "instance_types": ["c7i.large"], "max_nodes": 2}
    cluster = {
        "name": "alpha",
        "region": "us-east-1",
        "network": {"mode": "create", "availability_zones": ["us-east-1a"]},
        "storage": {"efs": {}},
        "health_checks": {"impaired_threshold": 120},
        "partitions": [{"name": "cpu", "pools": [pool]}],
    }
    alpha = parse({"clusters": [cluster]}, "alpha.yaml").cluster("alpha")
    manifest = build_manifest(
        alpha,
        placeholder_infra(alpha),
        instance_cache_path="/x",
        state_dir="/x",
        log_file="/x",
        slurm_bin_dir="/usr/bin",
        slurm_conf=None,
        tags={},
    )
    assert settings_of(manifest, build_parser().parse_args(["--manifest", "m"])).impaired_threshold == timedelta(
        seconds=120
    )
    forced = settings_of(manifest, build_parser().parse_args(["--manifest", "m", "--impaired-threshold", "60"]))
    assert forced.impaired_threshold == timedelta(seconds=60)


def test_node_powering_up_whose_instance_died_is_powered_down_at_once() -> None:
    nodes = [node("cpu-c7i-4", "IDLE+CLOUD+POWERING_UP", "127.1.0.4")]
    actions = reconcile(nodes, [inst("127.1.0.4", "terminated", age=30)], NOW, SETTINGS)
    assert kinds(actions) == [(Kind.POWER_DOWN, "cpu-c7i-4")]


def test_node_powering_up_without_any_instance_yet_is_a_resume_in_flight() -> None:
    assert reconcile([node("cpu-c7i-4", "MIXED+CLOUD+POWERING_UP")], [], NOW, SETTINGS) == []
    assert reconcile([node("cpu-c7i-4", "IDLE+CLOUD+POWER_UP", "127.1.0.4")], [], NOW, SETTINGS) == []


def test_node_down_after_slurm_resume_timeout_goes_back_to_idle_powered_down() -> None:
    nodes = [node("cpu-c7i-4", "DOWN+CLOUD+POWERED_DOWN+NOT_RESPONDING", "127.1.0.4", "ResumeTimeout reached", 5)]
    assert kinds(reconcile(nodes, [], NOW, SETTINGS)) == [(Kind.RESUME, "cpu-c7i-4")]


# ---------------------------------------------------------------- capacity cool-down
def test_node_down_for_capacity_returns_to_service_when_cooldown_expired() -> None:
    reason = "(Code:InsufficientInstanceCapacity) Failure when resuming nodes [request r-1]"
    nodes = [node("cpu-c7i-5", "DOWN+CLOUD+POWERED_DOWN", reason=reason, age=601)]
    actions = reconcile(nodes, [], NOW, SETTINGS)
    assert kinds(actions) == [(Kind.RESUME, "cpu-c7i-5")] and actions[0].counter == "capacity_recovered"


def test_node_down_for_capacity_stays_down_during_cooldown() -> None:
    nodes = [node("cpu-c7i-5", "DOWN+CLOUD+POWERED_DOWN", reason="(Code:InsufficientInstanceCapacity) x", age=30)]
    assert reconcile(nodes, [], NOW, SETTINGS) == []


def test_node_of_a_protected_pool_stays_down_past_the_cooldown() -> None:
    """A protected pool launches nothing: resuming its node after the cool-down would only have the resume set it
    DOWN again and requeue the job that was given it, every cool-down, until an admin clears the pool."""
    reason = "(Code:ProtectedMode) pool cpu-c7i: 3 consecutive failed boots, no more launches; fix ..."
    nodes = [node("cpu-c7i-5", "DOWN+CLOUD+POWERED_DOWN", reason=reason, age=3600)]
    settings = replace(SETTINGS, protected_pools=frozenset({POOL.key}))
    assert reconcile(nodes, [], NOW, settings) == []


def test_node_of_a_pool_that_left_protected_mode_returns_to_service() -> None:
    """The pool was cleared or re-rendered with another definition (a new image): its nodes go back to idle~."""
    reason = "(Code:ProtectedMode) pool cpu-c7i: 3 consecutive failed boots, no more launches; fix ..."
    nodes = [node("cpu-c7i-5", "DOWN+CLOUD+POWERED_DOWN", reason=reason, age=30)]
    assert kinds(reconcile(nodes, [], NOW, SETTINGS)) == [(Kind.RESUME, "cpu-c7i-5")]


def test_node_down_for_capacity_while_powered_up_is_powered_down_keeping_the_reason() -> None:
    reason = "(Code:InsufficientInstanceCapacity) x"
    nodes = [node("cpu-c7i-5", "DOWN+CLOUD", "127.1.0.5", reason=reason, age=30)]
    actions = reconcile(nodes, [inst("127.1.0.5")], NOW, SETTINGS)
    assert kinds(actions) == [(Kind.POWER_DOWN, "cpu-c7i-5")] and actions[0].reason == reason


# ---------------------------------------------------------------- always-on
def test_powered_down_always_on_node_is_powered_up() -> None:
    actions = reconcile([node("cpu-c7i-2", "IDLE+CLOUD+POWERED_DOWN")], [], NOW, SETTINGS)
    assert kinds(actions) == [(Kind.POWER_UP, "cpu-c7i-2")] and actions[0].counter == "always_on_started"


def test_powered_down_elastic_node_stays_down() -> None:
    assert reconcile([node("cpu-c7i-3", "IDLE+CLOUD+POWERED_DOWN")], [], NOW, SETTINGS) == []


def test_powered_down_node_left_not_responding_by_a_resume_gets_its_power_down_repeated() -> None:
    """Slurm's RESUME of a DOWN~ node (its ResumeAfter after a capacity cool-down) leaves NOT_RESPONDING, which
    nothing clears while the node is powered down; after a slurmctld restart the node is never available (seen:
    a job pinned to it pending ReqNodeNotAvail for the rest of a busy run). A repeated power-down clears it."""
    actions = reconcile([node("cpu-c7i-3", "IDLE+CLOUD+NOT_RESPONDING+POWERED_DOWN")], [], NOW, SETTINGS)
    assert kinds(actions) == [(Kind.REFRESH, "cpu-c7i-3")]
    assert actions[0].counter == "stale_not_responding_cleared"


@pytest.mark.parametrize(
    "state",
    [
        "IDLE+CLOUD+NOT_RESPONDING+POWERING_DOWN",  # the repeated power-down under way: once is enough
        "IDLE+CLOUD+NOT_RESPONDING+POWERING_UP",  # booting: its registration clears the flag
        "IDLE+CLOUD+NOT_RESPONDING+POWERED_DOWN+POWER_DOWN",  # a power-down already queued
        "ALLOCATED+CLOUD+NOT_RESPONDING+POWERED_DOWN",  # allocated, about to power up: a POWER_DOWN would queue
        "IDLE+CLOUD+FAIL+NOT_RESPONDING+POWERED_DOWN",  # an admin's FAIL, which a power-down would clear
        "IDLE+CLOUD+NOT_RESPONDING+POWERED_DOWN+REBOOT_REQUESTED",  # a pending reboot, which it would cancel
        "IDLE+CLOUD+COMPLETING+NOT_RESPONDING+POWERED_DOWN",
    ],
)
def test_a_not_responding_node_that_is_busy_changing_or_kept_by_an_admin_is_left_alone(state: str) -> None:
    assert [a for a in reconcile([node("cpu-c7i-3", state)], [], NOW, SETTINGS) if a.kind is Kind.REFRESH] == []


def test_an_always_on_node_left_not_responding_is_powered_up_not_powered_down_again() -> None:
    actions = reconcile([node("cpu-c7i-2", "IDLE+CLOUD+NOT_RESPONDING+POWERED_DOWN")], [], NOW, SETTINGS)
    assert kinds(actions) == [(Kind.POWER_UP, "cpu-c7i-2")]  # its boot and registration clear the flag


def test_always_on_node_whose_instance_was_terminated_is_replaced_over_two_cycles() -> None:
    first = reconcile([node("cpu-c7i-1", "IDLE+CLOUD", "127.1.0.1")], [], NOW, SETTINGS)
    assert kinds(first) == [(Kind.POWER_DOWN, "cpu-c7i-1")]
    # Slurm then shows it powered down (the reason stays): the next cycle powers it up again.
    second = reconcile([node("cpu-c7i-1", "IDLE+CLOUD+POWERED_DOWN", reason=first[0].reason, age=1)], [], NOW, SETTINGS)
    assert kinds(second) == [(Kind.POWER_UP, "cpu-c7i-1")]


def test_always_on_node_down_by_an_administrator_is_not_powered_up() -> None:
    nodes = [node("cpu-c7i-1", "DOWN+CLOUD+POWERED_DOWN", reason="maintenance", age=10)]
    assert reconcile(nodes, [], NOW, SETTINGS) == []


# ---------------------------------------------------------------- EC2 health and node health checks
def test_instance_impaired_longer_than_threshold_drains_its_node() -> None:
    impaired = inst("127.1.0.6", impaired_since=NOW - timedelta(seconds=301))
    actions = reconcile([node("cpu-c7i-6", "ALLOCATED+CLOUD", "127.1.0.6")], [impaired], NOW, SETTINGS)
    assert kinds(actions) == [(Kind.DRAIN, "cpu-c7i-6")] and actions[0].reason.startswith("(EC2:Impaired)")


def test_instance_impaired_briefly_is_tolerated() -> None:
    impaired = inst("127.1.0.6", impaired_since=NOW - timedelta(seconds=60))
    assert reconcile([node("cpu-c7i-6", "ALLOCATED+CLOUD", "127.1.0.6")], [impaired], NOW, SETTINGS) == []


def test_scheduled_retirement_drains_the_node() -> None:
    retiring = inst("127.1.0.6", events=(ScheduledEvent("instance-retirement", "The instance is scheduled"),))
    actions = reconcile([node("cpu-c7i-6", "MIXED+CLOUD", "127.1.0.6")], [retiring], NOW, SETTINGS)
    assert kinds(actions) == [(Kind.DRAIN, "cpu-c7i-6")] and "instance-retirement" in actions[0].reason


def test_completed_scheduled_event_is_ignored() -> None:
    done = inst("127.1.0.6", events=(ScheduledEvent("system-reboot", "[Completed] The instance is scheduled"),))
    assert reconcile([node("cpu-c7i-6", "MIXED+CLOUD", "127.1.0.6")], [done], NOW, SETTINGS) == []


def test_node_drained_by_health_check_and_idle_is_powered_down_for_replacement() -> None:
    nodes = [node("cpu-c7i-7", "IDLE+CLOUD+DRAIN", "127.1.0.7", "(Health:gpu) 7 of 8 GPUs visible", 10)]
    actions = reconcile(nodes, [inst("127.1.0.7")], NOW, SETTINGS)
    assert kinds(actions) == [(Kind.POWER_DOWN, "cpu-c7i-7")]
    assert actions[0].counter == "health_check_failures" and actions[0].reason.startswith("(Health:gpu)")


def test_node_draining_by_health_check_with_a_job_lets_it_finish() -> None:
    nodes = [node("cpu-c7i-7", "ALLOCATED+CLOUD+DRAIN", "127.1.0.7", "(Health:gpu) ECC errors", 10)]
    assert reconcile(nodes, [inst("127.1.0.7")], NOW, SETTINGS) == []


def test_node_draining_with_a_job_is_powered_down_at_once_in_requeue_mode() -> None:
    nodes = [node("cpu-c7i-7", "ALLOCATED+CLOUD+DRAIN", "127.1.0.7", "(EC2:Impaired) x", 10)]
    requeue = Settings(cluster="alpha", pools=(POOL,), drain_mode="requeue")
    assert kinds(reconcile(nodes, [inst("127.1.0.7")], NOW, requeue)) == [(Kind.POWER_DOWN, "cpu-c7i-7")]


def test_node_drained_by_an_administrator_is_left_alone() -> None:
    nodes = [node("cpu-c7i-7", "IDLE+CLOUD+DRAIN", "127.1.0.7", "firmware update", 10)]
    assert reconcile(nodes, [inst("127.1.0.7")], NOW, SETTINGS) == []


@pytest.mark.parametrize(
    "reason",
    ["Prolog error [slurm@2026-11-29T00:36:00]", "Prolog/Epilog failure", "Duplicate jobid", "Kill task failed"],
)
def test_node_slurm_drained_for_a_job_failure_is_replaced_once_idle_and_comes_back(reason: str) -> None:
    """Slurm drains a node whose prolog failed or whose slurmd already ran the job it was sent (a launch repeated
    after a controller takeover): once its jobs are gone the instance is replaced, then the node is back in service."""
    busy = [node("cpu-c7i-7", "MIXED+CLOUD+DRAIN", "127.1.0.7", reason, 10)]
    assert reconcile(busy, [inst("127.1.0.7")], NOW, SETTINGS) == []  # the job it still runs finishes first
    idle = [node("cpu-c7i-7", "IDLE+CLOUD+DRAIN", "127.1.0.7", reason, 10)]
    actions = reconcile(idle, [inst("127.1.0.7")], NOW, SETTINGS)
    assert kinds(actions) == [(Kind.POWER_DOWN, "cpu-c7i-7")]
    assert actions[0].reason == reason and actions[0].counter == "nodes_replaced"  # Slurm's reason kept
    down = [node("cpu-c7i-7", "IDLE+CLOUD+DRAIN+POWERED_DOWN", "127.1.0.7", reason, 10)]
    assert kinds(reconcile(down, [], NOW, SETTINGS)) == [(Kind.RESUME, "cpu-c7i-7")]


def test_powered_down_node_still_drained_by_the_manager_is_resumed() -> None:
    nodes = [node("cpu-c7i-7", "IDLE+CLOUD+DRAIN+POWERED_DOWN", "127.1.0.7", "(EC2:Scheduled) retirement", 10)]
    assert kinds(reconcile(nodes, [], NOW, SETTINGS)) == [(Kind.RESUME, "cpu-c7i-7")]


# ---------------------------------------------------------------- never touched
def test_unknown_node_names_are_never_touched_only_logged() -> None:
    nodes = [node("gpu-h100-1", "DOWN+CLOUD", "127.9.0.1", "Not responding"), node("cpu-c7i-11", "IDLE+CLOUD")]
    actions = reconcile(nodes, [], NOW, SETTINGS)
    assert [a.kind for a in actions] == [Kind.IGNORE]
    assert "gpu-h100-1" in actions[0].target and "cpu-c7i-11" in actions[0].target


def test_instance_of_another_cluster_is_never_touched_only_logged() -> None:
    actions = reconcile([], [inst("127.1.0.9", cluster="beta", iid="i-b")], NOW, SETTINGS)
    assert kinds(actions) == [(Kind.IGNORE, "i-b")]


def test_instance_of_another_cluster_does_not_satisfy_a_node() -> None:
    actions = reconcile(
        [node("cpu-c7i-3", "IDLE+CLOUD", "127.1.0.3")], [inst("127.1.0.3", cluster="beta")], NOW, SETTINGS
    )
    assert (Kind.POWER_DOWN, "cpu-c7i-3") in kinds(actions)


def test_instance_of_an_unknown_pool_is_not_terminated() -> None:
    actions = reconcile([], [inst("127.1.0.9", pool="old-pool", iid="i-o")], NOW, SETTINGS)
    assert kinds(actions) == [(Kind.IGNORE, "i-o")]


def test_always_on_node_whose_launch_hit_a_capacity_error_waits_for_the_cooldown() -> None:
    reason = "(Code:InsufficientInstanceCapacity) Failure when resuming nodes [request r-2]"
    cooling = [node("cpu-c7i-1", "IDLE+CLOUD+POWERED_DOWN", reason=reason, age=30)]
    assert reconcile(cooling, [], NOW, SETTINGS) == []
    expired = [node("cpu-c7i-1", "IDLE+CLOUD+POWERED_DOWN", reason=reason, age=601)]
    assert kinds(reconcile(expired, [], NOW, SETTINGS)) == [(Kind.POWER_UP, "cpu-c7i-1")]


def test_powered_up_node_left_down_with_a_manager_reason_is_powered_down() -> None:
    nodes = [
        node("cpu-c7i-5", "DOWN+CLOUD", "127.1.0.5", reason="(Spot:Interruption) spot interruption warning", age=5)
    ]
    actions = reconcile(nodes, [inst("127.1.0.5")], NOW, SETTINGS)
    assert kinds(actions) == [(Kind.POWER_DOWN, "cpu-c7i-5")] and actions[0].reason.startswith("(Spot:Interruption)")
