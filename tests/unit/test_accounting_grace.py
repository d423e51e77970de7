"""`preemption.grace_time` with `type: qos` takes effect: Slurm reads the grace time of the preempted job's QOS, so
`slurm-accounting-apply` sets sacctmgr GraceTime on every QOS another QOS preempts (slurm_plugin/accounting/diff.py),
reads it back from `sacctmgr show qos format=...,gracetime` and changes nothing once it is in place."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from slurm_plugin.accounting.diff import AccountingState, Qos, SlurmVersion, desired_state, diff
from slurm_plugin.accounting.sacctmgr import duration_seconds, read_state
from tests.unit.test_accounting_diff import make_config

V26 = SlurmVersion(26, 5)
QOS = [{"name": "high", "priority": 100, "preempt": ["normal", "low"]}, {"name": "low"}]


def config(kind: str = "qos", grace: int = 120, **extra: Any) -> Any:
    data = make_config(qos=QOS, **extra).model_dump(mode="json", exclude_none=True)
    for cluster in data["clusters"]:
        cluster["preemption"] = {"type": kind, "mode": "requeue", "grace_time": grace}
    return make_config(qos=QOS, clusters=data["clusters"])


def commands(current: AccountingState, desired: AccountingState) -> list[str]:
    return [" ".join(change.argv) for change in diff(current, desired, V26)]


def grace_commands(current: AccountingState, desired: AccountingState) -> list[str]:
    return [c for c in commands(current, desired) if "gracetime" in c]


def test_the_preempted_qos_get_the_clusters_grace_time() -> None:
    desired = desired_state(config())
    assert desired.qos_grace == {"low": 120, "normal": 120}  # `high` preempts: its own jobs are never preempted
    # normal is slurmdbd's own QOS (not in the config): it is modified, never added
    current = AccountingState(qos={"normal": Qos(name="normal", description="normal QOS")})
    assert grace_commands(current, desired) == [
        "modify qos where name=low set gracetime=120",
        "modify qos where name=normal set gracetime=120",
    ]
    everything = commands(current, desired)
    assert everything.index("add qos low description=low priority=0 preemptmode=cluster") < everything.index(
        "modify qos where name=low set gracetime=120"
    )


def test_grace_time_in_place_changes_nothing_and_a_new_value_is_applied() -> None:
    desired = desired_state(config())
    current = AccountingState(qos=dict(desired.qos) | {"normal": Qos(name="normal", description="n")})
    current = current.model_copy(update={"qos_grace": {"high": 0, "low": 120, "normal": 120}})
    assert grace_commands(current, desired) == []
    assert grace_commands(current, desired_state(config(grace=30))) == [
        "modify qos where name=low set gracetime=30",
        "modify qos where name=normal set gracetime=30",
    ]


def test_grace_time_of_qos_is_left_alone_without_qos_preemption() -> None:
    current = AccountingState(qos_grace={"normal": 300})
    assert desired_state(config(kind="partition_priority", grace=60)).qos_grace == {}
    assert grace_commands(current, desired_state(config(kind="partition_priority", grace=60))) == []


def test_a_preempted_qos_nobody_has_is_skipped() -> None:
    desired = desired_state(config()).model_copy(update={"qos_grace": {"ghost": 120}})
    assert grace_commands(AccountingState(), desired) == []


class FakeSacctmgr:
    """`sacctmgr show` rows as slurmdbd answers them (26.05: gracetime as [D-]HH:MM:SS)."""

    def __init__(self, qos_rows: list[list[str]]) -> None:
        self.qos_rows = qos_rows

    def version(self) -> SlurmVersion:
        return V26

    def run(self, argv: Sequence[str]) -> str:
        raise AssertionError(f"reading runs no sacctmgr command: {argv}")

    def show(self, entity: str, fields: Sequence[str], *options: str) -> list[list[str]]:
        if entity == "qos":
            assert fields[-1] == "gracetime"
            return self.qos_rows
        return []


def test_grace_time_is_read_back_from_sacctmgr() -> None:
    rows = [["normal", "Normal QOS", "0", "", "cluster", "00:02:00"], ["high", "high", "100", "normal", "", "00:00:00"]]
    state = read_state(FakeSacctmgr(rows))
    assert state.qos_grace == {"normal": 120, "high": 0}
    desired = desired_state(config()).model_copy(update={"qos_grace": {"normal": 120}})
    assert grace_commands(state, desired) == []


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("00:00:00", 0),
        ("00:02:00", 120),
        ("01:00:05", 3605),
        ("1-00:00:00", 86400),
        ("05:30", 330),
        ("45", 45),
        ("", 0),
    ],
)
def test_sacctmgr_durations(text: str, seconds: int) -> None:
    assert duration_seconds(text) == seconds
