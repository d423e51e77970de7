"""Spare resume workers (slurm_plugin/powersave/spare.py) and PrologSlurmctld's early launch (`slurm-resume --early`),
through the console entry point as slurmctld and the prolog run it, against the emulated EC2 and a recording
stand-in `scontrol` (the local cloud e2e tests run them with real Slurm)."""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from localcloud.aws.emulated_aws import EmulatedAws
from slurm_plugin.manifest import Manifest, write_manifest
from slurm_plugin.powersave import spare, state
from tests.aws.plugin_env import live_instances

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def deployed(manifest: Manifest, tmp_path: Path) -> tuple[Manifest, Path]:
    """The manifest on disk, pointing at a recording scontrol; (manifest, its path)."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    script = bindir / "scontrol"
    script.write_text(f'#!/bin/sh\necho "$@" >> {tmp_path / "scontrol.calls"}\nexit 0\n', encoding="utf-8")
    script.chmod(0o755)
    final = manifest.model_copy(update={"slurm_bin_dir": str(bindir), "node_names_dir": str(tmp_path / "names")})
    path = tmp_path / "manifest.json"
    write_manifest(final, path)
    return final, path


def _program(module: str, manifest_file: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """`python -m slurm_plugin.powersave.<module> ARGS` as slurmctld (or the prolog) runs it."""
    env = {**os.environ, "ELASTIC_SLURM_MANIFEST": str(manifest_file), "SLURM_JOB_ID": "41"}
    return subprocess.run(
        [sys.executable, "-m", f"slurm_plugin.powersave.{module}", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        cwd=REPO,
    )


def _resume(manifest_file: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return _program("resume", manifest_file, *args)


def _wait(predicate: Callable[[], bool], what: str, limit: float = 90.0) -> None:
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


def _idle(manifest: Manifest) -> Callable[[], bool]:
    """No request left (every worker done) and a spare waiting."""
    requests = Path(manifest.state_dir) / "requests"
    room = spare.spares_dir(manifest.state_dir)
    return lambda: not (requests.exists() and any(requests.iterdir())) and spare.waiting(room) == 1


def test_the_next_resume_goes_to_the_waiting_spare_and_a_new_spare_waits(
    aws: EmulatedAws, deployed: tuple[Manifest, Path]
) -> None:
    manifest, path = deployed
    assert _resume(path, "cpu-c7i-1").returncode == 0  # no spare yet: a worker of its own, and a spare started
    _wait(_idle(manifest), "the first worker to finish and a spare to wait")
    (first_spare,) = [int(n.split(".")[0]) for n in os.listdir(spare.spares_dir(manifest.state_dir))]
    assert _resume(path, "cpu-c7i-2").returncode == 0
    _wait(_idle(manifest), "the spare to serve the request and a new spare to wait")
    log = Path(manifest.log_file).read_text(encoding="utf-8")
    assert f"slurm-resume of 1 nodes handed to worker pid {first_spare}" in log
    assert len(live_instances(aws, manifest.cluster)) == 2
    assert set(state.node_map(manifest.state_dir)) == {"cpu-c7i-1", "cpu-c7i-2"}
    # each bound instance names its node for the node's bootstrap (slurm_plugin/powersave/node_names.py)
    names = {p.read_text().strip() for p in Path(manifest.node_names_dir or "").iterdir()}
    assert names == {"cpu-c7i-1", "cpu-c7i-2"}


def test_each_claimed_spare_forks_the_next_and_the_forked_ones_serve(
    aws: EmulatedAws, deployed: tuple[Manifest, Path]
) -> None:
    manifest, path = deployed
    room = spare.spares_dir(manifest.state_dir)
    assert _resume(path, "cpu-c7i-1").returncode == 0  # no spare yet: a worker, which starts a spare (interpreter)
    served = []
    for node in ("cpu-c7i-2", "cpu-c7i-3", "cpu-c7i-4"):
        _wait(_idle(manifest), "the previous request served and a spare waiting")
        (waiting,) = [int(n.split(".")[0]) for n in os.listdir(room)]
        assert _resume(path, node).returncode == 0
        served.append(waiting)
    _wait(_idle(manifest), "the last request served and a spare waiting")
    log = Path(manifest.log_file).read_text(encoding="utf-8")
    for claimed, successor in itertools.pairwise(served):
        assert f"spare {claimed}: claimed; next spare {successor} forked" in log  # the next request's spare
    assert len(live_instances(aws, manifest.cluster)) == 4
    assert set(state.node_map(manifest.state_dir)) == {f"cpu-c7i-{i}" for i in range(1, 5)}


def test_an_early_launch_without_a_waiting_spare_does_nothing(
    aws: EmulatedAws, deployed: tuple[Manifest, Path]
) -> None:
    manifest, path = deployed
    done = _resume(path, "--early", "cpu-c7i-1")
    assert done.returncode == 0, done.stderr
    assert "no spare worker waiting, nothing done" in Path(manifest.log_file).read_text(encoding="utf-8")
    requests = Path(manifest.state_dir) / "requests"
    assert not (requests.exists() and any(requests.iterdir()))
    assert live_instances(aws, manifest.cluster) == []
    assert spare.waiting(spare.spares_dir(manifest.state_dir)) == 0  # the prolog starts no process of its own


def test_an_early_launch_then_resume_program_gives_each_node_one_instance(
    aws: EmulatedAws, deployed: tuple[Manifest, Path]
) -> None:
    manifest, path = deployed
    assert _resume(path, "cpu-c7i-9").returncode == 0
    _wait(_idle(manifest), "a spare to wait")
    # the prolog hands the job's nodes to the spare, then slurmctld's power-save thread calls ResumeProgram for them
    early = _resume(path, "--early", "cpu-c7i-[1-2]")
    assert early.returncode == 0, early.stderr
    resume_file = path.parent / "resume.json"
    resume_file.write_text(json.dumps({"jobs": [{"job_id": 41, "nodes_alloc": "cpu-c7i-[1-2]"}]}), encoding="utf-8")
    env = {"SLURM_RESUME_FILE": str(resume_file)}
    late = subprocess.run(
        [sys.executable, "-m", "slurm_plugin.powersave.resume", "cpu-c7i-[1-2]"],
        env={**os.environ, "ELASTIC_SLURM_MANIFEST": str(path), **env},
        capture_output=True,
        text=True,
        timeout=60,
        cwd=REPO,
    )
    assert late.returncode == 0, late.stderr
    requests = Path(manifest.state_dir) / "requests"
    _wait(lambda: not any(requests.iterdir()), "both workers to finish")
    bound = state.node_map(manifest.state_dir)
    assert {n: e["instance_id"] for n, e in bound.items() if n != "cpu-c7i-9"}.keys() == {"cpu-c7i-1", "cpu-c7i-2"}
    live = live_instances(aws, manifest.cluster)
    assert len(live) == 3  # one per node: nodes 1 and 2 launched once, by whichever worker came first
    assert {i["InstanceId"] for i in live} == {e["instance_id"] for e in bound.values()}
    log = Path(manifest.log_file).read_text(encoding="utf-8")
    assert "slurm-resume --early of 2 nodes handed to worker pid" in log


def test_prime_starts_one_spare_and_no_second(deployed: tuple[Manifest, Path]) -> None:
    manifest, path = deployed
    room = spare.spares_dir(manifest.state_dir)
    assert _resume(path, "--prime").returncode == 0
    _wait(lambda: spare.waiting(room) == 1, "the primed spare to wait")
    assert _resume(path, "--prime").returncode == 0  # the controller's config apply runs it again on every sync
    time.sleep(2)  # a second spare would have made its FIFO by now
    assert spare.waiting(room) == 1


def test_a_suspend_goes_to_the_waiting_spare_which_terminates_the_instance(
    aws: EmulatedAws, deployed: tuple[Manifest, Path]
) -> None:
    manifest, path = deployed
    room = spare.spares_dir(manifest.state_dir)
    assert _resume(path, "cpu-c7i-1").returncode == 0
    _wait(_idle(manifest), "the resume served and a spare waiting")
    (waiting,) = [int(n.split(".")[0]) for n in os.listdir(room)]
    done = _program("suspend", path, "cpu-c7i-1")
    assert done.returncode == 0, done.stderr
    _wait(lambda: live_instances(aws, manifest.cluster) == [], "the instance to be terminated")
    _wait(_idle(manifest), "the suspend served and the next spare waiting")
    log = Path(manifest.log_file).read_text(encoding="utf-8")
    assert f"slurm-suspend of 1 nodes handed to worker pid {waiting}" in log  # the spare, not a new interpreter
    assert "cpu-c7i-1" not in state.node_map(manifest.state_dir)
