"""slurm_plugin/bootwatch.py: the controller's one boot watch that wakes the waiting prologs (pure parts, one round
against a fake Slurm, and the choice between single-node and whole-table questions with a recording `sinfo`)."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Sequence
from pathlib import Path

import pytest

from localcloud.services import procs
from slurm_plugin import bootwatch


def test_states_and_booting() -> None:
    text = (
        "cpu-1   allocated+cloud+powering_up \ncpu-2   IDLE+CLOUD+POWERED_DOWN\ncpu-3 mixed+cloud\ncpu-3 mixed+cloud\n"
    )
    states = bootwatch.parse_states(text)
    assert states == {
        "cpu-1": "allocated+cloud+powering_up",
        "cpu-2": "idle+cloud+powered_down",
        "cpu-3": "mixed+cloud",
    }
    assert [bootwatch.booting(states[n]) for n in ("cpu-1", "cpu-2", "cpu-3")] == [True, True, False]
    assert bootwatch.booting("")  # unknown: still waiting


def test_a_job_is_up_only_when_every_node_is() -> None:
    waits = {"7": ["a", "b"], "8": ["c"], "9": ["d"]}
    states = {"a": "allocated+cloud", "b": "allocated+cloud+powering_up", "c": "allocated"}
    assert bootwatch.jobs_up(waits, states) == ["8"]  # d unknown: not up


class Prolog:
    """A waiting prolog as the boot watch sees it: its wait file and the FIFO it holds open (reader and writer, as
    the real one's `exec {fd}<>`); `words()` reads what the boot watch wrote."""

    def __init__(self, directory: Path, job: str, nodes: str) -> None:
        self.fifo = directory / "wait" / f"{job}.fifo"
        os.mkfifo(self.fifo, 0o600)
        self.fd = os.open(self.fifo, os.O_RDWR | os.O_NONBLOCK)
        (directory / "wait" / job).write_text(nodes)

    def words(self) -> list[str]:
        try:
            return os.read(self.fd, 4096).decode().split()
        except BlockingIOError:
            return []

    def gone(self) -> None:
        """Killed (e.g. by slurmctld on scancel): its files stay, nobody reads the FIFO."""
        os.close(self.fd)


def _dir(tmp_path: Path, waits: dict[str, str]) -> tuple[Path, dict[str, Prolog]]:
    (tmp_path / "wait").mkdir(exist_ok=True)
    return tmp_path, {job: Prolog(tmp_path, job, nodes) for job, nodes in waits.items()}


class FakeSlurm:
    """A Query that records what it was asked and answers from `states`; `jobs()` answers the CONFIGURING jobs."""

    def __init__(self, states: dict[str, str], configuring: set[str] | None = None) -> None:
        self.states = states
        self.asked: list[list[str]] = []
        self.configuring = configuring
        self.job_calls = 0

    def __call__(self, nodes: Sequence[str]) -> dict[str, str]:
        self.asked.append(list(nodes))
        return {n: self.states[n] for n in nodes if n in self.states}

    def jobs(self) -> set[str] | None:
        self.job_calls += 1
        return self.configuring


def _round(watch: bootwatch.Watch, directory: Path, slurm: FakeSlurm, now: float) -> bootwatch.Round:
    return watch.one_round(directory, slurm, slurm.jobs, now, time.time())


def test_one_round_wakes_jobs_whose_nodes_are_up_and_asks_only_waited_nodes(tmp_path: Path) -> None:
    directory, prologs = _dir(tmp_path, {"7": "a\nb\n", "8": "c\n"})
    slurm = FakeSlurm({"a": "allocated+cloud", "b": "allocated+cloud", "c": "allocated+cloud+powering_up"}, {"7", "8"})
    watch = bootwatch.Watch()
    done = _round(watch, directory, slurm, 100.0)
    assert (done.up, done.asked) == (["7"], 3) and slurm.asked == [["a", "b", "c"]]
    assert prologs["7"].words() == ["up"] and prologs["8"].words() == []
    assert int((directory / "heartbeat").read_text()) == pytest.approx(time.time(), abs=2)
    assert _round(watch, directory, slurm, 100.05).asked == 0  # c is not due yet: nothing asked
    done = _round(watch, directory, slurm, 100.2)
    assert (done.up, done.asked) == ([], 1) and slurm.asked[-1] == ["c"]  # job 7 is done: only c asked again
    assert prologs["7"].words() == []  # woken once: its wait file (until the prolog removes it) is not a new wait


def test_jobs_no_longer_configuring_are_told_to_stop_with_one_question_every_job_gap(tmp_path: Path) -> None:
    directory, prologs = _dir(tmp_path, {"7": "a\n", "8": "b\n"})
    slurm = FakeSlurm(dict.fromkeys("ab", "idle+cloud+powered_down"), configuring={"8"})
    watch = bootwatch.Watch()
    t = 10.0
    stopped = []
    while t < 10.0 + 3 * bootwatch.JOB_GAP:
        stopped += _round(watch, directory, slurm, t).stopped
        t = round(t + bootwatch.INTERVAL, 3)
    assert stopped == ["7"] and prologs["7"].words() == ["stop"] and prologs["8"].words() == []
    assert slurm.job_calls == 3  # one job-state question for all waiting jobs every JOB_GAP, not one per job


def test_a_slurm_that_does_not_answer_about_jobs_stops_nobody(tmp_path: Path) -> None:
    directory, prologs = _dir(tmp_path, {"7": "a\n"})
    slurm = FakeSlurm({"a": "idle+cloud+powered_down"}, configuring=None)
    assert _round(bootwatch.Watch(), directory, slurm, 1.0).stopped == []
    assert prologs["7"].words() == []


def test_each_node_is_looked_at_less_often_the_longer_it_boots() -> None:
    schedule = bootwatch.Schedule()
    looks = 0
    t = 0.0
    while t < 60.0:  # a 60 s EC2 boot, rounds every 0.1 s
        if schedule.due(["n"], t):
            schedule.looked(["n"], t)
            looks += 1
        t = round(t + bootwatch.INTERVAL, 3)
    assert 60 <= looks <= 130  # not 600: a look every twentieth of the wait so far, at most every MAX_GAP


def test_many_due_nodes_are_read_with_one_whole_table_question(tmp_path: Path) -> None:
    nodes = [f"n{i}" for i in range(bootwatch.SINGLE_LIMIT + 1)]
    directory, _ = _dir(tmp_path, {"9": "\n".join(nodes)})
    slurm = FakeSlurm(dict.fromkeys(nodes, "allocated+cloud"), {"9"})
    done = _round(bootwatch.Watch(), directory, slurm, 1.0)
    assert (done.up, done.asked) == (["9"], len(nodes))
    assert slurm.asked == [sorted(nodes)]  # one query for all (sinfo_query makes it one whole-table call)


def _whole_table_reads(tmp_path: Path, count: int, seconds: float) -> int:
    nodes = [f"n{i}" for i in range(count)]
    directory, _ = _dir(tmp_path, {"9": "\n".join(nodes)})
    slurm = FakeSlurm(dict.fromkeys(nodes, "idle+cloud+powered_down"), {"9"})
    watch = bootwatch.Watch()
    t = 1.0
    while t < 1.0 + seconds:  # rounds every INTERVAL, every node due at each (they boot for a long time)
        _round(watch, directory, slurm, t)
        t = round(t + bootwatch.INTERVAL, 3)
    return len(slurm.asked)


def test_whole_table_reads_are_at_least_wide_min_apart(tmp_path: Path) -> None:
    assert 1 <= _whole_table_reads(tmp_path, bootwatch.SINGLE_LIMIT + 1, 2.0) <= 2.0 / bootwatch.WIDE_MIN + 1


def test_a_big_wait_reads_the_whole_table_ever_less_often(tmp_path: Path) -> None:
    # 10,000 waited nodes: the old watch read the whole table every 0.5 s (60 reads in 30 s); now every 5 s
    assert bootwatch.wide_gap(10_000) == bootwatch.WIDE_MAX and bootwatch.wide_gap(10) == bootwatch.WIDE_MIN
    assert _whole_table_reads(tmp_path, 10_000, 30.0) <= 30.0 / bootwatch.WIDE_MAX + 1


def test_the_wait_directory_is_read_only_when_it_changes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    directory, _ = _dir(tmp_path, {"7": "a\n"})
    slurm = FakeSlurm({"a": "idle+cloud+powered_down"}, {"7"})
    scans = []
    real = os.scandir
    monkeypatch.setattr(bootwatch.os, "scandir", lambda path: scans.append(path) or real(path))
    watch = bootwatch.Watch()
    for i in range(10):  # one second of rounds, nothing changes in the directory
        _round(watch, directory, slurm, 1.0 + i * bootwatch.INTERVAL)
    assert len(scans) == 1
    Prolog(directory, "8", "a\n")  # a new waiter: listed at the next round
    _round(watch, directory, slurm, 2.1)
    assert len(scans) == 2 and set(watch.waits) == {"7", "8"}


def test_a_killed_prolog_s_files_are_removed_at_the_next_job_check(tmp_path: Path) -> None:
    directory, prologs = _dir(tmp_path, {"7": "a\n", "8": "b\n"})
    prologs["7"].gone()
    slurm = FakeSlurm({"a": "idle+cloud+powered_down", "b": "idle+cloud+powered_down"}, {"7", "8"})
    _round(bootwatch.Watch(), directory, slurm, 1.0)
    assert sorted(os.listdir(directory / "wait")) == ["8", "8.fifo"]
    assert slurm.asked == [["b"]]


def test_a_woken_job_that_waits_again_under_the_same_id_is_a_new_wait(tmp_path: Path) -> None:
    directory, prologs = _dir(tmp_path, {"7": "a\n"})
    slurm = FakeSlurm({"a": "allocated+cloud"}, {"7"})
    watch = bootwatch.Watch()
    assert _round(watch, directory, slurm, 1.0).up == ["7"]
    for name in ("7", "7.fifo"):  # the prolog ends; the job is requeued and a new prolog waits for it
        (directory / "wait" / name).unlink()
    prologs["7"].gone()
    slurm.states["a"] = "allocated+cloud+powering_up"
    time.sleep(0.05)  # a requeued job waits again seconds later at the earliest: a new file, with a new mtime
    again = Prolog(directory, "7", "a\n")
    assert _round(watch, directory, slurm, 1.2).up == [] and "7" in watch.waits
    slurm.states["a"] = "allocated+cloud"
    assert _round(watch, directory, slurm, 1.4).up == ["7"] and again.words() == ["up"]


def test_a_new_waiter_does_not_trust_a_state_seen_before_it_came(tmp_path: Path) -> None:
    directory, _ = _dir(tmp_path, {"7": "a\n"})
    slurm = FakeSlurm({"a": "allocated+cloud"}, {"7", "8"})
    watch = bootwatch.Watch()
    assert _round(watch, directory, slurm, 1.0).up == ["7"]
    (directory / "wait" / "7").unlink()
    Prolog(directory, "8", "a\n")  # the same node, waited for by another job
    slurm.states["a"] = "allocated+cloud+powered_down"
    assert _round(watch, directory, slurm, 1.01).up == []  # asked again at once, not up


def test_without_waiting_jobs_slurm_is_not_asked(tmp_path: Path) -> None:
    directory, _ = _dir(tmp_path, {})

    def query(nodes: Sequence[str]) -> dict[str, str]:
        raise AssertionError("asked Slurm about nodes with nobody waiting")

    def jobs() -> set[str] | None:
        raise AssertionError("asked Slurm about jobs with nobody waiting")

    assert bootwatch.Watch().one_round(directory, query, jobs, 1.0, time.time()) == bootwatch.Round()
    assert (directory / "heartbeat").exists()


def _recording_sinfo(tmp_path: Path) -> Path:
    bindir = tmp_path / "bin"
    bindir.mkdir()
    script = bindir / "sinfo"
    script.write_text(
        f'#!/bin/sh\necho "$*" >> {tmp_path / "calls"}\n'
        'node=""; while [ $# -gt 0 ]; do [ "$1" = -n ] && node=$2; shift; done\n'
        'if [ -n "$node" ]; then echo "$node allocated+cloud"; exit 0; fi\n'
        'for n in $(seq 1 20); do echo "cpu-$n allocated+cloud"; done\n'
    )
    script.chmod(0o755)
    return bindir


def test_a_few_nodes_are_asked_one_by_one_and_many_with_one_whole_table_question(tmp_path: Path) -> None:
    query = bootwatch.sinfo_query(str(_recording_sinfo(tmp_path)), {"PATH": "/usr/bin:/bin"})
    few = [f"cpu-{n}" for n in range(1, bootwatch.SINGLE_LIMIT + 1)]
    assert set(query(few)) == set(few)
    calls = (tmp_path / "calls").read_text().splitlines()
    assert len(calls) == len(few) and all(" -n cpu-" in c for c in calls)
    many = [f"cpu-{n}" for n in range(1, 16)]
    (tmp_path / "calls").unlink()
    assert set(query(many)) == set(many)
    (call,) = (tmp_path / "calls").read_text().splitlines()
    assert " -n " not in call


def test_job_ids_from_squeue_and_the_light_rpc_with_its_fallback(tmp_path: Path) -> None:
    assert bootwatch.parse_job_ids("  12\n13 extra\nJOBID\n\n") == {"12", "13"}
    bindir = tmp_path / "bin"
    bindir.mkdir()
    squeue = bindir / "squeue"
    squeue.write_text(
        f'#!/bin/sh\necho "$*" >> {tmp_path / "calls"}\n'
        'case "$*" in *only-job-state*) echo "squeue: unrecognized option --only-job-state" >&2; exit 1;; esac\n'
        "echo 41; echo 42\n"
    )
    squeue.chmod(0o755)
    query = bootwatch.squeue_query(str(bindir), {"PATH": "/usr/bin:/bin"})
    assert query() == {"41", "42"} and query() == {"41", "42"}
    calls = (tmp_path / "calls").read_text().splitlines()
    assert calls[0].startswith("--only-job-state -h -t CONFIGURING") and len(calls) == 3  # refused once, then plain
    squeue.write_text("#!/bin/sh\nexit 1\n")
    assert query() is None


def test_a_wait_file_holds_the_job_s_hostlist(tmp_path: Path) -> None:
    directory, prologs = _dir(tmp_path, {"7": "cpu-a-[1-3]\n"})
    slurm = FakeSlurm(dict.fromkeys(["cpu-a-1", "cpu-a-2", "cpu-a-3"], "allocated+cloud"), {"7"})
    watch = bootwatch.Watch()
    assert _round(watch, directory, slurm, 1.0).up == ["7"] and slurm.asked == [["cpu-a-1", "cpu-a-2", "cpu-a-3"]]
    assert prologs["7"].words() == ["up"]
    Prolog(directory, "8", "cpu-a-[1-\n")  # not a hostlist: not followed, nothing asked
    assert _round(watch, directory, slurm, 2.0).asked == 0 and "8" not in watch.waits


def test_the_heartbeat_thread_beats_through_a_slow_round_and_stops_when_rounds_stop(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(bootwatch, "HEARTBEAT_GAP", 0.05)
    monkeypatch.setattr(bootwatch, "STUCK_AFTER", 30.0)
    heartbeat = tmp_path / "heartbeat"
    pulse = bootwatch.Pulse(tmp_path)
    thread = threading.Thread(target=pulse.run)
    thread.start()
    try:
        # a round that started a moment ago and is still waiting for Slurm: beat after beat
        assert procs.wait_until(heartbeat.exists, 10, 0.02)
        heartbeat.unlink()
        assert procs.wait_until(heartbeat.exists, 10, 0.02)
        # no round for longer than STUCK_AFTER: a stuck watch lets it go stale (a beat that was under way when the
        # round went stale may still land once: gone for good within a few tries)
        pulse.last_round -= 60

        def stays_gone() -> bool:
            heartbeat.unlink(missing_ok=True)
            time.sleep(0.3)
            return not heartbeat.exists()

        assert procs.wait_until(stays_gone, 10, 0.0)
    finally:
        pulse.stop.set()
        thread.join()


def test_a_fifo_the_watch_cannot_write_counts_as_no_reader_instead_of_stopping_the_round(tmp_path: Path) -> None:
    """Any error opening a job's FIFO (here EISDIR: a directory in its place; EACCES for a FIFO root made by hand)
    means no prolog to wake: the job is forgotten, the other jobs still get their word."""
    (tmp_path / "wait" / f"77{bootwatch.FIFO}").mkdir(parents=True)
    assert bootwatch.signal(tmp_path, "77", "up") is False
