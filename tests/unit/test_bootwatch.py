"""slurm_plugin/bootwatch.py: the controller's one boot watch that wakes the waiting prologs (pure parts, one round
against a fake Slurm, and the choice between single-node and whole-table questions with a recording `sinfo`)."""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from pathlib import Path

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


def _dir(tmp_path: Path, waits: dict[str, str]) -> Path:
    (tmp_path / "wait").mkdir()
    for job, nodes in waits.items():
        (tmp_path / "wait" / job).write_text(nodes)
    return tmp_path


class FakeSlurm:
    """A Query that records what it was asked and answers from `states`."""

    def __init__(self, states: dict[str, str]) -> None:
        self.states = states
        self.asked: list[list[str]] = []

    def __call__(self, nodes: Sequence[str]) -> dict[str, str]:
        self.asked.append(list(nodes))
        return {n: self.states[n] for n in nodes if n in self.states}


def test_one_round_writes_up_files_asks_only_waited_nodes_and_cleans_up(tmp_path: Path) -> None:
    directory = _dir(tmp_path, {"7": "a\nb\n", "8": "c\n"})
    (directory / "up").mkdir()
    (directory / "up" / "5").touch()  # a job no longer waiting
    slurm = FakeSlurm({"a": "allocated+cloud", "b": "allocated+cloud", "c": "allocated+cloud+powering_up"})
    watch = bootwatch.Watch()
    now = time.time()
    assert watch.one_round(directory, slurm, 100.0, now) == (["7"], 3)
    assert sorted(os.listdir(directory / "up")) == ["7"] and slurm.asked == [["a", "b", "c"]]
    assert (directory / "heartbeat").exists()
    assert watch.one_round(directory, slurm, 100.05, now) == ([], 0)  # c is not due yet: nothing asked
    assert watch.one_round(directory, slurm, 100.2, now) == ([], 1)  # job 7 is up: only c asked again
    assert slurm.asked[-1] == ["c"]


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
    directory = _dir(tmp_path, {"9": "\n".join(nodes)})
    slurm = FakeSlurm(dict.fromkeys(nodes, "allocated+cloud"))
    assert bootwatch.Watch().one_round(directory, slurm, 1.0, time.time()) == (["9"], len(nodes))
    assert slurm.asked == [sorted(nodes)]  # one query for all (sinfo_query makes it one whole-table call)


def test_whole_table_reads_are_at_least_wide_gap_apart(tmp_path: Path) -> None:
    nodes = [f"n{i}" for i in range(bootwatch.SINGLE_LIMIT + 1)]
    directory = _dir(tmp_path, {"9": "\n".join(nodes)})
    slurm = FakeSlurm(dict.fromkeys(nodes, "idle+cloud+powered_down"))
    watch = bootwatch.Watch()
    t = 1.0
    while t < 3.0:  # 2 s of rounds every INTERVAL, every node due at each (they boot for a long time)
        watch.one_round(directory, slurm, t, time.time())
        t = round(t + bootwatch.INTERVAL, 3)
    assert 1 <= len(slurm.asked) <= 2.0 / bootwatch.WIDE_GAP + 1


def test_a_stale_wait_file_and_its_up_file_are_removed_and_not_watched(tmp_path: Path) -> None:
    directory = _dir(tmp_path, {"7": "a\n", "8": "b\n"})
    (directory / "up").mkdir()
    (directory / "up" / "7").touch()
    old = time.time() - bootwatch.STALE_SECONDS - 5
    os.utime(directory / "wait" / "7", (old, old))  # its prolog was killed (scancel): never rewritten again
    slurm = FakeSlurm({"b": "idle+cloud+powered_down"})
    bootwatch.Watch().one_round(directory, slurm, 1.0, time.time())
    assert os.listdir(directory / "wait") == ["8"] and os.listdir(directory / "up") == []
    assert slurm.asked == [["b"]]


def test_a_new_waiter_does_not_trust_a_state_seen_before_it_came(tmp_path: Path) -> None:
    directory = _dir(tmp_path, {"7": "a\n"})
    slurm = FakeSlurm({"a": "allocated+cloud"})
    watch = bootwatch.Watch()
    assert watch.one_round(directory, slurm, 1.0, time.time())[0] == ["7"]
    (directory / "wait" / "7").unlink()
    (directory / "wait" / "8").write_text("a\n")  # the same node, waited for by another job
    slurm.states["a"] = "allocated+cloud+powered_down"
    assert watch.one_round(directory, slurm, 1.01, time.time())[0] == []  # asked again at once, not up


def test_without_waiting_jobs_slurm_is_not_asked(tmp_path: Path) -> None:
    directory = _dir(tmp_path, {})

    def query(nodes: Sequence[str]) -> dict[str, str]:
        raise AssertionError("asked Slurm with nobody waiting")

    assert bootwatch.Watch().one_round(directory, query, 1.0, time.time()) == ([], 0)
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
