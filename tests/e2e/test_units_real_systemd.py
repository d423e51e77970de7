"""Under a real systemd, slurmd and sackd do not start without the shared file systems (issue 31).

The shared file systems are `nofail` mounts (a reboot goes on without one), and systemd orders a nofail mount before
no target (systemd.mount(5)): after a reboot, slurmd could run jobs without the users' files. The boot
(stacks/user_data.py, MOUNT_DEPENDENCIES) gives slurmd and sackd a drop-in with `RequiresMountsFor=` each mount point
(slurmctld has config apply's own, for its StateSaveLocation). Here the image root's own systemd (Debian 13's 257, PID 1 of its
own namespaces: tests/e2e/systemd_machine.py) reads the fstab lines FSTAB_JQ writes and the drop-ins those very boot
lines write, with the image's Slurm units and our drop-ins:
- a shared file system that fails to mount: neither daemon is started ("a dependency job failed");
- one that mounts: it is mounted before slurmd starts;
- the negative case: without the boot's drop-in, slurmd starts although the mount failed (the bug).
Needs root and the image root (built, or waited for, before the test: tests/conftest.py); skipped only
without root.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from localcloud.image import slurm_root
from stacks.user_data import FSTAB_JQ, MOUNT_DEPENDENCIES, MOUNT_UNITS
from tests.e2e.systemd_machine import SystemdMachine

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0,
    reason="needs root (mount namespaces, chroot into the image root)",
)

USERS, STATE = "/es-users", "/es-state"
# the local cloud's shape of the mounts parameter (localcloud/instances/boot_data.py); /etc/hostname is a file, which
# cannot be bound onto a directory: the state file system fails to mount, as an EFS whose mount target is unreachable
MOUNTS = [
    {"type": "none", "source": "/es-users-source", "mount_point": USERS, "options": "bind"},
    {"type": "none", "source": "/etc/hostname", "mount_point": STATE, "options": "bind"},
]


def _fstab(mounts: list[dict[str, str]]) -> str:
    """What the boot appends to /etc/fstab for `mounts` (FSTAB_JQ gives `mount_point<TAB>line`)."""
    done = subprocess.run(["jq", "-r", FSTAB_JQ], input=json.dumps(mounts), capture_output=True, text=True, check=True)
    return "".join(line.split("\t", 1)[1] + "\n" for line in done.stdout.splitlines())


@pytest.fixture
def machine(tmp_path: Path) -> Iterator[SystemdMachine]:
    machine = SystemdMachine(slurm_root.root_path(), tmp_path / "machine")
    prepare = "\n".join(
        [
            'mkdir -p "$R/es-users-source" "$R/etc/elastic-slurm"'
            + "".join(f' "$R{m["mount_point"]}"' for m in MOUNTS),
            f"cat > \"$R/etc/fstab\" <<'EOF'\n{_fstab(MOUNTS)}EOF",
            f"cat > \"$R/etc/elastic-slurm/mounts.json\" <<'EOF'\n{json.dumps(MOUNTS)}\nEOF",
        ]
    )
    try:
        machine.start(prepare)
        yield machine
    finally:
        machine.stop()


def _boot_lines(machine: SystemdMachine) -> None:
    """The boot's own lines that write the drop-ins (and `systemctl daemon-reload`), run inside the machine."""
    machine.run("/bin/bash", "-euo", "pipefail", "-c", "\n".join(MOUNT_DEPENDENCIES))


def _started(machine: SystemdMachine, unit: str) -> bool:
    return int(machine.show(unit, "ExecMainStartTimestampMonotonic") or 0) > 0


def _mount_unit(path: str) -> str:
    return path.strip("/").replace("-", "\\x2d").replace("/", "-") + ".mount"


def test_neither_slurmd_nor_sackd_starts_while_a_shared_file_system_fails_to_mount(machine: SystemdMachine) -> None:
    _boot_lines(machine)
    for unit in MOUNT_UNITS:
        text = machine.run("cat", f"/etc/systemd/system/{unit}.service.d/elastic-slurm-mounts.conf").stdout
        assert f"RequiresMountsFor={USERS}\nRequiresMountsFor={STATE}\n" in text
        done = machine.run("systemctl", "start", f"{unit}.service", check=False)
        assert done.returncode != 0 and "dependency" in done.stderr, (unit, done.stderr)
        assert not _started(machine, f"{unit}.service"), unit
    assert machine.show(_mount_unit(STATE), "Result") != "success"


def test_a_shared_file_system_that_mounts_is_mounted_before_slurmd_starts(machine: SystemdMachine) -> None:
    machine.run("sed", "-i", f"\\# {STATE} #d", "/etc/fstab")  # the state file system is not this machine's
    machine.run(
        "/bin/sh",
        "-c",
        "jq '[.[] | select(.mount_point == \"/es-users\")]' /etc/elastic-slurm/mounts.json > /tmp/m"
        " && mv /tmp/m /etc/elastic-slurm/mounts.json",
    )
    machine.run("umount", USERS, check=False)  # mounted at boot (remote-fs.target wants it): as if it had failed then
    _boot_lines(machine)
    machine.run("systemctl", "start", "--no-block", "slurmd.service")
    deadline = time.monotonic() + 60
    while not _started(machine, "slurmd.service") and time.monotonic() < deadline:
        time.sleep(0.2)
    assert _started(machine, "slurmd.service")
    mounted = int(machine.show(_mount_unit(USERS), "ActiveEnterTimestampMonotonic"))
    assert 0 < mounted <= int(machine.show("slurmd.service", "ExecMainStartTimestampMonotonic"))


def test_without_the_boots_drop_in_slurmd_starts_although_the_mount_failed(machine: SystemdMachine) -> None:
    """The negative case: what the drop-in prevents happens without it (so the first test can fail)."""
    assert machine.show(_mount_unit(STATE), "ActiveState") != "active"
    machine.run("systemctl", "start", "--no-block", "slurmd.service")
    deadline = time.monotonic() + 60
    while not _started(machine, "slurmd.service") and time.monotonic() < deadline:
        time.sleep(0.2)
    assert _started(machine, "slurmd.service")
    assert machine.show(_mount_unit(STATE), "ActiveState") != "active"
