"""assets/bootstrap/elastic-slurm-controller-hosts, run for real with a stand-in `aws`: a controller is found by its
Name tag AND the cluster and role tags, so an instance that only carries the Name (anyone who may launch in the
account can name one so) never becomes a SlurmctldHost. (Every local-cloud controller boot runs the script against
the emulated EC2, whose controllers carry all three tags: the found path.)"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "assets" / "bootstrap" / "elastic-slurm-controller-hosts"
CONFIG = REPO / "cluster_config" / "examples" / "minimal.yaml"
FEDERATION = REPO / "cluster_config" / "examples" / "federation.yaml"  # west's slurmdbd: east's controller 0
OURS = "ip-127-0-0-5.ec2.internal\t127.0.0.5"
STRANGER = "ip-127-0-0-66.ec2.internal\t127.0.0.66"


def _run(
    tmp_path: Path, config: Path = CONFIG, cluster: str = "minimal", region: str = "us-east-1"
) -> tuple[subprocess.CompletedProcess[str], list[str]]:
    """The script with an `aws` that answers as EC2 would: the stranger's newer instance named `minimal-controller-0`
    matches unless the lookup also filters on the cluster and role tags."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    calls = tmp_path / "calls"
    tagged = '*" Name=tag:elastic-slurm:cluster,Values="*" Name=tag:elastic-slurm:role,Values=controller "*'
    (bin_dir / "aws").write_text(
        f'#!/bin/bash\necho "$*" >> {calls}\n'
        f'if [[ " $* " == {tagged} ]]; then printf "%s\\n" "{OURS}"; else printf "%s\\n" "{STRANGER}"; fi\n'
    )
    (bin_dir / "aws").chmod(0o755)
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "ES_REGION": region}
    env["ELASTIC_SLURM_PYTHON"] = sys.executable
    result = subprocess.run(
        ["bash", str(SCRIPT), str(config), cluster], env=env, capture_output=True, text=True, timeout=60, check=False
    )
    return result, calls.read_text().splitlines()


def test_an_instance_that_only_carries_the_controller_name_is_not_taken_for_the_controller(tmp_path: Path) -> None:
    result, calls = _run(tmp_path)
    assert result.returncode == 0, result.stderr
    assert "ES_CONTROLLER_HOSTS=ip-127-0-0-5\\(127.0.0.5\\)" in result.stdout.splitlines()
    assert "ES_SLURMDBD_HOST=127.0.0.5" in result.stdout.splitlines()
    assert "127.0.0.66" not in result.stdout
    # the slurmdbd host is this cluster's controller 0: found once, not looked up again
    assert len(calls) == 1 and "Name=tag:Name,Values=minimal-controller-0" in calls[0]


def test_the_slurmdbd_host_of_another_cluster_is_looked_up_in_its_region(tmp_path: Path) -> None:
    result, calls = _run(tmp_path, FEDERATION, "west", "us-west-2")
    assert result.returncode == 0, result.stderr
    assert "ES_SLURMDBD_HOST=127.0.0.5" in result.stdout.splitlines()
    assert len(calls) == 2
    assert "--region us-west-2" in calls[0] and "Name=tag:elastic-slurm:cluster,Values=west" in calls[0]
    assert "--region us-east-1" in calls[1] and "Name=tag:Name,Values=east-controller-0" in calls[1]
