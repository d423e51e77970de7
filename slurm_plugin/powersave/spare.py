"""Spare workers: a resume worker already started, its imports done and its EC2 clients made, waiting for a request.

A fresh worker spends ~0.5-1 s before its first EC2 call (interpreter, boto3, pydantic, clients): a second of every
cold start. So ResumeProgram's foreground hands its request to a waiting spare when there is one; with none it starts
the worker itself, as before. The next spare is started by the process that serves the request (the claimed spare,
or the worker the foreground started), after the foreground has returned: the foreground forks nothing when a spare
waits (issue 33: starting the next spare there put 9 of 32 returns over the 100 ms budget). A claimed spare forks its
successor before it serves (`fork_successor`: ready in milliseconds, no second of imports), unless the plugin on disk
changed since it started (an upgrade: then a fresh interpreter). Each spare serves one request and then exits, so no
state carries from one request to the next: the successor is a copy of the spare from before its request.

The protocol, all in `<state_dir>/spares/` (only SlurmUser writes there):
- a spare makes the FIFO `<pid>.fifo`, opens it read-write (a writer never blocks on it, and it never reads EOF) and
  waits up to IDLE_SECONDS for one line: the request directory;
- the foreground claims a spare by renaming its FIFO to `<pid>.claimed` (one rename wins), then writes the line
  (shorter than PIPE_BUF: one atomic write). A FIFO whose spare died has no reader: the open fails (ENXIO), the FIFO is
  removed and the next one tried;
- an idle spare withdraws by renaming its FIFO to `<pid>.idle`; if that rename fails it was just claimed, and it
  serves the request. It then re-executes itself (fresh code after an upgrade), unless the manifest is gone.

This module's foreground half imports only the standard library's light modules (the ResumeProgram budget, see
background.py).
"""

from __future__ import annotations

import contextlib
import errno
import os
import select
import socket
import sys
import threading
from collections.abc import Callable

IDLE_SECONDS = 900.0
SPARES = "spares"


def spares_dir(state_dir: str) -> str:
    """This host's waiting room: a FIFO connects processes of one host only, and two controllers share the state
    dir (state.plugin_state_dir), where the other host's FIFOs would answer ENXIO and be taken for stale ones."""
    return os.path.join(state_dir, SPARES, socket.gethostname())


def hand_to_spare(directory: str, request_dir: str) -> int | None:
    """Give `request_dir` to a waiting spare in `directory`; its pid, or None when no spare took it."""
    try:
        names = sorted(n for n in os.listdir(directory) if n.endswith(".fifo"))
    except FileNotFoundError:
        return None
    for name in names:
        fifo = os.path.join(directory, name)
        claimed = fifo[: -len(".fifo")] + ".claimed"
        try:
            os.rename(fifo, claimed)
        except FileNotFoundError:
            continue  # another foreground claimed it, or it withdrew
        try:
            fd = os.open(claimed, os.O_WRONLY | os.O_NONBLOCK)
        except OSError as exc:
            if exc.errno in (errno.ENXIO, errno.ENOENT):  # its spare is gone
                _remove(claimed)
                continue
            raise
        try:
            os.write(fd, (request_dir + "\n").encode())
        finally:
            os.close(fd)
        return int(name[: -len(".fifo")])
    return None


def waiting(directory: str) -> int:
    """How many spares wait in `directory`: unclaimed FIFOs with a reader. A FIFO whose spare is gone (killed with
    slurmctld's cgroup, or before a reboot: the state dir persists) has none; it is removed and not counted."""
    try:
        names = [n for n in os.listdir(directory) if n.endswith(".fifo")]
    except FileNotFoundError:
        return 0
    alive = 0
    for name in names:
        path = os.path.join(directory, name)
        try:
            os.close(os.open(path, os.O_WRONLY | os.O_NONBLOCK))  # opening writes nothing: the spare sees nothing
            alive += 1
        except OSError as exc:
            if exc.errno == errno.ENXIO:
                _remove(path)
    return alive


