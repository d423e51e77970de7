"""The local cloud's fresh boot clock (assets/bootstrap/fresh-boot-exec), run in the Slurm root as the instance runner
runs it in front of slurmd: the command's CLOCK_BOOTTIME starts at 0 to the nanosecond, not to the second.

slurmctld takes a registration's boot time as `now - Uptime` in whole seconds and ignores one that predates its
power-up request; an uptime up to 1 s too long (the fraction `unshare --boottime` could not take) made an instance
booted ~1.5 s after the request register with an earlier boot second, and never come up. (The helper's wait for the
next whole wall-clock second is not asserted: that is timing.)
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.slurm_in_root import SKIP_REASON, available, in_root, root_env

pytestmark = [pytest.mark.slurm_root, pytest.mark.skipif(not available(), reason=SKIP_REASON)]
REPO = Path(__file__).resolve().parents[2]
HELPER = REPO / "assets" / "bootstrap" / "fresh-boot-exec"
SHOW = "cat /proc/self/timens_offsets; hostname; grep SigBlk /proc/self/status"


def _host_uptime() -> float:
    return float(Path("/proc/uptime").read_text().split()[0])


def test_the_command_boots_now_to_the_nanosecond_with_its_own_host_name_and_no_blocked_signal() -> None:
    before = _host_uptime()
    env = root_env(ELASTIC_SLURM_HOSTNAME="ip-127-16-0-9")
    out = subprocess.run(
        in_root([str(HELPER), "/bin/sh", "-c", SHOW], REPO), env=env, capture_output=True, text=True, check=True
    ).stdout
    after = _host_uptime()
    offsets = dict(line.split(maxsplit=1) for line in out.splitlines() if line.split()[0] in ("boottime", "monotonic"))
    seconds, nanoseconds = (int(v) for v in offsets["boottime"].split())
    shift = -(seconds + nanoseconds / 1e9)  # the host uptime at which the command's boot clock was 0
    assert before - 0.01 <= shift <= after + 0.01  # /proc/uptime has 10 ms steps
    assert offsets["monotonic"].split() == ["0", "0"]
    assert "ip-127-16-0-9" in out.splitlines()
    assert "SigBlk:\t0000000000000000" in out


def test_the_command_itself_runs_in_the_new_time_namespace() -> None:
    """CMD exec'd by the helper (not only its children) sees the fresh clock: seconds of uptime, not the host's."""
    out = subprocess.run(
        in_root([str(HELPER), "/bin/cat", "/proc/uptime"], REPO), env=root_env(), capture_output=True, text=True
    )
    assert out.returncode == 0, out.stderr
    assert float(out.stdout.split()[0]) < 5 < _host_uptime()
