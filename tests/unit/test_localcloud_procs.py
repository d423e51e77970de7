"""Stopping an emulated instance touches only processes that prove they belong to it."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from localcloud.instances.instance_runner import instance_markers, stop_instance_processes
from localcloud.services import procs

# One shell in a new session starts two sleepers: one carries the instance's marker, the other does not.
_SCRIPT = "ELASTIC_SLURM_INSTANCE_ID=i-test sleep 300 & sleep 300 & wait"


@pytest.fixture
def session() -> Iterator[subprocess.Popen[bytes]]:
    env = {k: v for k, v in os.environ.items() if k not in ("ELASTIC_SLURM_INSTANCE_ID", "ELASTIC_SLURM_LOCAL_CLOUD")}
    proc = subprocess.Popen(["/bin/sh", "-c", _SCRIPT], start_new_session=True, env=env)
    assert procs.wait_until(lambda: len(_sleepers(proc.pid)) == 2, 10)
    yield proc
    procs.kill_all(procs.pids_in_session(proc.pid))
    proc.wait(timeout=10)


def _sleepers(sid: int) -> list[int]:
    return [p for p in procs.pids_in_session(sid) if procs.cmdline(p).startswith("sleep")]


def test_session_of_is_the_real_session_id() -> None:
    assert procs.session_of(os.getpid()) == os.getsid(0)


def test_sessions_zero_and_one_are_never_listed() -> None:
    assert procs.pids_in_session(0) == [] and procs.pids_in_session(1) == []


def test_only_marked_processes_of_the_session_are_stopped(session: subprocess.Popen[bytes]) -> None:
    markers = instance_markers("i-test", Path("/nonexistent/local-cloud"))
    stop_instance_processes(session.pid, "", markers)
    left = _sleepers(session.pid)
    assert len(left) == 1
    assert not procs.environ_has(left[0], markers)


def test_no_markers_means_nothing_is_stopped(session: subprocess.Popen[bytes]) -> None:
    stop_instance_processes(session.pid, "", [])
    assert len(_sleepers(session.pid)) == 2


def test_the_host_time_namespace_is_never_a_target() -> None:
    assert procs.pids_in_time_namespace(procs.HOST_TIME_NS) == []


def test_job_root_strips_array_and_hetjob_suffixes() -> None:
    from localcloud.ops import job_root

    assert [job_root(j) for j in ("12", "12_3", "12+1", "12_[1-4]")] == ["12", "12", "12", "12"]


def test_a_daemon_whose_name_is_not_in_its_command_line_is_stopped_by_the_clouds_environment_marker(
    tmp_path: Path,
) -> None:
    # a console script of the 26.05 root runs as `python3 -c "...exporter..."`: no `slurm-exporter` in its cmdline
    env = {**os.environ, "ELASTIC_SLURM_LOCAL_CLOUD": str(tmp_path)}
    proc = subprocess.Popen(["sleep", "300"], start_new_session=True, env=env)
    pid_file = tmp_path / "exporter.pid"
    try:
        # Popen returns once exec has begun, but /proc/PID/environ and cmdline read empty until the kernel has laid
        # out the new program's stack: on a busy machine the checks below could run in that window
        assert procs.wait_until(lambda: procs.cmdline(proc.pid) == "sleep 300", 30, 0.05)
        pid_file.write_text(f"{proc.pid}\n")
        other = f"ELASTIC_SLURM_LOCAL_CLOUD={tmp_path}-other".encode()
        assert not procs.stop_pid_file(pid_file, "slurm-exporter", 5, env_marker=other)  # not that cloud's
        assert proc.poll() is None
        pid_file.write_text(f"{proc.pid}\n")
        ours = f"ELASTIC_SLURM_LOCAL_CLOUD={tmp_path}".encode()
        assert procs.stop_pid_file(pid_file, "slurm-exporter", 5, env_marker=ours)
        assert proc.wait(timeout=10) is not None and not pid_file.exists()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)
