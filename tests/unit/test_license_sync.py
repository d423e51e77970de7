"""License sync decisions and failure handling, with fake license servers and a fake Slurm."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import pytest

from cluster_config import parse
from slurm_plugin.accounting.diff import SlurmVersion
from slurm_plugin.licenses.adapters import load_state, parse_scontrol_licenses, save_state
from slurm_plugin.licenses.sync import (
    CurrentLicense,
    SyncConfig,
    SyncedLicense,
    SyncState,
    Update,
    decide,
    run_sync,
    sync_config_from,
)
from slurm_plugin.licenses.usage import FeatureUsage, LicenseServerError

V22 = SlurmVersion(22, 5)
V23 = SlurmVersion(23, 11)
VCS = SyncedLicense(
    name="vcs", server="lic1", server_type="flexlm", address="27000@lic1", feature="VCS", clusters=["a", "b"]
)
XCEL = SyncedLicense(name="xcel", server="lic2", server_type="rlm", address="5053@lic2", feature="xcel", clusters=["a"])


@dataclass
class FakeServers:
    answers: dict[str, dict[str, FeatureUsage] | str]
    calls: list[str] = field(default_factory=list)

    def query(self, server_type: str, address: str) -> dict[str, FeatureUsage]:
        self.calls.append(address)
        answer = self.answers[address]
        if isinstance(answer, str):
            raise LicenseServerError(answer)
        return answer


@dataclass
class FakeSlurm:
    version_: SlurmVersion
    numbers: dict[str, CurrentLicense]
    held_by: dict[str, dict[str, int]] = field(default_factory=dict)
    down: bool = False
    updates: list[Update] = field(default_factory=list)

    def version(self) -> SlurmVersion:
        return self.version_

    def current(self) -> dict[str, CurrentLicense]:
        return dict(self.numbers)

    def held(self, cluster: str) -> dict[str, int]:
        if self.down:
            raise LicenseServerError("slurm_load_licenses error: Unable to contact slurm controller")
        return self.held_by.get(cluster, {})

    def update(self, update: Update) -> None:
        self.updates.append(update)
        self.numbers[f"{update.name}@{update.server}"] = CurrentLicense(update.count, update.last_consumed)


def config(*licenses: SyncedLicense) -> SyncConfig:
    return SyncConfig(local_cluster="a", licenses=list(licenses))


def test_22_05_count_is_issued_minus_licenses_used_outside_slurm() -> None:
    update = decide(VCS, FeatureUsage("VCS", issued=50, in_use=12), held=4, current=CurrentLicense(50), version=V22)
    assert update is not None
    assert (update.count, update.last_consumed) == (42, None)


def test_22_05_slurm_jobs_holding_more_than_the_server_shows_do_not_inflate_the_count() -> None:
    update = decide(VCS, FeatureUsage("VCS", issued=50, in_use=3), held=10, current=CurrentLicense(40), version=V22)
    assert update is not None
    assert update.count == 50


def test_23_02_sets_issued_as_count_and_in_use_as_lastconsumed() -> None:
    update = decide(VCS, FeatureUsage("VCS", issued=50, in_use=12), held=0, current=CurrentLicense(50), version=V23)
    assert update is not None
    assert (update.count, update.last_consumed) == (50, 12)


def test_unchanged_numbers_produce_no_update() -> None:
    usage = FeatureUsage("VCS", issued=50, in_use=12)
    assert decide(VCS, usage, held=0, current=CurrentLicense(38), version=V22) is None
    assert decide(VCS, usage, held=0, current=CurrentLicense(50, 12), version=V23) is None


def test_slurm_usage_is_summed_over_every_cluster_of_the_license() -> None:
    servers = FakeServers({"27000@lic1": {"VCS": FeatureUsage("VCS", issued=50, in_use=20)}})
    slurm = FakeSlurm(V22, {"vcs@lic1": CurrentLicense(50)}, held_by={"a": {"vcs@lic1": 5}, "b": {"vcs@lic1": 7}})
    result = run_sync(config(VCS), servers, slurm, SyncState(), now=100.0)
    assert [u.count for u in result.updates] == [42]
    assert result.state.licenses["vcs@lic1"].held_by_slurm == 12


def test_each_server_is_queried_once_per_run() -> None:
    other = VCS.model_copy(update={"name": "vcs2", "feature": "VCS2"})
    usage = {"VCS": FeatureUsage("VCS", 5, 0), "VCS2": FeatureUsage("VCS2", 5, 0)}
    servers = FakeServers({"27000@lic1": usage})
    run_sync(config(VCS, other), servers, FakeSlurm(V22, {}), SyncState(), now=1.0)
    assert servers.calls == ["27000@lic1"]


def test_server_down_keeps_slurm_counts_and_counts_the_failure() -> None:
    servers = FakeServers({"27000@lic1": "Cannot connect to license server system"})
    slurm = FakeSlurm(V22, {"vcs@lic1": CurrentLicense(38)})
    result = run_sync(config(VCS), servers, slurm, SyncState(), now=1.0)
    again = run_sync(config(VCS), servers, slurm, result.state, now=2.0)
    assert slurm.updates == []
    assert slurm.numbers["vcs@lic1"].count == 38
    assert again.state.servers["27000@lic1"].failures_total == 2
    assert again.state.servers["27000@lic1"].consecutive_failures == 2
    assert "Cannot connect" in (again.state.servers["27000@lic1"].last_error or "")


def test_server_back_up_resets_consecutive_failures_but_keeps_the_total() -> None:
    down = FakeServers({"27000@lic1": "down"})
    up = FakeServers({"27000@lic1": {"VCS": FeatureUsage("VCS", 50, 0)}})
    slurm = FakeSlurm(V22, {"vcs@lic1": CurrentLicense(38)})
    state = run_sync(config(VCS), down, slurm, SyncState(), now=1.0).state
    state = run_sync(config(VCS), up, slurm, state, now=2.0).state
    assert state.servers["27000@lic1"].consecutive_failures == 0
    assert state.servers["27000@lic1"].failures_total == 1
    assert slurm.numbers["vcs@lic1"].count == 50


def test_feature_missing_from_the_output_keeps_the_license_untouched() -> None:
    servers = FakeServers({"27000@lic1": {"OTHER": FeatureUsage("OTHER", 5, 0)}})
    slurm = FakeSlurm(V22, {"vcs@lic1": CurrentLicense(38)})
    result = run_sync(config(VCS), servers, slurm, SyncState(), now=1.0)
    assert slurm.updates == []
    assert any("VCS is not in the flexlm output" in f for f in result.failures)


def test_uncounted_feature_is_not_synced() -> None:
    servers = FakeServers({"27000@lic1": {"VCS": FeatureUsage("VCS", 0, 0, uncounted=True)}})
    slurm = FakeSlurm(V22, {"vcs@lic1": CurrentLicense(38)})
    assert run_sync(config(VCS), servers, slurm, SyncState(), now=1.0).updates == []


def test_one_failing_server_does_not_stop_the_others() -> None:
    servers = FakeServers({"27000@lic1": "timeout", "5053@lic2": {"xcel": FeatureUsage("xcel", 10, 4)}})
    slurm = FakeSlurm(V22, {"vcs@lic1": CurrentLicense(38), "xcel@lic2": CurrentLicense(10)})
    result = run_sync(config(VCS, XCEL), servers, slurm, SyncState(), now=1.0)
    assert [(u.name, u.count) for u in result.updates] == [("xcel", 6)]


def test_slurm_usage_unknown_on_22_05_changes_nothing() -> None:
    servers = FakeServers({"27000@lic1": {"VCS": FeatureUsage("VCS", 50, 12)}})
    slurm = FakeSlurm(V22, {"vcs@lic1": CurrentLicense(50)}, down=True)
    result = run_sync(config(VCS), servers, slurm, SyncState(), now=1.0)
    assert slurm.updates == []
    assert result.state.servers["slurm:a"].failures_total == 1


def test_slurm_usage_is_not_needed_on_23_02() -> None:
    servers = FakeServers({"27000@lic1": {"VCS": FeatureUsage("VCS", 50, 12)}})
    slurm = FakeSlurm(V23, {"vcs@lic1": CurrentLicense(50)}, down=True)
    assert [u.last_consumed for u in run_sync(config(VCS), servers, slurm, SyncState(), now=1.0).updates] == [12]


def test_dry_run_decides_but_writes_nothing() -> None:
    servers = FakeServers({"27000@lic1": {"VCS": FeatureUsage("VCS", 50, 12)}})
    slurm = FakeSlurm(V22, {"vcs@lic1": CurrentLicense(50)})
    result = run_sync(config(VCS), servers, slurm, SyncState(), now=1.0, dry_run=True)
    assert len(result.updates) == 1
    assert slurm.updates == []


def test_state_survives_a_save_and_load(tmp_path: Path) -> None:
    servers = FakeServers({"27000@lic1": "down"})
    state = run_sync(config(VCS), servers, FakeSlurm(V22, {}), SyncState(), now=1.0).state
    save_state(state, tmp_path / "s.json")
    assert load_state(tmp_path / "s.json") == state


def test_corrupt_state_file_starts_fresh(tmp_path: Path) -> None:
    (tmp_path / "s.json").write_text("{not json")
    assert load_state(tmp_path / "s.json") == SyncState()


def test_scontrol_license_lines_give_used_per_license() -> None:
    text = (
        "LicenseName=vcs@lic1 Total=30 Used=4 Free=26 Reserved=0 Remote=yes\n"
        "LicenseName=matlab Total=5 Used=0 Free=5 Reserved=0 Remote=no\n"
    )
    assert parse_scontrol_licenses(text) == {"vcs@lic1": 4, "matlab": 0}


def test_sync_config_covers_only_licenses_with_a_server() -> None:
    cfg = parse(
        {
            "clusters": [
                {
                    "name": name,
                    "region": "us-east-1",
                    "storage": {"efs": {}},
                    "network": {"mode": "create", "vpc_cidr": cidr, "availability_zones": ["us-east-1a"]},
                    "partitions": [
                        {"name": "p", "pools": [{"name": "c", "instance_types": ["c7i.large"], "max_nodes": 1}]}
                    ],
                }
                for name, cidr in (("east", "127.16.0.0/16"), ("west", "127.17.0.0/16"))
            ],
            "accounting": {"mode": "create"},
            "federation": {"name": "eda", "clusters": ["east", "west"]},  # sharing slurmdbd: one munge key
            "licenses": [
                {"name": "vcs", "count": 5, "server_type": "flexlm", "server": "27000@lic1", "feature": "VCS"},
                {"name": "matlab", "count": 5},
            ],
        }
    )
    sync = sync_config_from(cfg, "east")
    assert [(s.key, s.feature, s.clusters) for s in sync.licenses] == [("vcs@lic1", "VCS", ["east", "west"])]


@pytest.mark.parametrize("version", [V22, V23])
def test_server_answering_zero_issued_is_taken_at_its_word(version: SlurmVersion) -> None:
    update = decide(VCS, FeatureUsage("VCS", issued=0, in_use=0), held=0, current=CurrentLicense(10), version=version)
    assert update is not None
    assert update.count == 0


def test_cluster_that_does_not_answer_blocks_only_its_licenses() -> None:
    servers = FakeServers(
        {"27000@lic1": {"VCS": FeatureUsage("VCS", 50, 12)}, "5053@lic2": {"xcel": FeatureUsage("xcel", 10, 4)}}
    )
    slurm = FakeSlurm(V22, {"vcs@lic1": CurrentLicense(50), "xcel@lic2": CurrentLicense(10)})
    original = slurm.held

    def held(cluster: str) -> dict[str, int]:
        if cluster == "b":
            raise LicenseServerError("Unable to contact slurm controller")
        return original(cluster)

    slurm.held = held  # type: ignore[method-assign]
    result = run_sync(config(VCS, XCEL), servers, slurm, SyncState(), now=1.0)
    assert [(u.name, u.count) for u in result.updates] == [("xcel", 6)]


def test_timer_dropin_has_one_oncalendar_per_distinct_schedule() -> None:
    from slurm_plugin.licenses.units import timer_dropin

    def lic(name: str, schedule: str | None) -> dict[str, object]:
        return {"name": name, "count": 1, "server_type": "flexlm", "server": "27000@lic1", "sync_schedule": schedule}

    cfg = parse(
        {
            "clusters": [
                {
                    "name": "east",
                    "region": "us-east-1",
                    "storage": {"efs": {}},
                    "network": {"mode": "create", "availability_zones": ["us-east-1a"]},
                    "partitions": [
                        {"name": "p", "pools": [{"name": "c", "instance_types": ["c7i.large"], "max_nodes": 1}]}
                    ],
                }
            ],
            "accounting": {"mode": "create"},
            "licenses": [lic("a", "*:0/5"), lic("b", "*:0/5"), lic("c", "hourly"), lic("d", None)],
        }
    )
    assert timer_dropin(cfg) == (
        "# Written by elastic-slurm render from licenses[].sync_schedule.\n"
        "[Timer]\nOnCalendar=\nOnCalendar=*:0/5\nOnCalendar=hourly\n"
    )
