"""The long health check is submitted only to powered-up idle nodes, one job per partition, one round at a time."""

from __future__ import annotations

import getpass
import os
import subprocess
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "assets" / "health" / "elastic-slurm-longcheck-submit"

SINFO = """cpu cpu-small-1 idle
cpu cpu-small-2 idle~
cpu cpu-small-3 allocated
cpu cpu-small-4 idle
cpu cpu-small-5 idle#
gpu gpu-g5-1 idle
gpu gpu-g5-2 drained
interactive cpu-small-1 idle
"""


def _fake_bin(tmp_path: Path, queued: str = "", owner: str | None = None) -> Path:
    owner = owner or getpass.getuser()  # the script's own user (root under its unit)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    calls = tmp_path / "sbatch.calls"
    scripts = {
        "sinfo": f"cat <<'OUT'\n{SINFO}OUT\n",
        # like squeue: every user's jobs, or with -u USER only that user's (the queued job belongs to `owner`)
        "squeue": f'[[ " $* " == *" -u "* && " $* " != *" -u {owner} "* ]] || printf "%s" "{queued}"\n',
        "sbatch": f'echo "$*" >> {calls}\necho 42\n',
    }
    for name, body in scripts.items():
        path = bin_dir / name
        path.write_text(f"#!/bin/bash\n{body}")
        path.chmod(0o755)
    return bin_dir


def _run(bin_dir: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "ELASTIC_SLURM_SLURM_BIN": str(bin_dir), "ELASTIC_SLURM_LONGCHECK_JOB": "/x/longcheck.sbatch"}
    return subprocess.run([str(SCRIPT)], env=env, capture_output=True, text=True, timeout=30, check=False)


def test_only_powered_up_idle_nodes_are_checked_one_job_per_partition(tmp_path: Path) -> None:
    result = _run(_fake_bin(tmp_path))
    assert result.returncode == 0, result.stderr
    calls = sorted((tmp_path / "sbatch.calls").read_text().splitlines())
    assert calls == [
        "--parsable -J elastic-slurm-longcheck -p cpu -N 2 --nodelist=cpu-small-1,cpu-small-4 /x/longcheck.sbatch",
        "--parsable -J elastic-slurm-longcheck -p gpu -N 1 --nodelist=gpu-g5-1 /x/longcheck.sbatch",
    ]
    assert "3 node(s) submitted" in result.stdout


def test_nothing_is_submitted_while_a_round_is_queued(tmp_path: Path) -> None:
    result = _run(_fake_bin(tmp_path, queued="17"))
    assert result.returncode == 0
    assert not (tmp_path / "sbatch.calls").exists()
    assert "still queued" in result.stdout


def test_a_job_users_job_of_the_same_name_does_not_suppress_the_round(tmp_path: Path) -> None:
    result = _run(_fake_bin(tmp_path, queued="17", owner="esuser"))
    assert result.returncode == 0, result.stderr
    assert len((tmp_path / "sbatch.calls").read_text().splitlines()) == 2
    assert "3 node(s) submitted" in result.stdout


@pytest.mark.parametrize("unit", ["slurm-longcheck.service", "slurm-longcheck.timer"])
def test_systemd_units_exist(unit: str) -> None:
    text = (SCRIPT.parents[1] / "systemd" / unit).read_text()
    assert "[Unit]" in text
