"""Run programs of the local cloud's Slurm root (the default release) from tests that start their own daemons.

The tests that check rendered files against the real slurmctld/scontrol use the same Slurm the local cloud and the
image run, not the host's: `in_root(argv, *dirs)` is the host command line running `argv` inside the root with the
given host directories bound at the same path (localcloud.instances.enter).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from localcloud.image import slurm_root
from localcloud.instances import enter


def available() -> bool:
    """True when tests can run Slurm from a root: the root user. The root itself is waited for, or built, before
    each such test starts (`needs_root`, tests/conftest.py)."""
    return os.geteuid() == 0


SKIP_REASON = "needs root (mount namespaces, chroot into the Slurm root)"


TESTS_DIR = Path(__file__).resolve().parent
_ROOTS: dict[str, str | None] = {}  # per process: release -> None once built, or the line of its failed build


def needs_root(item: pytest.Item) -> str | None:
    """The Slurm release whose root `item` runs programs of: the e2e tests' (tests/e2e/, or marked e2e) and those
    marked `slurm_root` (`pytest.mark.slurm_root("24.11")` names another release); None for the others."""
    marker = item.get_closest_marker("slurm_root")
    if marker is not None:
        return str(marker.args[0]) if marker.args else slurm_root.DEFAULT_SLURM
    if item.get_closest_marker("e2e") is not None or Path(item.path).resolve().parent == TESTS_DIR / "e2e":
        return slurm_root.DEFAULT_SLURM
    return None


def wait_for_root(major: str) -> None:
    """Return once the root of `major` is built — at once when cached, after the build in progress (scripts/test.sh
    builds the roots while the tests that need none run), or after building it here — or once its build failed
    (`root_failure` then says why; the tests do not build again: `make setup` retries). Without root, nothing to
    wait for: those tests skip."""
    if not available() or (major in _ROOTS and _ROOTS[major] is None):
        return
    try:
        slurm_root.build(major, retry_failed=False)
        _ROOTS[major] = None
    except Exception as exc:  # a failed build is the tests' failure, never the session's crash
        _ROOTS[major] = str(exc) or type(exc).__name__


def root_failure(major: str) -> str | None:
    """Why the root of `major` is missing after `wait_for_root`, None when it is built (or was not asked for)."""
    return _ROOTS.get(major)


def in_root(argv: list[str], *dirs: Path | str) -> list[str]:
    """`argv` run as root inside the default release's root, with `dirs` bound at their own paths."""
    view = enter.View(slurm_root.root_path()).with_binds(*enter.same_path(*dirs))
    return enter.argv(view, argv)


def root_env(**extra: str) -> dict[str, str]:
    """A clean environment for root inside the root, plus `extra`."""
    return enter.user_env(enter.user(slurm_root.root_path(), "root"), extra)


def stop(proc: subprocess.Popen[bytes]) -> None:
    """Stop a daemon the test started (SIGTERM, SIGKILL after 20 s)."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@pytest.fixture(scope="module")
def munge_socket() -> Iterator[Path]:
    """A munged of the root with its own key and socket under /var/tmp (munged wants every directory above its
    socket searchable by all: pytest's tmp dirs are 0700); stopped by PID at the end of the module."""
    root = Path(tempfile.mkdtemp(prefix="elastic-slurm-munge-", dir="/var/tmp"))
    root.chmod(0o755)
    key = root / "munge.key"
    key.write_bytes(os.urandom(1024))
    key.chmod(0o600)
    sock = root / "munge.socket"
    argv = [
        "/usr/sbin/munged",
        "--foreground",
        f"--socket={sock}",
        f"--key-file={key}",
        f"--pid-file={root / 'munged.pid'}",
        f"--seed-file={root / 'munged.seed'}",
        f"--log-file={root / 'munged.log'}",
    ]
    proc = subprocess.Popen(
        in_root(argv, root), env=root_env(), stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT, start_new_session=True
    )
    try:
        deadline = time.monotonic() + 20
        while not sock.exists() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.2)
        assert sock.exists() and proc.poll() is None, "munged died"
        yield sock
    finally:
        stop(proc)
        shutil.rmtree(root, ignore_errors=True)
