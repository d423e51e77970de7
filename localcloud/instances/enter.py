"""Run a command inside the Slurm root as one emulated machine sees it: the image's files plus that machine's mounts.

Every process of the local cloud that is Slurm's or the plugin's (munged, slurmdbd, slurmctld and its ResumeProgram,
each instance's bootstrap and slurmd, the Slurm clients the tests and the demo run) starts through `argv()`:

    enter-root [--hostname H] [--userspec UID:GID] [--cwd DIR] ROOT [HOST INSIDE]... -- COMMAND...

(localcloud/native/enter_root.c, compiled once per source by the host's gcc into the root cache): a private mount
namespace (its mounts vanish with it; nothing to unmount) over the shared, read-only-used root built by
localcloud.image.slurm_root, /proc /dev /sys bound into it, then chroot and exec, all in one process, so the PID the
caller gets is the daemon's own. It does what `unshare --mount --propagation private -- sh -c '<mounts>; exec chroot
--userspec ...'` did, without a process per mount (a Slurm client call of the tests cost ~10 processes and 18 ms of
CPU before). A view binds the project source at /opt/elastic-slurm/src and, per machine, the host directories that
stand in for that machine's disks and for the shared file system.
"""

from __future__ import annotations

import functools
import hashlib
import os
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from localcloud.image.slurm_root import ROOT_CACHE, SRC_IN_ROOT
from localcloud.layout import REPO_ROOT

ROOT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
ENTER_ROOT_C = REPO_ROOT / "localcloud" / "native" / "enter_root.c"


@dataclass(frozen=True)
class User:
    """A user of the root (numeric ids, read from the root's /etc/passwd)."""

    name: str
    uid: int
    gid: int
    home: str


def user(root: Path, name: str) -> User:
    """The root's user `name`; KeyError when it has none."""
    for line in (root / "etc" / "passwd").read_text().splitlines():
        fields = line.split(":")
        if fields[0] == name:
            return User(name, int(fields[2]), int(fields[3]), fields[5])
    raise KeyError(f"no user {name} in {root}/etc/passwd")


@dataclass(frozen=True)
class View:
    """One emulated machine: the root plus bind mounts (host path -> path inside)."""

    root: Path
    binds: tuple[tuple[str, str], ...] = field(default_factory=tuple)
    hostname: str | None = None  # the machine's own host name (a UTS namespace), else the host's

    def with_binds(self, *binds: tuple[str | Path, str | Path]) -> View:
        return View(self.root, (*self.binds, *((str(h), str(i)) for h, i in binds)), self.hostname)


def same_path(*paths: str | Path) -> tuple[tuple[str, str], ...]:
    """Binds of host directories at the same path inside the root."""
    return tuple((str(p), str(p)) for p in paths)


@functools.cache
def helper() -> str:
    """The enter-root program of this source: compiled by the host's gcc on first use, cached beside the roots under
    the source's hash (concurrent first uses each compile to a file of their own; the last rename wins)."""
    source = ENTER_ROOT_C.read_bytes()
    path = ROOT_CACHE / f"enter-root-{hashlib.sha256(source).hexdigest()[:16]}"
    if not path.exists():
        ROOT_CACHE.mkdir(parents=True, exist_ok=True)
        scratch = path.with_name(f"{path.name}.{os.getpid()}.tmp")
        built = subprocess.run(
            ["gcc", "-O2", "-Wall", "-Werror", "-o", str(scratch), str(ENTER_ROOT_C)], capture_output=True, text=True
        )
        if built.returncode != 0:
            scratch.unlink(missing_ok=True)
            raise RuntimeError(f"{ENTER_ROOT_C}: gcc failed: {built.stderr.strip()[-500:]}")
        os.replace(scratch, path)
    return str(path)


def argv(view: View, command: list[str], as_user: User | None = None, cwd: str | None = None) -> list[str]:
    """The host command line that runs `command` inside `view` (as `as_user`, default root; in `cwd`, default /)."""
    args = [helper()]
    if view.hostname:
        args += ["--hostname", view.hostname]
    if as_user is not None:
        args += ["--userspec", f"{as_user.uid}:{as_user.gid}"]
    if cwd is not None:
        args += ["--cwd", cwd]
    args.append(str(view.root))
    for host, inside in ((str(REPO_ROOT), SRC_IN_ROOT), *view.binds):
        args += [host, inside]
    return [*args, "--", *command]


def user_env(u: User, extra: dict[str, str] | None = None) -> dict[str, str]:
    """A clean login-like environment for `u` inside the root."""
    env = {"PATH": ROOT_PATH, "HOME": u.home, "USER": u.name, "LOGNAME": u.name, "LANG": "C.UTF-8"}
    env.update(extra or {})
    return env
