"""The console entry points as slurmctld runs them: bad input is refused in one line; good input reaches EC2.

These run `python -m slurm_plugin.powersave.resume|suspend` as subprocesses. Slurm is a recording stand-in `scontrol`
script here (real scontrol runs in the local cloud e2e tests).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from localcloud.aws.emulated_aws import EmulatedAws
from slurm_plugin.manifest import Manifest, write_manifest
from tests.aws.plugin_env import live_instances

ENTRY_POINTS = {
    "slurm-resume": ["-m", "slurm_plugin.powersave.resume"],
    "slurm-suspend": ["-m", "slurm_plugin.powersave.suspend"],
    "slurm-resume-fail": [
        "-c",
        "import sys; from slurm_plugin.powersave.suspend import resume_fail_main as m; sys.exit(m())",
    ],
}


def _run(
    entry: str, hostlist: str, manifest_file: Path, extra_env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "ELASTIC_SLURM_MANIFEST": str(manifest_file), **(extra_env or {})}
    return subprocess.run(
        [sys.executable, *ENTRY_POINTS[entry], hostlist],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        cwd=Path(__file__).resolve().parents[2],
    )


@pytest.fixture
def deployed(manifest: Manifest, tmp_path: Path) -> tuple[Manifest, Path, Path]:
    """The manifest written to disk, pointing at a recording scontrol; returns (manifest, file, scontrol log)."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    calls = tmp_path / "scontrol.calls"
    script = bindir / "scontrol"
    script.write_text(f'#!/bin/sh\necho "$@" >> {calls}\nexit 0\n', encoding="utf-8")
    script.chmod(0o755)
    final = manifest.model_copy(update={"slurm_bin_dir": str(bindir)})
    path = tmp_path / "manifest.json"
    write_manifest(final, path)
    return final, path, calls


BAD_HOSTLISTS = [
    ("", "hostlist: missing"),
    ("cpu-c7i-[1-", "bad hostlist"),
    ("cpu-c7i-[3-1]", "bad hostlist"),
    ("nosuch-1", "unknown nodes nosuch-1"),
    ("cpu-c7i-0", "unknown nodes cpu-c7i-0"),
    ("cpu-c7i-[1-2],cpu-c7i-5000", "unknown nodes cpu-c7i-5000"),
]


@pytest.mark.parametrize("entry", sorted(ENTRY_POINTS))
@pytest.mark.parametrize(("hostlist", "message"), BAD_HOSTLISTS)
def test_bad_hostlist_is_refused_in_one_line_and_nothing_is_touched(
    entry: str, hostlist: str, message: str, deployed: tuple[Manifest, Path, Path]
) -> None:
    manifest, path, calls = deployed
    done = _run(entry, hostlist, path)
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and message in lines[0] and "Traceback" not in done.stderr
    assert not (Path(manifest.state_dir) / "requests").exists()
    assert not calls.exists()


@pytest.mark.parametrize("entry", sorted(ENTRY_POINTS))
@pytest.mark.parametrize(
    ("content", "message"),
    [(None, "cannot read"), ("{not json", "not valid JSON"), ('{"pools": []}', "missing field state_dir")],
)
def test_missing_or_corrupt_manifest_is_refused_in_one_line(
    entry: str, content: str | None, message: str, tmp_path: Path
) -> None:
    path = tmp_path / "manifest.json"
    if content is not None:
        path.write_text(content, encoding="utf-8")
    done = _run(entry, "cpu-c7i-1", path)
    assert done.returncode == 1
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and message in lines[0] and "manifest" in lines[0]


def _wait(predicate: object, what: str, limit: float = 90.0) -> None:
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        if predicate():  # type: ignore[operator]
            return
        time.sleep(0.3)
    raise AssertionError(f"timed out waiting for {what}")


def test_resume_then_suspend_through_the_entry_points(aws: EmulatedAws, deployed: tuple[Manifest, Path, Path]) -> None:
    manifest, path, calls = deployed
    resume_file = path.parent / "resume.json"
    resume_file.write_text(
        json.dumps({"all_nodes_resume": "cpu-c7i-[1-3]", "jobs": [{"job_id": 7, "nodes_alloc": "cpu-c7i-[1-3]"}]}),
        encoding="utf-8",
    )
    done = _run("slurm-resume", "cpu-c7i-[1-3]", path, {"SLURM_RESUME_FILE": str(resume_file)})
    assert done.returncode == 0, done.stderr
    requests = Path(manifest.state_dir) / "requests"
    _wait(lambda: requests.exists() and not any(requests.iterdir()), "the resume worker to finish")
    assert len(live_instances(aws, manifest.cluster)) == 3
    update = calls.read_text(encoding="utf-8").splitlines()[0]
    assert update.startswith("update nodename=cpu-c7i-1,cpu-c7i-2,cpu-c7i-3 nodeaddr=")
    done = _run("slurm-suspend", "cpu-c7i-[1-3]", path)
    assert done.returncode == 0, done.stderr
    _wait(lambda: not any(requests.iterdir()), "the suspend worker to finish")
    assert live_instances(aws, manifest.cluster) == []
    log = Path(manifest.log_file).read_text(encoding="utf-8")
    assert "terminated 3 instances in us-east-1" in log


def test_a_manifest_of_another_schema_version_fails_resume_loudly_and_powers_the_nodes_down(
    deployed: tuple[Manifest, Path, Path],
) -> None:
    manifest, path, calls = deployed
    data = json.loads(path.read_text(encoding="utf-8"))
    path.write_text(json.dumps({**data, "schema_version": 99}), encoding="utf-8")
    done = _run("slurm-resume", "cpu-c7i-[1-2]", path)
    assert done.returncode == 1  # slurmctld logs the failed ResumeProgram
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "schema_version 99 is not supported" in lines[0] and "nodes powered down" in lines[0]
    update = calls.read_text(encoding="utf-8").splitlines()
    assert len(update) == 1 and "nodename=cpu-c7i-[1-2] state=POWER_DOWN_FORCE reason=(Code:ManifestError)" in update[0]
    assert not (Path(manifest.state_dir) / "requests").exists()
