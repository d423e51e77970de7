"""`elastic-slurm local status|env|interrupt` against the running local cloud of the session."""

from __future__ import annotations

import subprocess
import sys

import pytest

from elastic_slurm.cli import main
from localcloud.cloud import LocalCloud

pytestmark = pytest.mark.e2e


def test_status_lists_every_daemon_alive_and_the_nodes(cloud: LocalCloud, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["local", "status", "--state-dir", str(cloud.layout.root)]) == 0
    out = capsys.readouterr().out
    for daemon in ("slurmctld", "slurmdbd", "mariadbd", "munged", "emulated-aws", "instance-runner"):
        assert any(line.split()[:2] and line.split()[0] == daemon and "pid" in line for line in out.splitlines())
    assert f"nodes: {len(cloud.nodes())}" in out
    assert f'use it: eval "$(elastic-slurm local env --state-dir {cloud.layout.root})"' in out


def test_local_env_gives_a_shell_the_clusters_slurm_and_the_emulated_aws(cloud: LocalCloud) -> None:
    env_cmd = f"{sys.executable} -m elastic_slurm.cli local env --state-dir {cloud.layout.root}"
    boto = "import boto3; print(len(boto3.client('ec2').describe_regions()['Regions']))"
    script = f'eval "$({env_cmd})" && sinfo -h -o %R && {sys.executable} -c "{boto}"'
    # root's default PATH, and no SLURM_CONF or AWS settings of the test process
    clean = {"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "HOME": "/root"}
    result = subprocess.run(["bash", "-c", script], env=clean, capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode == 0, result.stderr[-1500:]
    *partitions, regions = result.stdout.split()
    assert set(partitions) == {"cpu", "whole"}  # local-demo.yaml's partitions
    assert int(regions) >= 2


def test_interrupting_an_unknown_node_is_a_one_line_error(
    cloud: LocalCloud, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["local", "interrupt", "cpu-small-999", "--state-dir", str(cloud.layout.root)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "cpu-small-999" in err
