"""Every unit file and drop-in we ship passes `systemd-analyze verify` of the image's own systemd (Debian 13's 257).

The units are this checkout's assets/systemd, put where install-plugin.sh puts them (/etc/systemd/system) inside the
image root, beside Slurm's own units (slurmd, slurmctld, sackd, slurmrestd: our drop-ins extend them) and the
programs they start: unknown or misspelt directives, bad values, missing executables and broken dependencies are all
findings. systemd-analyze reports most of them as warnings and still exits 0 ("..., ignoring."), so any line it
prints is a finding. Needs root and the image root (built, or waited for, before the test: tests/conftest.py);
skipped only without root.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from localcloud.image import slurm_root
from localcloud.instances import enter

UNITS = Path(__file__).resolve().parents[2] / "assets" / "systemd"

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0,
    reason="needs root (mount namespaces, chroot into the image root)",
)


def unit_names(units: Path) -> list[str]:
    """The units a directory of unit files and drop-in directories (<unit>.d) defines or extends."""
    return sorted(p.name.removesuffix(".d") for p in units.iterdir() if p.suffix in (".service", ".timer", ".d"))


def verify(units: Path) -> list[str]:
    """`systemd-analyze verify` of every unit of `units`, installed as /etc/systemd/system of the image root (a
    private mount namespace; the cached root is not touched): the lines it printed."""
    view = enter.View(slurm_root.root_path()).with_binds((units, "/etc/systemd/system"))
    command = ["systemd-analyze", "verify", "--man=no", *unit_names(units)]
    done = subprocess.run(
        enter.argv(view, ["/usr/bin/env", "-i", f"PATH={enter.ROOT_PATH}", *command]),
        capture_output=True,
        text=True,
        timeout=120,
    )
    lines = (done.stdout + done.stderr).strip().splitlines()
    assert lines or done.returncode == 0, f"systemd-analyze exited {done.returncode} saying nothing"
    return lines


def test_every_unit_and_drop_in_we_ship_passes_systemd_analyze_verify() -> None:
    names = unit_names(UNITS)
    assert {"slurmd.service", "slurmctld.service", "sackd.service", "slurm-clustermgr.service"} <= set(names)
    assert verify(UNITS) == []


def test_the_slurm_units_our_drop_ins_extend_are_the_images_own(tmp_path: Path) -> None:
    root = slurm_root.root_path()
    for drop_ins in UNITS.glob("*.service.d"):
        assert (root / "usr/lib/systemd/system" / drop_ins.name.removesuffix(".d")).is_file(), drop_ins.name


@pytest.mark.parametrize(
    ("where", "text", "finding"),
    [
        ("slurmctld.service.d/zz-broken.conf", "[Service]\nKillMode=proces\n", "kill mode"),
        ("slurmd.service.d/zz-broken.conf", "[Service]\nLimitMEMLOCK=lots\n", "LimitMEMLOCK"),
        ("slurmd.service.d/zz-broken.conf", "[Service]\nRestart=on-crash\n", "Restart"),
        ("broken.service", "[Service]\nExecStart=/opt/elastic-slurm/bin/no-such-program\n", "not executable"),
        ("broken.service", "[Service]\nExecStart=/bin/true\nDelegat=yes\n", "Unknown key"),
    ],
)
def test_a_broken_unit_or_drop_in_is_refused(tmp_path: Path, where: str, text: str, finding: str) -> None:
    units = tmp_path / "units"
    shutil.copytree(UNITS, units)
    (units / where).parent.mkdir(exist_ok=True)
    (units / where).write_text(text)
    findings = verify(units)
    assert any(finding in line for line in findings), findings
