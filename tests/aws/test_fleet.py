"""`elastic-slurm fleet stop|start|status` against the emulated AWS: the wish lands in the cluster's fleet parameter,
which the cluster manager reads (slurm_plugin.manager.fleet.wanted); an unknown cluster is one line, exit 1."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from elastic_slurm.cli import main
from localcloud.aws.emulated_aws import EmulatedAws
from slurm_plugin.manager import fleet
from slurm_plugin.naming import config_url_parameter, fleet_parameter

REGION = "us-east-1"


@pytest.fixture
def deployed(aws: EmulatedAws, monkeypatch: pytest.MonkeyPatch) -> str:
    """A cluster as `cdk deploy` leaves it (its config-url parameter), and the CLI pointed at the emulated AWS."""
    monkeypatch.setenv("AWS_ENDPOINT_URL", aws.url)
    monkeypatch.setenv("AWS_DEFAULT_REGION", REGION)
    name = f"fl{uuid.uuid4().hex[:8]}"
    aws.client("ssm", REGION).put_parameter(Name=config_url_parameter(name), Value="s3://b/c.yaml", Type="String")
    return name


def test_stop_and_start_write_the_wish_the_manager_reads(
    aws: EmulatedAws, deployed: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ssm = aws.client("ssm", REGION)
    assert fleet.wanted(ssm, deployed, str(tmp_path)) == fleet.RUNNING  # never stopped: no parameter
    assert main(["fleet", "status", deployed]) == 0
    assert capsys.readouterr().out.strip() == f"cluster {deployed} ({REGION}): fleet RUNNING"
    assert main(["fleet", "stop", deployed, "--region", REGION]) == 0
    assert capsys.readouterr().out.startswith(f"cluster {deployed} ({REGION}): fleet STOPPED; at the cluster manager's")
    assert ssm.get_parameter(Name=fleet_parameter(deployed))["Parameter"]["Value"] == "STOPPED"
    assert fleet.wanted(ssm, deployed, str(tmp_path)) == fleet.STOPPED
    assert main(["fleet", "start", deployed]) == 0
    capsys.readouterr()
    assert fleet.wanted(ssm, deployed, str(tmp_path)) == fleet.RUNNING


def test_a_garbled_wish_keeps_the_last_one_applied(aws: EmulatedAws, deployed: str, tmp_path: Path) -> None:
    ssm = aws.client("ssm", REGION)
    fleet.apply_partitions(_NoPartitions(), fleet.STOPPED, str(tmp_path))
    ssm.put_parameter(Name=fleet_parameter(deployed), Value="PAUSED", Type="String")
    assert fleet.wanted(ssm, deployed, str(tmp_path)) == fleet.STOPPED


def test_an_unknown_cluster_is_one_line(deployed: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["fleet", "stop", "nosuchcluster"]) == 1
    (line,) = capsys.readouterr().err.splitlines()
    assert line == f"elastic-slurm fleet: NAME: no cluster 'nosuchcluster' is deployed in {REGION}"


class _NoPartitions:
    def partitions(self) -> dict[str, str]:
        return {}

    def set_partitions(self, names: object, state: str) -> None:
        raise AssertionError("no partition to set")
