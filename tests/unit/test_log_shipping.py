"""The CloudWatch agent config every node's boot writes (slurm_plugin/log_shipping.py): the Slurm daemons' and
elastic-slurm's logs, each file its own `<instance id>/<file name>` stream of the cluster's log group, sent to the
home region's group from every region."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from slurm_plugin.log_shipping import SHIPPED_LOGS, cloudwatch_agent_config, main
from slurm_plugin.render.cluster import RenderOptions
from stacks.user_data import VENV_PYTHON, boot_commands

REPO = Path(__file__).resolve().parents[2]


def _collected(text: str) -> list[dict[str, str]]:
    files: list[dict[str, str]] = json.loads(text)["logs"]["logs_collected"]["files"]["collect_list"]
    return files


def test_plugin_manager_prolog_license_sync_and_exporter_logs_are_shipped_beside_slurms() -> None:
    paths = {entry["file_path"] for entry in _collected(cloudwatch_agent_config("/elastic-slurm/c"))}
    assert paths == set(SHIPPED_LOGS)
    assert {
        "/var/log/slurm/slurmctld.log",
        "/var/log/slurm/slurmdbd.log",
        "/var/log/slurm/slurmd.log",
        RenderOptions().log_file,  # the power-save plugin's log, as the manifest names it
        "/var/log/elastic-slurm/clustermgr.log",  # slurm_plugin/manager/daemon.py: next to the plugin's log
        "/var/log/elastic-slurm/license-sync.log",
        "/var/log/elastic-slurm/exporter.log",  # slurm_plugin/exporter/main.py: next to the plugin's log
    } <= paths


def test_every_file_has_its_own_stream_named_after_the_instance_and_file_and_no_globs() -> None:
    entries = _collected(cloudwatch_agent_config("/elastic-slurm/c"))
    assert all(e["log_group_name"] == "/elastic-slurm/c" for e in entries)
    assert [e["log_stream_name"] for e in entries] == [
        "{instance_id}/" + os.path.basename(e["file_path"]) for e in entries
    ]
    assert len({e["log_stream_name"] for e in entries}) == len(entries)
    assert not any(c in e["file_path"] for e in entries for c in "*?[")


@pytest.mark.parametrize("role", ["controller", "compute", "login"])
def test_the_boot_line_writes_the_config_for_the_log_group_and_home_region_of_its_env(
    tmp_path: Path, role: str
) -> None:
    (line,) = [c for c in boot_commands(role, {"ES_CLUSTER": "c"}) if "slurm_plugin.log_shipping" in c]
    # a node in a remote region (us-west-2) of a cluster at home in us-east-1: its env names the home region
    line = line.replace('"$ES_LOG_GROUP"', "/elastic-slurm/c").replace('"$ES_REGION"', "us-east-1")
    words = shlex.split(line)
    assert words[:3] == [VENV_PYTHON, "-m", "slurm_plugin.log_shipping"]
    out = tmp_path / "agent.json"
    command = [sys.executable, *words[1:-2]]  # this venv's python in place of the node's, same module and arguments
    with out.open("w") as stdout:
        subprocess.run(command, stdout=stdout, cwd=REPO, check=True)
    assert words[-2:] == [">", "/etc/elastic-slurm/cloudwatch-agent.json"]
    config = json.loads(out.read_text())
    assert config["agent"]["region"] == "us-east-1"  # the log group's region, whichever region the node runs in
    entries = _collected(out.read_text())
    assert {e["log_group_name"] for e in entries} == {"/elastic-slurm/c"}
    assert "{instance_id}/plugin.log" in {e["log_stream_name"] for e in entries}


def test_without_a_region_the_agent_keeps_its_default_of_the_instances_region() -> None:
    assert "agent" not in json.loads(cloudwatch_agent_config("/elastic-slurm/c"))
    assert json.loads(cloudwatch_agent_config("/elastic-slurm/c", "eu-west-1"))["agent"] == {"region": "eu-west-1"}


def test_an_empty_region_fails_with_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--region", "", "/elastic-slurm/c"]) == 2
    assert capsys.readouterr().err.count("\n") == 1


def test_an_empty_log_group_fails_with_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([""]) == 2
    assert capsys.readouterr().err.count("\n") == 1
