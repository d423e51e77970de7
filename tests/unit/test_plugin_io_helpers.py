"""Small pure helpers of the power-save plugin: resume file parsing, scontrol output, cool-down state, node checks."""

from __future__ import annotations

from pathlib import Path

import pytest

from slurm_plugin.powersave import capacity, state
from slurm_plugin.powersave.background import unknown_nodes
from slurm_plugin.powersave.resume import job_groups
from slurm_plugin.powersave.slurm import Scontrol, parse_show_nodes


def test_resume_file_jobs_become_node_groups_preferring_nodes_resume() -> None:
    data = {
        "all_nodes_resume": "cpu-c7i-[1-5]",
        "jobs": [
            {"job_id": 1, "nodes_alloc": "cpu-c7i-[1-4]", "nodes_resume": "cpu-c7i-[1-3]"},
            {"job_id": 2, "nodes_alloc": "cpu-c7i-5"},
            {"job_id": 3},
            {"job_id": 4, "nodes_alloc": "cpu-c7i-[1-"},
            "garbage",
        ],
    }
    assert job_groups(data) == [["cpu-c7i-1", "cpu-c7i-2", "cpu-c7i-3"], ["cpu-c7i-5"]]


@pytest.mark.parametrize("data", [None, [], {"jobs": "x"}, {"jobs": [1, 2]}])
def test_malformed_resume_file_gives_no_groups(data: object) -> None:
    assert job_groups(data) == []


def test_show_nodes_output_is_parsed_per_line() -> None:
    text = (
        "NodeName=cpu-c7i-1 Arch=x86_64 CoresPerSocket=1 NodeAddr=127.16.0.5 NodeHostName=cpu-c7i-1 "
        "State=ALLOCATED+CLOUD Reason=none at all\n"
        "NodeName=cpu-c7i-2 NodeAddr=cpu-c7i-2 NodeHostName=cpu-c7i-2 State=IDLE+CLOUD+POWERED_DOWN\n"
    )
    nodes = parse_show_nodes(text)
    assert nodes["cpu-c7i-1"].addr == "127.16.0.5"
    assert nodes["cpu-c7i-2"].state == "IDLE+CLOUD+POWERED_DOWN"


def test_only_unexpired_cooldowns_are_active() -> None:
    entries = {"cpu-c7i|us-east-1a": 200.0, "cpu-c7i|us-east-1b": 50.0, "junk": 999, "gpu-g5|us-east-1a": "x"}
    assert capacity.active(entries, now=100.0) == [("cpu-c7i", "us-east-1a")]


def test_cooldown_state_round_trips_and_expires(tmp_path: Path) -> None:
    capacity.add_cooling(tmp_path, [("cpu-c7i", "us-east-1a")], now=1000.0, seconds=60)
    assert capacity.load_cooling(tmp_path, 1030.0) == [("cpu-c7i", "us-east-1a")]
    assert capacity.load_cooling(tmp_path, 1061.0) == []


def test_a_claim_held_by_a_live_request_makes_the_node_busy(tmp_path: Path) -> None:
    assert state.claim(tmp_path, ["a-1", "a-2"], "r1") == (["a-1", "a-2"], [])
    assert state.claim(tmp_path, ["a-2", "a-3"], "r2") == (["a-3"], ["a-2"])
    state.release(tmp_path, ["a-1", "a-2"], "r1")
    assert state.claim(tmp_path, ["a-2"], "r2") == (["a-2"], [])


def test_corrupt_state_file_reads_as_empty(tmp_path: Path) -> None:
    (tmp_path / state.CLAIMS_FILE).write_text("{not json", encoding="utf-8")
    assert state.claim(tmp_path, ["a-1"], "r1") == (["a-1"], [])


MANIFEST = {"pools": [{"node_prefix": "cpu-c7i-", "max_nodes": 10}, {"node_prefix": "gpu-g5-", "max_nodes": 2}]}


@pytest.mark.parametrize(
    ("names", "bad"),
    [
        (["cpu-c7i-1", "cpu-c7i-10", "gpu-g5-2"], []),
        (
            ["cpu-c7i-11", "cpu-c7i-0", "cpu-c7i-01", "gpu-g5-", "other-1"],
            ["cpu-c7i-11", "cpu-c7i-0", "cpu-c7i-01", "gpu-g5-", "other-1"],
        ),
    ],
)
def test_foreground_node_check_matches_the_manifest_pools(names: list[str], bad: list[str]) -> None:
    assert unknown_nodes(MANIFEST, names) == bad


def test_scontrol_adapter_batches_updates_and_passes_the_reason(tmp_path: Path) -> None:
    calls = tmp_path / "calls"
    script = tmp_path / "scontrol"
    script.write_text(f'#!/bin/sh\nprintf "%s|" "$@" >> {calls}\necho >> {calls}\n', encoding="utf-8")
    script.chmod(0o755)
    adapter = Scontrol(str(tmp_path))
    adapter.set_addresses({f"n-{i}": f"127.16.0.{i}" for i in range(1, 502)})
    adapter.power_down(["n-1"], "(Code:InsufficientInstanceCapacity) no capacity")
    lines = calls.read_text(encoding="utf-8").splitlines()
    assert len(lines) == 3
    assert lines[0].startswith("update|nodename=n-1,n-2,") and "|nodeaddr=127.16.0.1,127.16.0.2," in lines[0]
    assert lines[1] == "update|nodename=n-501|nodeaddr=127.16.0.501|nodehostname=n-501|"
    assert (
        lines[2] == "update|nodename=n-1|state=POWER_DOWN_FORCE|reason=(Code:InsufficientInstanceCapacity) no capacity|"
    )


def test_scontrol_resumes_with_state_idle_and_repeats_a_power_down_without_force_or_reason(tmp_path: Path) -> None:
    """RESUME of a DOWN node sets NOT_RESPONDING until it registers (Slurm's node_mgr.c `_require_node_reg`); IDLE
    clears DOWN/DRAIN/FAIL without it. The repeated power-down is a plain POWER_DOWN: no job is requeued."""
    calls = tmp_path / "calls"
    script = tmp_path / "scontrol"
    script.write_text(f'#!/bin/sh\nprintf "%s|" "$@" >> {calls}\necho >> {calls}\n', encoding="utf-8")
    script.chmod(0o755)
    adapter = Scontrol(str(tmp_path))
    adapter.resume(["n-1", "n-2"])
    adapter.power_down_again(["n-3"])
    assert calls.read_text(encoding="utf-8").splitlines() == [
        "update|nodename=n-1,n-2|state=IDLE|",
        "update|nodename=n-3|state=POWER_DOWN|",
    ]
