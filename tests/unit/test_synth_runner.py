"""tests/synth.py runs each synth in a process group of its own: a synth past its time is killed with every process
it started (the CDK CLI's node, the app's Python), and a synth's stdout and stderr stay apart (one-line errors are
checked on stderr)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from localcloud.services import procs
from tests import synth


def test_a_synth_past_its_time_is_killed_with_the_processes_it_started(tmp_path: Path) -> None:
    pid_file = tmp_path / "grandchild"
    process = synth._start(
        ["sh", "-c", f"sleep 300 & echo $! > {pid_file}; wait"], subprocess.DEVNULL, subprocess.DEVNULL
    )
    deadline = time.monotonic() + 30
    while not (pid_file.exists() and pid_file.read_text().strip()) and time.monotonic() < deadline:
        time.sleep(0.05)
    grandchild = int(pid_file.read_text())
    assert os.getpgid(grandchild) == process.pid  # a group of its own, led by the synth
    assert synth._wait_or_stop(process, 0.2) == -9
    deadline = time.monotonic() + 10
    while procs.running(grandchild) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not procs.running(grandchild)


def test_a_finished_synth_returns_its_code_and_keeps_stdout_and_stderr_apart(monkeypatch: pytest.MonkeyPatch) -> None:
    script = "import sys; print('out'); print('err', file=sys.stderr); sys.exit(3)"
    result = synth.run_synth([sys.executable, "-c", script])
    assert (result.returncode, result.stdout, result.stderr) == (3, "out\n", "err\n")
    monkeypatch.setattr(synth, "SYNTH_TIMEOUT", 0.3)
    slow = synth.run_synth([sys.executable, "-c", "import time; time.sleep(300)"])
    assert slow.returncode == -9
