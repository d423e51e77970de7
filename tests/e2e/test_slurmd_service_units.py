"""The local cloud's systemctl stand-in (localcloud/native/systemctl) honours what slurmd's and slurmctld's units rely
on: KillMode= (which processes a stop ends, by cgroup membership, not by session), Limit*= on the main process,
Restart=on-failure (a crash restarts it, a stop or a clean exit does not), drop-ins in systemd's order,
RequiresMountsFor= (the boot's drop-in: no Slurm daemon without the shared file systems).

Scratch units in a temporary unit path (SYSTEMD_UNIT_PATH, as systemd reads it), run on this host as the stand-in runs
them inside the Slurm root; needs root and a cgroup2 hierarchy (cgroup membership is what KillMode= acts on).
"""

from __future__ import annotations

import contextlib
import os
import resource as resource_module
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path

import pytest

SYSTEMCTL = Path(__file__).resolve().parents[2] / "localcloud" / "native" / "systemctl"
# a Type=notify daemon: says READY=1 on $NOTIFY_SOCKET, then runs
NOTIFY_DAEMON = """import os, socket, time
socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM).sendto(b"READY=1", os.environ["NOTIFY_SOCKET"])
time.sleep(300)
"""


def _cgroup2() -> bool:
    return any(line.split()[2] == "cgroup2" for line in Path("/proc/self/mounts").read_text().splitlines())


pytestmark = pytest.mark.skipif(
    os.geteuid() != 0 or not _cgroup2(), reason="the systemctl stand-in needs root and a cgroup2 hierarchy"
)


class Units:
    """A scratch unit path and unit directory, and the stand-in run against them."""

    def __init__(self, root: Path) -> None:
        self.path = root / "units"
        self.run_dir = root / "run"
        self.path.mkdir()
        self.started: list[int] = []  # processes a test saw (stopped at the end if still alive)

    def unit(self, name: str, text: str, drop_ins: dict[str, str] | None = None) -> None:
        (self.path / name).write_text(text)
        for conf, body in (drop_ins or {}).items():
            (self.path / f"{name}.d").mkdir(exist_ok=True)
            (self.path / f"{name}.d" / conf).write_text(body)

    def systemctl(self, *args: str, check: bool = True, fstab: Path | None = None) -> subprocess.CompletedProcess[str]:
        """The stand-in; with `fstab`, as the machine's /etc/fstab, in a mount namespace of its own (what it mounts
        vanishes with it)."""
        env = {
            "PATH": "/usr/sbin:/usr/bin:/sbin:/bin",
            "SYSTEMD_UNIT_PATH": str(self.path),
            "ES_LOCAL_UNIT_DIR": str(self.run_dir),
            **({"ES_LOCAL_FSTAB": str(fstab)} if fstab else {}),
        }
        argv = [*(["unshare", "--mount", "--propagation", "private"] if fstab else []), str(SYSTEMCTL), *args]
        done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=60)
        if check:
            assert done.returncode == 0, done.stderr
        return done

    def pid(self, name: str) -> int:
        pid = int((self.run_dir / f"{name}.pid").read_text())
        self.started.append(pid)
        return pid

    def cgroup(self, name: str) -> Path:
        return Path((self.run_dir / f"{name}.cgroup").read_text().strip())


@pytest.fixture
def units(tmp_path: Path) -> Iterator[Units]:
    scratch = Units(tmp_path)
    try:
        yield scratch
    finally:
        for unit in sorted(scratch.path.glob("*.service")):
            scratch.systemctl("stop", unit.name, check=False)
        for pid in scratch.started:
            _kill(pid)
        for cgroup in scratch.run_dir.glob("*.cgroup"):
            path = Path(cgroup.read_text().strip())
            for pid in (int(p) for p in (path / "cgroup.procs").read_text().split()) if path.is_dir() else ():
                _kill(pid)
            for level in (path, path.parent):
                _eventually(partial(_gone, level), timeout=5)


def _kill(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)


