"""`local down` stops what the controller's user data started through the systemctl stand-in: every unit PID file the
cloud links is in the list of daemons it stops (a timer missing there outlives its cloud, firing every minute)."""

from __future__ import annotations

from pathlib import Path

from localcloud.cloud import DAEMONS, UNIT_PID_FILES

UNITS = Path(__file__).resolve().parents[2] / "assets" / "systemd"


def test_every_unit_the_cloud_tracks_is_stopped_by_local_down() -> None:
    stopped = {name for name, _marker in DAEMONS}
    assert set(UNIT_PID_FILES) <= stopped


def test_every_timer_of_the_image_is_tracked() -> None:
    timers = {unit.name for unit in UNITS.glob("*.timer")}
    assert timers <= set(UNIT_PID_FILES.values())
