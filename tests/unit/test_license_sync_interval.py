"""The longest gap between license-sync runs from `licenses[].sync_schedule` (slurm_plugin/licenses/interval.py) and
the stale-sync alarm threshold built on it (stacks/cluster_alarms.py)."""

from __future__ import annotations

import pytest

from slurm_plugin.licenses.interval import longest_gap_seconds, run_times
from stacks.cluster_alarms import LICENSE_SYNC_FLOOR_S, LICENSE_SYNC_UNKNOWN_GAP_S, license_sync_threshold_s


@pytest.mark.parametrize(
    ("schedule", "gap"),
    [
        ("*:0/5", 300),  # the examples' schedule
        ("*-*-* *:0/15:00", 900),
        ("*:00", 3600),
        ("hourly", 3600),
        ("minutely", 60),
        ("daily", 86_400),
        ("02:30", 86_400),
        ("0/6:00", 6 * 3600),
        ("*:0,10,40", 30 * 60),  # uneven: the longest gap counts
        ("8..17:00", 15 * 3600),  # working hours: overnight gap
        ("*:*:0/30", 30),
    ],
)
def test_gap_of_one_schedule(schedule: str, gap: int) -> None:
    assert longest_gap_seconds([schedule]) == gap


def test_the_union_of_schedules_runs_more_often_than_each() -> None:
    assert longest_gap_seconds(["*:00", "*:30"]) == 1800
    assert longest_gap_seconds(["*:0/5", "daily"]) == 300


@pytest.mark.parametrize("schedule", ["Mon *-*-* 02:00", "weekly", "2025-01-01 00:00", "*:0/0", "*:61", "soon", "*:x"])
def test_schedules_not_understood_give_none(schedule: str) -> None:
    assert run_times(schedule) is None
    assert longest_gap_seconds([schedule]) is None


def test_understood_schedules_bound_the_gap_when_others_are_not() -> None:
    assert longest_gap_seconds(["Mon *-*-* 02:00", "*:0/10"]) == 600


def test_threshold_is_three_runs_with_a_floor_and_a_daily_guess_for_unknown_schedules() -> None:
    assert license_sync_threshold_s(["*:0/5"]) == 900
    assert license_sync_threshold_s(["hourly"]) == 3 * 3600
    assert license_sync_threshold_s(["minutely"]) == LICENSE_SYNC_FLOOR_S
    assert license_sync_threshold_s(["weekly"]) == 3 * LICENSE_SYNC_UNKNOWN_GAP_S