def _gone(cgroup: Path) -> bool:
    """True once `cgroup` is removed (tried here: its last process may still be exiting)."""
    with contextlib.suppress(OSError):
        cgroup.rmdir()
    return not (cgroup / "cgroup.procs").exists()


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def _eventually(check: Callable[[], bool], timeout: float = 15.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(0.1)
    return check()


def _forking_service(child_file: Path, extra: str = "") -> str:
    """A service whose main process starts a child in a session of its own (as ResumeProgram's workers are)."""
    return (
        "[Service]\n"
        f"ExecStart=/bin/bash -c 'setsid sleep 300 </dev/null >/dev/null 2>&1 & echo $! > {child_file}; exec sleep 300'\n"
        f"{extra}"
    )


def test_a_stop_ends_what_the_service_started_in_another_session_by_default(units: Units, tmp_path: Path) -> None:
    child_file = tmp_path / "child"
    units.unit("worker.service", _forking_service(child_file))
    units.systemctl("start", "worker.service")
    main = units.pid("worker.service")
    assert _eventually(lambda: child_file.exists() and child_file.read_text().strip())  # written whole
    child = int(child_file.read_text())
    units.started.append(child)
    assert {main, child} <= {int(p) for p in (units.cgroup("worker.service") / "cgroup.procs").read_text().split()}
    units.systemctl("stop", "worker.service")
    assert _eventually(lambda: not _alive(main) and not _alive(child))  # KillMode=control-group: the whole cgroup
    assert not (units.run_dir / "worker.service.cgroup").exists()  # the empty cgroup is gone


def test_killmode_process_stops_only_the_main_process_and_a_restart_keeps_its_children(
    units: Units, tmp_path: Path
) -> None:
    child_file = tmp_path / "child"
    units.unit("worker.service", _forking_service(child_file), {"elastic-slurm.conf": "[Service]\nKillMode=process\n"})
    units.systemctl("start", "worker.service")
    first = units.pid("worker.service")
    assert _eventually(lambda: child_file.exists() and child_file.read_text().strip())  # written whole
    child = int(child_file.read_text())
    units.started.append(child)
    child_file.unlink()
    units.systemctl("restart", "worker.service")
    second = units.pid("worker.service")
    assert second != first and not _alive(first) and _alive(second)
    assert _alive(child)  # still running, still in the unit's cgroup (as under systemd)
    assert str(child) in (units.cgroup("worker.service") / "cgroup.procs").read_text().split()


def _hard_limit(resource: int) -> str:
    hard = resource_module.getrlimit(resource)[1]
    return "unlimited" if hard == resource_module.RLIM_INFINITY else str(hard)


def _may_raise_limits() -> bool:
    capabilities = next(
        line for line in Path("/proc/self/status").read_text().splitlines() if line.startswith("CapEff")
    )
    return bool(int(capabilities.split()[1], 16) >> 24 & 1)  # CAP_SYS_RESOURCE


def test_the_units_limits_are_the_main_processes_limits(units: Units) -> None:
    units.unit(
        "limits.service",
        "[Service]\nExecStart=/bin/sleep 300\nLimitNOFILE=8192\n",
        {"elastic-slurm.conf": "[Service]\nLimitMEMLOCK=infinity\nLimitNOFILE=1024:4096\nLimitCORE=0\n"},
    )
    units.systemctl("start", "limits.service")
    limits = Path(f"/proc/{units.pid('limits.service')}/limits").read_text().splitlines()

    def limit(name: str) -> list[str]:
        return next(line for line in limits if line.startswith(name)).split()[-3:-1]

    assert limit("Max open files") == ["1024", "4096"]  # the drop-in's value wins
    assert limit("Max core file size") == ["0", "0"]
    # infinity: as asked where root may raise hard limits, else this machine's hard limit (and the log says so)
    memlock = "unlimited" if _may_raise_limits() else _hard_limit(resource_module.RLIMIT_MEMLOCK)
    assert limit("Max locked memory") == [memlock, memlock]
    log = (units.run_dir / "limits.service.log").read_text()
    assert ("LimitMEMLOCK=infinity is" in log) == (memlock != "unlimited")


def test_a_limit_the_stand_in_cannot_carry_fails_the_start_loudly(units: Units) -> None:
    units.unit("odd.service", "[Service]\nExecStart=/bin/sleep 300\nLimitMEMLOCK=64K\n")
    done = units.systemctl("start", "odd.service", check=False)
    assert done.returncode != 0 and "LimitMEMLOCK=64K is not emulated" in done.stderr


def test_restart_on_failure_starts_a_crashed_notify_service_again_and_a_stop_does_not(
    units: Units, tmp_path: Path
) -> None:
    (tmp_path / "daemon.py").write_text(NOTIFY_DAEMON)
    units.unit(
        "daemon.service",
        f"[Service]\nType=notify\nExecStart=/usr/bin/python3 {tmp_path / 'daemon.py'}\n",
        {"elastic-slurm.conf": "[Service]\nRestart=on-failure\nRestartSec=0.2\n"},
    )
    units.systemctl("start", "daemon.service")
    first = units.pid("daemon.service")
    os.kill(first, signal.SIGSEGV)  # a crash
    assert _eventually(lambda: units.pid("daemon.service") != first and _alive(units.pid("daemon.service")))
    second = units.pid("daemon.service")
    assert units.systemctl("is-active", "daemon.service").stdout.strip() == "active"
    units.systemctl("stop", "daemon.service")
    time.sleep(1)  # past RestartSec: nothing comes back after a stop
    assert not _alive(second) and not (units.run_dir / "daemon.service.pid").exists()
    assert units.systemctl("is-active", "daemon.service", check=False).returncode == 3
    assert not (units.run_dir / "daemon.service.supervisor.pid").exists()


def test_restart_on_failure_leaves_a_clean_exit_alone(units: Units) -> None:
    units.unit("clean.service", "[Service]\nExecStart=/bin/sleep 300\nRestart=on-failure\nRestartSec=0.2\n")
    units.systemctl("start", "clean.service")
    first = units.pid("clean.service")
    os.kill(first, signal.SIGTERM)  # a clean signal, as `scontrol shutdown` is a clean exit
    assert _eventually(lambda: not (units.run_dir / "clean.service.supervisor.pid").exists())
    assert units.pid("clean.service") == first and not _alive(first)


def test_drop_ins_apply_in_file_name_order_and_an_empty_value_resets(units: Units, tmp_path: Path) -> None:
    out = tmp_path / "out"
    units.unit(
        "order.service",
        f"[Service]\nType=oneshot\nExecStart=/bin/sh -c 'echo unit > {out}'\nEnvironment=A=unit\n",
        {
            "20-late.conf": f"[Service]\nExecStart=\nExecStart=/bin/sh -c 'echo $A $B > {out}'\n",
            "10-early.conf": "[Service]\nEnvironment=\nEnvironment=B=early\nEnvironment=A=early\n",
        },
    )
    units.systemctl("start", "order.service")
    assert out.read_text().split() == ["early", "early"]


def test_requires_mounts_for_mounts_fstabs_entry_first_and_a_mount_that_fails_stops_the_start(
    units: Units, tmp_path: Path
) -> None:
    """What the boot's drop-in asks (stacks/user_data.py MOUNT_DEPENDENCIES): the file system at the path (or a parent
    of it) is mounted from /etc/fstab before the service starts; when that mount fails, the service never starts."""
    source, inner, good, bad = tmp_path / "source", tmp_path / "inner", tmp_path / "good", tmp_path / "bad"
    for directory in (source, source / "data", inner, good, bad):
        directory.mkdir()
    (inner / "mark").write_text("")
    a_file = tmp_path / "a-file"
    a_file.write_text("")
    fstab = tmp_path / "fstab"
    fstab.write_text(  # a mount inside another (listed first: parents are mounted first all the same); a file bound
        # onto a directory: that mount fails
        f"{inner} {good}/data none bind,_netdev,nofail 0 0\n{source} {good} none bind,_netdev,nofail 0 0\n"
        f"{a_file} {bad} none bind,_netdev,nofail 0 0\n"
    )
    seen, started = tmp_path / "seen", tmp_path / "started"
    units.unit(
        "needs-good.service",
        f"[Unit]\nRequiresMountsFor={good}/data\n[Service]\nType=oneshot\n"
        f"ExecStart=/bin/sh -c 'mountpoint -q {good} && test -e {good}/data/mark && echo mounted > {seen}'\n",
    )
    units.unit(
        "needs-bad.service",
        f"[Unit]\nRequiresMountsFor={bad}\n[Service]\nType=oneshot\nExecStart=/bin/sh -c 'echo started > {started}'\n",
    )
    units.systemctl("start", "needs-good.service", fstab=fstab)
    assert seen.read_text() == "mounted\n"
    failed = units.systemctl("start", "needs-bad.service", fstab=fstab, check=False)
    assert failed.returncode != 0 and f"a dependency failed: {bad} " in failed.stderr, failed.stderr
    assert not started.exists()
    assert subprocess.run(["mountpoint", "-q", str(good)]).returncode != 0  # mounted in the stand-in's namespace only
