"""Run a command inside the Slurm root as one emulated machine sees it: the image's files plus that machine's mounts.

Every process of the local cloud that is Slurm's or the plugin's (munged, slurmdbd, slurmctld and its ResumeProgram,
each instance's bootstrap and slurmd, the Slurm clients the tests and the demo run) starts through `argv()`:

    unshare --mount --propagation private -- sh -c '<mount /proc /dev /sys and the binds>; exec chroot --userspec ...'

so each gets a private mount namespace (its mounts vanish with it; nothing to unmount) over the shared, read-only-used
root built by localcloud.image.slurm_root. A view binds the project source at /opt/elastic-slurm/src and, per machine, the
host directories that stand in for that machine's disks and for the shared file system. `unshare` and `chroot` exec,
so the PID the caller gets is the daemon's own.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field
from pathlib import Path

from localcloud.image.slurm_root import SRC_IN_ROOT
from localcloud.layout import REPO_ROOT

ROOT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


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


def _script(view: View) -> str:
    root = shlex.quote(str(view.root))
    lines = ["set -e", f"r={root}"]
    if view.hostname:
        lines.append(f"hostname {shlex.quote(view.hostname)}")
    for fs in ("proc", "dev", "sys"):
        lines.append(f'mount --rbind /{fs} "$r/{fs}"')
    for host, inside in ((str(REPO_ROOT), SRC_IN_ROOT), *view.binds):
        target = '"$r"' + shlex.quote(inside)
        # a file is bound onto a file (e.g. /etc/hosts), a directory onto a directory
        make = f"mkdir -p {target}" if not Path(host).is_file() else f"[ -e {target} ] || touch {target}"
        lines.append(f"{make}; mount --bind {shlex.quote(host)} {target}")
    lines.append('exec "$@"')
    return "; ".join(lines)


def argv(view: View, command: list[str], as_user: User | None = None, cwd: str | None = None) -> list[str]:
    """The host command line that runs `command` inside `view` (as `as_user`, default root; in `cwd`)."""
    chroot = ["chroot"]
    if as_user is not None:
        chroot.append(f"--userspec={as_user.uid}:{as_user.gid}")
    chroot.append(str(view.root))
    inner = command
    if cwd is not None:
        # chroot starts in /; cd inside the root (through sh, which every root has) before exec
        inner = ["/bin/sh", "-c", 'cd "$0" && exec "$@"', cwd, *command]
    return [
        "unshare",
        "--mount",
        *(["--uts"] if view.hostname else []),
        "--propagation",
        "private",
        "--",
        "/bin/sh",
        "-c",
        _script(view),
        "enter-root",
        *chroot,
        *inner,
    ]


def user_env(u: User, extra: dict[str, str] | None = None) -> dict[str, str]:
    """A clean login-like environment for `u` inside the root."""
    env = {"PATH": ROOT_PATH, "HOME": u.home, "USER": u.name, "LOGNAME": u.name, "LANG": "C.UTF-8"}
    env.update(extra or {})
    return env
