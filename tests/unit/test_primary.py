"""Exactly one controller acts (slurm_plugin/primary.py): the first controller `scontrol ping` reports UP. The cluster
manager and the boot watch act only there; the license sync and the CloudWatch publish run where the cluster is
reported from (the acting controller, or the primary while no slurmctld answers)."""

from __future__ import annotations

from typing import Any

import pytest

from slurm_plugin import primary
from slurm_plugin.exporter.cloudwatch import SLURMCTLD_UP, CloudWatchPublisher
from slurm_plugin.licenses import cli as license_cli

BOTH_UP = "Slurmctld(primary) at ctl-a is UP\nSlurmctld(backup) at ctl-b is UP\n"
TAKEN_OVER = "Slurmctld(primary) at ctl-a is DOWN\nSlurmctld(backup) at ctl-b is UP\n" + "*" * 41 + "\n"
ALL_DOWN = "Slurmctld(primary) at ctl-a is DOWN\nSlurmctld(backup) at ctl-b is DOWN\n"
ONE = "Slurmctld(primary) at ip-127-16-0-4 is UP\n"


@pytest.mark.parametrize(
    ("ping", "acting_host"),
    [(BOTH_UP, "ctl-a"), (TAKEN_OVER, "ctl-b"), (ALL_DOWN, None), (ONE, "ip-127-16-0-4"), ("", None)],
)
def test_the_acting_controller_is_the_first_one_up(ping: str, acting_host: str | None) -> None:
    assert primary.parse_ping(ping).acting == acting_host
    for host in ("ctl-a", "ctl-b", "ip-127-16-0-4"):
        assert primary.acting(ping, host) is (host == acting_host)


def test_host_names_compare_by_their_first_label() -> None:
    assert primary.acting(TAKEN_OVER, "ctl-b.ec2.internal")
    assert not primary.acting(TAKEN_OVER, "ctl-bb")


def test_after_failback_the_primary_acts_again_and_the_backup_stands_by() -> None:
    assert primary.acting(BOTH_UP, "ctl-a") and not primary.acting(BOTH_UP, "ctl-b")
    assert primary.speaks(BOTH_UP, "ctl-a") and not primary.speaks(BOTH_UP, "ctl-b")


def test_with_no_slurmctld_up_only_the_primary_speaks_and_nobody_acts() -> None:
    assert primary.speaks(ALL_DOWN, "ctl-a") and not primary.speaks(ALL_DOWN, "ctl-b")
    assert not primary.acting(ALL_DOWN, "ctl-a") and not primary.acting(ALL_DOWN, "ctl-b")


def test_a_host_where_scontrol_lists_no_controller_speaks_but_does_not_act() -> None:
    assert primary.speaks("", "anything") and not primary.acting("", "anything")


def test_the_gate_asks_scontrol_at_most_once_per_ttl() -> None:
    answers = iter([BOTH_UP, TAKEN_OVER])
    calls: list[float] = []
    now = [0.0]

    def ping() -> str:
        calls.append(now[0])
        return next(answers)

    gate = primary.Gate(ping=ping, host="ctl-b", ttl=10, clock=lambda: now[0])
    assert not gate.acting() and not gate.speaks()
    now[0] = 9.9
    assert not gate.acting()
    now[0] = 10.0
    assert gate.acting() and gate.speaks()
    assert calls == [0.0, 10.0]


def test_scontrol_ping_that_cannot_run_reads_as_no_answer(tmp_path: Any) -> None:
    assert primary.scontrol_ping(str(tmp_path)) == ""


def test_describe_names_each_controller_role() -> None:
    assert primary.describe(primary.parse_ping(TAKEN_OVER), "ctl-b") == {"ctl-a": "down", "ctl-b": "acting (this host)"}
    assert primary.describe(primary.parse_ping(BOTH_UP), "ctl-b") == {"ctl-a": "acting", "ctl-b": "standby (this host)"}


class _Client:
    def __init__(self) -> None:
        self.calls: list[dict[str, Any]] = []

    def put_metric_data(self, **kwargs: Any) -> None:
        self.calls.append(kwargs)


def _gate(ping: str, host: str) -> primary.Gate:
    return primary.Gate(ping=lambda: ping, host=host, ttl=0)


def test_only_the_reporting_controller_publishes_to_cloudwatch() -> None:
    from datetime import UTC, datetime

    now = datetime.now(UTC)
    for ping, host, published in [(BOTH_UP, "ctl-a", 1), (BOTH_UP, "ctl-b", 0), (TAKEN_OVER, "ctl-b", 1),
                                  (TAKEN_OVER, "ctl-a", 0), (ALL_DOWN, "ctl-a", 1), (ALL_DOWN, "ctl-b", 0)]:  # fmt: skip
        client = _Client()
        CloudWatchPublisher(client, "east", gate=_gate(ping, host)).publish({SLURMCTLD_UP: 1}, now)
        assert len(client.calls) == published, (ping, host)


def test_the_license_sync_of_a_standby_controller_exits_0_without_syncing(tmp_path: Any) -> None:
    config = tmp_path / "sync.json"
    config.write_text('{"local_cluster": "east", "licenses": []}')
    args = ["--config", str(config), "--state-dir", str(tmp_path / "state")]
    assert license_cli.main(args, gate=_gate(BOTH_UP, "ctl-b")) == 0
    assert not (tmp_path / "state" / license_cli.STATE_FILE).exists()  # nothing ran, nothing recorded
    # the acting controller syncs: here it reaches for sacctmgr, which this test machine lacks (exit 1)
    assert license_cli.main(args, gate=_gate(TAKEN_OVER, "ctl-b")) == 1


def test_a_bad_license_sync_config_is_refused_on_every_controller(tmp_path: Any) -> None:
    config = tmp_path / "sync.json"
    config.write_text("{}")
    assert license_cli.main(["--config", str(config)], gate=_gate(BOTH_UP, "ctl-b")) == 2


class _PingOnly:
    """A manager's Slurm that answers `scontrol ping` and fails on anything else (a standby touches nothing)."""

    def __init__(self, ping: str) -> None:
        self.answer = ping

    def ping(self) -> str:
        return self.answer

    def __getattr__(self, name: str) -> Any:
        raise AssertionError(f"a standby manager called {name}")


def test_the_manager_of_the_standby_controller_does_nothing_and_acts_after_a_takeover() -> None:
    from slurm_plugin.manager.daemon import Manager

    slurm = _PingOnly(BOTH_UP)
    manager = Manager(manifest=None, settings=None, slurm=slurm, ec2=None, host="ctl-b")  # type: ignore[arg-type]
    assert manager.cycle() is None
    slurm.answer = TAKEN_OVER
    assert manager.active()
    slurm.answer = BOTH_UP  # failback: the primary took control back
    assert not manager.active() and manager.cycle() is None
