"""A timer of the local cloud's systemctl stand-in (localcloud/native/systemctl `start_timer`: a `while sleep` loop in
its own session) leaves nothing behind when `local down` stops it the way it does (localcloud/teardown.py:
procs.stop_pid_file with the "while sleep" marker): not the loop, and not the `sleep` it is waiting on."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from localcloud.services import procs

SYSTEMCTL = Path(__file__).resolve().parents[2] / "localcloud" / "native" / "systemctl"


def _session(sid: int) -> list[int]:
    """Every process of session `sid`."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if os.getsid(int(entry)) == sid:
                    found.append(int(entry))
            except OSError:
                continue
    return found


def test_stopping_a_timer_stops_its_sleep_too(tmp_path: Path) -> None:
    units, run = tmp_path / "units", tmp_path / "run"
    units.mkdir()
    (units / "tick.timer").write_text("[Timer]\nOnCalendar=*:0/1\n")
    (units / "tick.service").write_text("[Service]\nType=oneshot\nExecStart=/bin/true\n")
    env = {**os.environ, "SYSTEMD_UNIT_PATH": str(units), "ES_LOCAL_UNIT_DIR": str(run)}
    subprocess.run([str(SYSTEMCTL), "start", "tick.timer"], env=env, check=True, timeout=60)
    pid = int((run / "tick.timer.pid").read_text())
    try:
        assert procs.wait_until(lambda: len(_session(pid)) == 2, 10, 0.05), _session(pid)  # the loop and its sleep
        assert procs.stop_pid_file(run / "tick.timer.pid", "while sleep", timeout=10)
        assert procs.wait_until(lambda: _session(pid) == [], 10, 0.05), f"left running: {_session(pid)}"
    finally:
        for left in _session(pid):  # only what this test started: the session of the timer it started
            os.kill(left, 9)
