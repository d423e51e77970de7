"""assets/slurm/prolog-wait-for-boot.sh, run for real against a scripted `scontrol` that plays node/job states.

The stub scontrol reads its answers from files: `nodes.<n>` is what `show node` prints on its n-th call (the last one
repeats), `job` what `show job` prints. Every run must exit 0 whatever happens (non-zero would requeue the job).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

PROLOG = Path(__file__).parents[2] / "assets" / "slurm" / "prolog-wait-for-boot.sh"
STUB = r"""#!/bin/bash
dir=${0%/*}
echo "$*" >>"$dir/calls"
if [[ $3 == job ]]; then [[ -f $dir/job ]] && cat "$dir/job"; exit 0; fi
n=$(grep -c ' node ' "$dir/calls")
f=$dir/nodes.$n
[[ -f $f ]] || f=$(ls "$dir"/nodes.* | sort -t. -k2 -n | tail -1)
cat "$f"
"""
POWERED_DOWN = "NodeName=cpu-a-1 Arch=x86_64 State=IDLE+CLOUD+POWERED_DOWN ThreadsPerCore=1\n"
POWERING_UP = "NodeName=cpu-a-1 State=ALLOCATED+CLOUD+POWERING_UP ThreadsPerCore=1\n"
UP = "NodeName=cpu-a-1 State=ALLOCATED+CLOUD ThreadsPerCore=1\n"
CONFIGURING = "JobId=7 JobName=x JobState=CONFIGURING Reason=None\n"


@pytest.fixture
def bindir(tmp_path: Path) -> Path:
    bindir = tmp_path / "bin"
    bindir.mkdir()
    stub = bindir / "scontrol"
    stub.write_text(STUB)
    stub.chmod(0o755)
    (bindir / "job").write_text(CONFIGURING)
    return bindir


def _run(prolog: Path, bindir: Path, env_lines: list[str], job: bool = True) -> subprocess.CompletedProcess[str]:
    env_file = bindir.parent / "prolog.env"
    env_file.write_text("\n".join([f"SLURM_BIN_DIR={bindir}", "POLL_INTERVAL=0.05", *env_lines]) + "\n")
    env = {"ELASTIC_SLURM_PROLOG_ENV": str(env_file)}  # like slurmctld: no PATH, no SLURM_CONF
    if job:
        env |= {"SLURM_JOB_ID": "7", "SLURM_JOB_NODELIST": "cpu-a-[1-2]"}
    return subprocess.run(["/bin/bash", str(prolog)], env=env, capture_output=True, text=True, timeout=60)


def _node_calls(bindir: Path) -> int:
    calls = (bindir / "calls").read_text().splitlines() if (bindir / "calls").exists() else []
    return sum(" node " in c for c in calls)


def test_waits_through_powered_down_and_powering_up_then_exits_0(bindir: Path) -> None:
    for i, text in enumerate([POWERED_DOWN, POWERED_DOWN, POWERING_UP, POWERING_UP, UP], start=1):
        (bindir / f"nodes.{i}").write_text(text)
    result = _run(PROLOG, bindir, ["WAIT_LIMIT=30"])
    assert result.returncode == 0
    assert _node_calls(bindir) == 5
    assert "-o show node cpu-a-[1-2]" in (bindir / "calls").read_text()


def test_any_booting_node_keeps_it_waiting(bindir: Path) -> None:
    (bindir / "nodes.1").write_text(UP + POWERING_UP.replace("cpu-a-1", "cpu-a-2"))
    (bindir / "nodes.2").write_text(UP + UP.replace("cpu-a-1", "cpu-a-2"))
    assert _run(PROLOG, bindir, ["WAIT_LIMIT=30"]).returncode == 0
    assert _node_calls(bindir) == 2


def test_nodes_already_up_exit_at_once(bindir: Path) -> None:
    (bindir / "nodes.1").write_text(UP)
    assert _run(PROLOG, bindir, ["WAIT_LIMIT=30"]).returncode == 0
    assert _node_calls(bindir) == 1


def test_stops_waiting_once_the_job_is_no_longer_configuring(bindir: Path) -> None:
    (bindir / "nodes.1").write_text(POWERING_UP)
    (bindir / "job").write_text("JobId=7 JobState=PENDING Reason=BeginTime\n")
    log = bindir.parent / "prolog.log"
    assert _run(PROLOG, bindir, ["WAIT_LIMIT=30", f"PROLOG_LOG={log}"]).returncode == 0
    assert _node_calls(bindir) == 1
    assert "job is PENDING, no longer CONFIGURING" in log.read_text()


def test_gives_up_after_wait_limit_and_still_exits_0(bindir: Path) -> None:
    (bindir / "nodes.1").write_text(POWERING_UP)
    log = bindir.parent / "prolog.log"
    assert _run(PROLOG, bindir, ["WAIT_LIMIT=1", f"PROLOG_LOG={log}"]).returncode == 0
    assert "gave up after 1 s" in log.read_text()


def test_missing_scontrol_exits_0(tmp_path: Path) -> None:
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    assert _run(PROLOG, empty, ["WAIT_LIMIT=30"]).returncode == 0


def test_without_job_environment_exits_0(bindir: Path) -> None:
    (bindir / "nodes.1").write_text(POWERING_UP)
    assert _run(PROLOG, bindir, ["WAIT_LIMIT=30"], job=False).returncode == 0
    assert _node_calls(bindir) == 0


def test_reads_env_file_beside_the_script_and_exports_slurm_conf(bindir: Path, tmp_path: Path) -> None:
    installed = tmp_path / "installed"
    installed.mkdir()
    prolog = installed / PROLOG.name
    shutil.copy(PROLOG, prolog)
    (bindir / "scontrol").write_text('#!/bin/bash\necho "$SLURM_CONF" >>"${0%/*}/conf"\n')
    (installed / "prolog-wait-for-boot.env").write_text(
        f"SLURM_BIN_DIR={bindir}\nSLURM_CONF=/lc/etc/slurm.conf\nWAIT_LIMIT=30\n"
    )
    env = {"SLURM_JOB_ID": "7", "SLURM_JOB_NODELIST": "cpu-a-1"}
    result = subprocess.run(["/bin/bash", str(prolog)], env=env, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0
    assert (bindir / "conf").read_text().splitlines()[0] == "/lc/etc/slurm.conf"


def test_prolog_is_executable() -> None:
    assert os.access(PROLOG, os.X_OK)
