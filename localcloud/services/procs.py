"""Start and stop the local cloud's background processes by PID, never by name.

A daemon is started in its own session (setsid) with stdout/stderr to a log file and its PID recorded in a PID
file. It is only ever signalled after checking that /proc/PID/cmdline still names the program we started, so a
recycled PID is never hit.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

HOST_TIME_NS = os.readlink("/proc/self/ns/time") if os.path.exists("/proc/self/ns/time") else ""


def cmdline(pid: int) -> str:
    """The process's command line joined with spaces ('' if it is gone)."""
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return ""
    return raw.replace(b"\0", b" ").decode(errors="replace").strip()


def running(pid: int) -> bool:
    """True when `pid` exists and is not a zombie (it may be in its exit still)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[-1].split()[0] != "Z"


def is_ours(pid: int, marker: str) -> bool:
    """True when `pid` is alive, not a zombie, and its command line contains `marker`."""
    return pid > 1 and running(pid) and marker in cmdline(pid)


def read_pid(path: Path) -> int | None:
    """The PID in a PID file, or None."""
    try:
        text = path.read_text().strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None


def spawn(
    argv: Sequence[str],
    log_path: Path,
    pid_file: Path | None = None,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
) -> subprocess.Popen[bytes]:
    """Start `argv` in a new session, output appended to `log_path`; write its PID to `pid_file` if given."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with open(log_path, "ab") as out:
        proc = subprocess.Popen(
            list(argv),
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            env=dict(env) if env is not None else None,
            cwd=str(cwd) if cwd else None,
            start_new_session=True,
        )
    if pid_file is not None:
        pid_file.write_text(f"{proc.pid}\n")
    return proc


def wait_until(predicate: Callable[[], bool], timeout: float, interval: float = 0.25) -> bool:
    """Poll `predicate` until it is true or `timeout` seconds pass; returns its last value."""
    deadline = time.monotonic() + timeout
    while True:
        if predicate():
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(interval)


def _gone(pid: int) -> bool:
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)  # reap it if it is our child
    return not is_ours(pid, "")


def stop_pid(pid: int, marker: str, timeout: float = 15.0) -> bool:
    """SIGTERM `pid` if its command line contains `marker`, SIGKILL after `timeout`. True if it was ours."""
    if not is_ours(pid, marker):
        return False
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return True
    if not wait_until(lambda: _gone(pid), timeout, 0.1):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            return True
        wait_until(lambda: _gone(pid), 5.0, 0.1)
    return True


def stop_pid_file(pid_file: Path, marker: str, timeout: float = 15.0, env_marker: bytes | None = None) -> bool:
    """Stop the process named by a PID file (if it is still ours: `marker` in its command line, or `env_marker`, a
    b"KEY=value" entry, in its environment) and remove the file."""
    pid = read_pid(pid_file)
    if pid is not None and env_marker is not None and not is_ours(pid, marker) and environ_has(pid, [env_marker]):
        marker = ""  # e.g. a console script run as `python3 -c ...`: the program's name is not in its command line
    stopped = pid is not None and stop_pid(pid, marker, timeout)
    pid_file.unlink(missing_ok=True)
    return stopped


def time_namespace(pid: int) -> str:
    """The time namespace id of `pid` ('' if gone)."""
    try:
        return os.readlink(f"/proc/{pid}/ns/time")
    except OSError:
        return ""


def time_namespace_for_children(pid: int) -> str:
    """The time namespace `pid`'s future children get ('' if gone)."""
    try:
        return os.readlink(f"/proc/{pid}/ns/time_for_children")
    except OSError:
        return ""


def pids_in_time_namespace(namespace: str) -> list[int]:
    """Every process in the time namespace `namespace` (never the host's own)."""
    if not namespace or namespace == HOST_TIME_NS:
        return []
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit() and time_namespace(int(entry)) == namespace:
            found.append(int(entry))
    return found


def session_of(pid: int) -> int | None:
    """The session id of `pid`, or None when gone."""
    try:
        return os.getsid(pid)
    except (ProcessLookupError, PermissionError):
        return None


def pids_in_session(sid: int) -> list[int]:
    """Every process whose session id is `sid` (never sessions 0/1: those are the kernel's and init's)."""
    if sid <= 1:
        return []
    return [int(e) for e in os.listdir("/proc") if e.isdigit() and session_of(int(e)) == sid]


def environ_has(pid: int, needles: Sequence[bytes]) -> bool:
    """True when one of `needles` (e.g. b"KEY=value") is an entry of the process's environment or in its cmdline."""
    try:
        entries = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    except OSError:
        return False
    line = cmdline(pid).encode()
    return any(needle in entries or needle in line for needle in needles)


def kill_all(pids: Sequence[int], sig: int = signal.SIGKILL) -> None:
    """Send `sig` to each pid, ignoring the ones already gone."""
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, sig)


def vanish(pids: Sequence[int]) -> None:
    """End processes the way a machine that vanishes ends them: freeze all first (SIGSTOP), then SIGKILL all, so
    none of them sees another die and reports it (a slurmstepd whose job was killed first would report the job
    as failed, where a lost instance must look like a node failure to slurmctld)."""
    kill_all(pids, signal.SIGSTOP)
    kill_all(pids, signal.SIGKILL)
