"""The instance runner's pure decisions: which emulated instances to boot, leave broken, or stop."""

from __future__ import annotations

from localcloud.instances.runner_logic import Control, Kind, Observed, Tracked, decide


def _inst(instance_id: str, state: str = "running") -> Observed:
    return Observed(instance_id, state, "127.16.0.4", "us-east-1", "us-east-1a", "c7i.large")


def test_new_instance_is_tracked_and_booted_after_the_boot_delay() -> None:
    control = Control(boot_delay=2.0)
    first = decide([_inst("i-1")], {}, control, 0, now=100.0, draw={"i-1": 0.5})
    assert [(a.kind, a.instance_id, a.fail, a.boot_at) for a in first.actions] == [(Kind.TRACK, "i-1", False, 102.0)]
    tracked = {"i-1": Tracked(_inst("i-1"), 100.0, 102.0, fail=False)}
    assert decide([_inst("i-1")], tracked, control, 0, now=101.0, draw={}).actions == []
    assert [a.kind for a in decide([_inst("i-1")], tracked, control, 0, now=102.0, draw={}).actions] == [Kind.BOOT]


def test_requested_boot_failures_are_used_up_in_order() -> None:
    result = decide([_inst("i-1"), _inst("i-2")], {}, Control(fail_boots=1), 0, now=0.0, draw={})
    assert [a.fail for a in result.actions] == [True, False]
    assert result.requested_failures_used == 1
    again = decide([_inst("i-3")], {}, Control(fail_boots=1), 1, now=0.0, draw={})
    assert [a.fail for a in again.actions] == [False]


def test_failure_rate_uses_the_random_draw() -> None:
    control = Control(boot_failure_rate=0.3)
    result = decide([_inst("i-1"), _inst("i-2")], {}, control, 0, now=0.0, draw={"i-1": 0.1, "i-2": 0.9})
    assert [a.fail for a in result.actions] == [True, False]


def test_a_failed_boot_is_never_booted_but_is_stopped_when_ec2_ends_it() -> None:
    tracked = {"i-1": Tracked(_inst("i-1"), 0.0, 0.0, fail=True)}
    assert decide([_inst("i-1")], tracked, Control(), 0, now=50.0, draw={}).actions == []
    gone = decide([_inst("i-1", "terminated")], tracked, Control(), 0, now=60.0, draw={})
    assert [(a.kind, a.instance_id) for a in gone.actions] == [(Kind.STOP, "i-1")]


def test_terminated_or_vanished_booted_instances_are_stopped_once() -> None:
    tracked = {
        "i-1": Tracked(_inst("i-1"), 0.0, 0.0, fail=False, booted=True),
        "i-2": Tracked(_inst("i-2"), 0.0, 0.0, fail=False, booted=True),
        "i-3": Tracked(_inst("i-3"), 0.0, 0.0, fail=False, booted=True, stopped=True),
    }
    result = decide([_inst("i-1", "shutting-down")], tracked, Control(), 0, now=1.0, draw={})
    assert sorted(a.instance_id for a in result.actions if a.kind is Kind.STOP) == ["i-1", "i-2"]


def test_instances_already_ended_when_first_seen_are_ignored() -> None:
    assert decide([_inst("i-9", "terminated")], {}, Control(), 0, now=0.0, draw={}).actions == []


def test_a_login_node_never_takes_a_requested_or_random_boot_failure() -> None:
    login = Observed("i-9", "running", "127.16.0.5", "us-east-1", "us-east-1a", "c7i.large", login_pool="users")
    result = decide([login, _inst("i-1")], {}, Control(fail_boots=1, boot_failure_rate=1.0), 0, now=0.0, draw={})
    # failures stand for a broken compute image under the plugin's launches: the compute instance takes it
    assert [(a.instance_id, a.fail) for a in result.actions] == [("i-9", False), ("i-1", True)]
    assert result.requested_failures_used == 1