def spawn(module: str, manifest_path: str, log_path: str) -> int:
    """Start a detached spare of `module` (`python -m module --spare MANIFEST`); its pid."""
    from slurm_plugin.powersave.background import start_detached

    return start_detached([sys.executable, "-m", module, "--spare", manifest_path], log_path)


Fingerprint = tuple[tuple[str, int, int], ...]


def _stat(path: str) -> tuple[str, int, int]:
    try:
        status = os.stat(path)
    except OSError:
        return (path, -1, -1)  # gone: an upgrade removed it
    return (path, status.st_mtime_ns, status.st_size)


def code_fingerprint() -> Fingerprint:
    """The plugin's loaded modules as (file, mtime, size): what a plugin upgrade (install-plugin.sh) changes."""
    files = sorted(
        str(module.__file__)
        for name, module in list(sys.modules.items())
        if (name == "slurm_plugin" or name.startswith("slurm_plugin.")) and getattr(module, "__file__", None)
    )
    return tuple(_stat(path) for path in files)


def code_changed(since: Fingerprint) -> bool:
    """Whether a file of `since` changed on disk (the same files stat'ed again: a module imported later is no
    change)."""
    return any(_stat(entry[0]) != entry for entry in since)


def fork_successor(run: Callable[[], int]) -> int | None:
    """Fork the next spare from this one before it serves its request: the child, in a session of its own, runs
    `run` (serve the next request) with the imports and EC2 clients already made, and nothing of this request's
    work (the fork comes first). Forking costs milliseconds where a new interpreter costs ~0.8 CPU-seconds of
    imports and a second before the next request finds a spare. None (the caller spawns one instead) when this
    process runs a second thread: a fork copies only the calling thread, and a lock another thread held stays held
    in the child."""
    if threading.active_count() > 1:
        return None
    pid = os.fork()
    if pid:
        return pid
    code = 1
    try:  # whatever happens, the child never returns into its parent's stack
        os.setsid()
        code = run()
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    except BaseException:
        import traceback

        traceback.print_exc()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def _remove(path: str) -> None:
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)


def _read_line(fd: int, timeout: float) -> str | None:
    """One line from the FIFO within `timeout` seconds; None on timeout."""
    data = b""
    while not data.endswith(b"\n"):
        ready, _, _ = select.select([fd], [], [], timeout)
        if not ready:
            return None
        chunk = os.read(fd, 4096)
        if not chunk:
            return None
        data += chunk
    return data.decode().strip()


def serve(
    directory: str,
    handle: Callable[[str], int],
    still_wanted: Callable[[], bool],
    on_claimed: Callable[[], object] | None = None,
) -> int:
    """The spare's life: wait for one request, call `on_claimed()` (start the next spare: the foreground that claimed
    this one has already returned to slurmctld) and `handle` it (exit code), or withdraw after IDLE_SECONDS and
    re-exec itself while `still_wanted()`; 0 when it withdrew for good."""
    os.makedirs(directory, exist_ok=True)
    pid = os.getpid()
    fifo = os.path.join(directory, f"{pid}.fifo")
    claimed = os.path.join(directory, f"{pid}.claimed")
    idle = os.path.join(directory, f"{pid}.idle")
    new = os.path.join(directory, f"{pid}.new")
    _remove(new)
    os.mkfifo(new, 0o600)
    fd = os.open(new, os.O_RDWR)  # open before it is visible: no foreground can claim a FIFO nobody reads yet
    os.replace(new, fifo)  # the inode stays open through the renames
    try:
        line = _read_line(fd, IDLE_SECONDS)
        if line is None:
            try:
                os.rename(fifo, idle)
            except FileNotFoundError:
                line = _read_line(fd, 10.0)  # claimed at the last moment: its line is on the way
        if line is None:
            _remove(idle)
            os.close(fd)
            if still_wanted():
                os.execv(sys.executable, [sys.executable, *sys.orig_argv[1:]])
            return 0
    finally:
        _remove(claimed)
    os.close(fd)
    if on_claimed is not None:
        try:
            on_claimed()
        except OSError as exc:  # no successor: the next ResumeProgram starts a worker of its own (and a spare)
            print(f"spare {pid}: next spare not started: {exc}", file=sys.stderr)
    return handle(line)
