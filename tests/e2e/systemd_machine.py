"""A real systemd as PID 1 of a machine for tests of what only systemd itself can show (dependencies, ordering).

The image root's own systemd (Debian 13's 257) runs as PID 1 of new PID, mount, UTS, IPC and network namespaces over
an overlay of the image root, so the cached root is never written: ../shared/reference/systemd-in-a-namespace.md,
measured in docs/local-cloud.md ("A real systemd here?"). Always its own network namespace (a systemd sharing the
host's once removed the host's addresses), and its own cgroup namespace rooted at a cgroup of its own, which `stop`
removes (else systemd builds its slices at the root of the host's cgroup2 hierarchy and leaves them there). The machine has no systemctl stand-in (an AMI has none): `run` reaches
the real systemctl through `nsenter`. Stopping it is killing its PID 1: the kernel ends the rest of the namespace.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import signal
import subprocess
import time
from pathlib import Path

SYSTEM_STATES = ("running", "degraded")  # degraded: units a container cannot run (rpc_pipefs, modules-load) failed


class SystemdMachine:
    """One machine: `start(prepare)` boots it (`prepare`: shell run on its root, $R, before systemd starts), `run`
    runs a command inside it, `stop` ends it."""

    def __init__(self, image_root: Path, scratch: Path) -> None:
        self.image_root = image_root
        self.scratch = scratch
        self.process: subprocess.Popen[bytes] | None = None
        self.init_pid = 0
        hierarchy = next(  # the host's cgroup2 hierarchy (membership only here: no controllers), if mounted
            (
                Path(f.split()[1])
                for f in Path("/proc/self/mounts").read_text().splitlines()
                if f.split()[2] == "cgroup2"
            ),
            None,
        )
        self.cgroup = hierarchy / "elastic-slurm-machines" / f"{os.getpid()}-{id(self)}" if hierarchy else None

    def start(self, prepare: str = "", timeout: float = 60) -> None:
        merged, upper, work = (self.scratch / name for name in ("merged", "upper", "work"))
        for directory in (merged, upper, work):
            directory.mkdir(parents=True)
        lower = str(self.image_root)
        script = "\n".join(
            [
                "set -e",
                f"R={shlex.quote(str(merged))}",
                f'mount -t overlay overlay -o lowerdir={lower},upperdir={upper},workdir={work} "$R"',
                'mount -t proc proc "$R/proc"; mount -t sysfs -o ro sysfs "$R/sys"',
                'mount -t cgroup2 none "$R/sys/fs/cgroup"',
                'mount -t tmpfs -o mode=755 tmpfs "$R/run"; mount -t tmpfs tmpfs "$R/tmp"; mount --rbind /dev "$R/dev"',
                'rm -f "$R/usr/local/sbin/systemctl"',  # the local cloud's stand-in: this machine has the real one
                prepare,
                'exec chroot "$R" /usr/bin/env -i container=other /usr/lib/systemd/systemd',
            ]
        )
        log = open(self.scratch / "machine.log", "wb")  # noqa: SIM115 - the machine's console, kept for its life
        unshare = ["unshare", "--fork", "--pid", "--mount", "--uts", "--ipc", "--net", "--propagation", "private"]
        enter = ""
        if self.cgroup is not None:  # systemd builds its cgroups below this one, not at the host hierarchy's root
            self.cgroup.mkdir(parents=True)
            enter = f"echo $$ > {shlex.quote(str(self.cgroup))}/cgroup.procs && "
            unshare.insert(1, "--cgroup")
        self.process = subprocess.Popen(
            ["/bin/bash", "-c", f'{enter}exec "$@"', "machine", *unshare, "/bin/bash", "-c", script],
            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
        )  # fmt: skip
        log.close()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise AssertionError(f"the machine ended at boot: {(self.scratch / 'machine.log').read_text()[-800:]}")
            children = Path(f"/proc/{self.process.pid}/task/{self.process.pid}/children")
            self.init_pid = int(children.read_text().split()[0]) if children.exists() and children.read_text() else 0
            if self.init_pid and self._state() in SYSTEM_STATES:
                return
            time.sleep(0.2)
        raise AssertionError(f"systemd did not come up within {timeout:.0f} s (state {self._state()!r})")

    def _state(self) -> str:
        done = self.run("systemctl", "is-system-running", check=False)
        return done.stdout.strip()

    def run(self, *argv: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        """`argv` inside the machine (its mount and PID namespaces and root), with systemd's PATH."""
        command = ["nsenter", "-t", str(self.init_pid), "-m", "-p", "-r", "-w",
                   "/usr/bin/env", "-i", "PATH=/usr/sbin:/usr/bin:/sbin:/bin", *argv]  # fmt: skip
        done = subprocess.run(command, capture_output=True, text=True, timeout=120)
        if check:
            assert done.returncode == 0, f"{' '.join(argv)}: exit {done.returncode}: {done.stdout}{done.stderr}"
        return done

    def show(self, unit: str, prop: str) -> str:
        return self.run("systemctl", "show", "--value", "-p", prop, unit).stdout.strip()

    def stop(self) -> None:
        if self.init_pid:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.init_pid, signal.SIGKILL)
        if self.process is not None:
            self.process.wait(timeout=30)
        if self.cgroup is not None and self.cgroup.is_dir():  # what systemd made below it, deepest first
            deadline = time.monotonic() + 10
            for directory in sorted((d for d in self.cgroup.rglob("*") if d.is_dir()), key=lambda d: -len(d.parts)):
                while True:
                    try:
                        directory.rmdir()
                        break
                    except OSError:  # its last process is still exiting
                        if time.monotonic() > deadline:
                            raise
                        time.sleep(0.1)
            self.cgroup.rmdir()
