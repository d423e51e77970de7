"""slurm_plugin/powersave/spare.py: the hand-off of a resume request to a waiting spare worker, with real processes
and FIFOs."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
import types
from pathlib import Path

import pytest

from slurm_plugin.powersave import spare

SPARE = """
import sys
from pathlib import Path
from slurm_plugin.powersave import spare
spare.IDLE_SECONDS = float(sys.argv[3])
def handle(line):
    Path(sys.argv[2]).write_text(line)
    return 7
sys.exit(spare.serve(sys.argv[1], handle, lambda: False))
"""


def _start(tmp_path: Path, idle: float = 30.0) -> subprocess.Popen[bytes]:
    waiting_room = tmp_path / "spares"
    proc = subprocess.Popen([sys.executable, "-c", SPARE, str(waiting_room), str(tmp_path / "got"), str(idle)])
    deadline = time.time() + 20
    while spare.waiting(str(waiting_room)) == 0:
        assert time.time() < deadline and proc.poll() is None, "the spare never started waiting"
        time.sleep(0.02)
    return proc


def test_a_waiting_spare_takes_the_request_serves_it_once_and_leaves_nothing(tmp_path: Path) -> None:
    proc = _start(tmp_path)
    waiting_room = str(tmp_path / "spares")
    assert spare.hand_to_spare(waiting_room, "/state/requests/r1") == proc.pid
    assert proc.wait(timeout=20) == 7  # the handler's exit code
    assert (tmp_path / "got").read_text() == "/state/requests/r1"
    assert os.listdir(waiting_room) == []
    assert spare.hand_to_spare(waiting_room, "/state/requests/r2") is None  # served one request only


def test_without_a_spare_nobody_takes_it(tmp_path: Path) -> None:
    assert spare.hand_to_spare(str(tmp_path / "missing"), "/x") is None
    (tmp_path / "empty").mkdir()
    assert spare.hand_to_spare(str(tmp_path / "empty"), "/x") is None


def test_the_fifo_of_a_dead_spare_is_removed_and_skipped(tmp_path: Path) -> None:
    waiting_room = tmp_path / "spares"
    waiting_room.mkdir()
    os.mkfifo(waiting_room / "999999.fifo")  # nobody reads it
    assert spare.hand_to_spare(str(waiting_room), "/x") is None
    assert os.listdir(waiting_room) == []


def test_an_idle_spare_withdraws_and_cannot_be_claimed_after(tmp_path: Path) -> None:
    proc = _start(tmp_path, idle=0.5)
    assert proc.wait(timeout=20) == 0  # withdrew; not wanted again (still_wanted is False)
    assert os.listdir(tmp_path / "spares") == []
    assert not (tmp_path / "got").exists()
    assert spare.hand_to_spare(str(tmp_path / "spares"), "/x") is None


def test_foregrounds_claiming_at_once_never_give_one_spare_two_requests(tmp_path: Path) -> None:
    proc = _start(tmp_path)
    waiting_room = str(tmp_path / "spares")
    start = threading.Barrier(8)
    taken: dict[str, int | None] = {}

    def claim(request: str) -> None:
        start.wait()
        taken[request] = spare.hand_to_spare(waiting_room, request)

    threads = [threading.Thread(target=claim, args=(f"/r/{i}",)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    winners = [request for request, pid in taken.items() if pid is not None]
    assert len(winners) == 1 and taken[winners[0]] == proc.pid
    proc.wait(timeout=20)
    assert (tmp_path / "got").read_text() == winners[0]


def test_a_dead_spares_fifo_is_not_counted_as_waiting_and_is_removed(tmp_path: Path) -> None:
    proc = _start(tmp_path)
    waiting_room = str(tmp_path / "spares")
    assert spare.waiting(waiting_room) == 1
    proc.kill()  # e.g. slurmctld's cgroup killed, or a reboot: its FIFO stays in the state dir
    proc.wait(timeout=20)
    assert spare.waiting(waiting_room) == 0
    assert os.listdir(waiting_room) == []


FORK = """
import os, sys
from slurm_plugin.powersave import spare
def run():
    with open(sys.argv[1], "w") as seen:
        seen.write(f"{os.getpid()} {os.getsid(0)}")
    return 5
pid = spare.fork_successor(run)
_, status = os.waitpid(pid, 0)
print(pid, os.waitstatus_to_exitcode(status))
"""


def test_a_forked_successor_runs_in_a_session_of_its_own_and_exits_with_its_code(tmp_path: Path) -> None:
    seen = tmp_path / "seen"
    # in a process of its own, single-threaded as a spare is (a test process may run threads of other tests)
    done = subprocess.run([sys.executable, "-c", FORK, str(seen)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    pid, code = done.stdout.split()
    assert code == "5"
    assert seen.read_text() == f"{pid} {pid}"  # the successor leads a new session, as a spawned spare does


def test_no_fork_while_a_second_thread_runs(tmp_path: Path) -> None:
    stop = threading.Event()
    other = threading.Thread(target=stop.wait)
    other.start()
    try:
        assert spare.fork_successor(lambda: 0) is None  # the caller starts a fresh interpreter instead
    finally:
        stop.set()
        other.join()


def test_the_code_fingerprint_changes_when_a_loaded_plugin_module_changes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    probe = tmp_path / "probe.py"
    probe.write_text("X = 1\n")
    module = types.ModuleType("slurm_plugin._fingerprint_probe")
    module.__file__ = str(probe)
    monkeypatch.setitem(sys.modules, module.__name__, module)
    before = spare.code_fingerprint()
    assert (str(probe), probe.stat().st_mtime_ns, 6) in before
    assert not spare.code_changed(before)
    later = types.ModuleType("slurm_plugin._imported_later")
    later.__file__ = str(tmp_path / "later.py")
    monkeypatch.setitem(sys.modules, later.__name__, later)
    assert not spare.code_changed(before)  # a module imported since is not a change of the code
    probe.write_text("X = 22\n")  # an upgrade rewrites the file: another size (and mtime)
    assert spare.code_changed(before)
    now = spare.code_fingerprint()
    assert not spare.code_changed(now)
    probe.unlink()  # an upgrade removed a loaded module: a change too
    assert spare.code_changed(now)
