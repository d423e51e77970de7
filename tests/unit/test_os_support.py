"""The per-OS table (cluster_config/os_support.py) and what reads it: the generated os-table.env the image build steps
source, the steps' lookup (assets/image-build/os-lib.sh, run here against fake /etc/os-release files) and the SSM
agent user data the images stack gives the OSes whose images bring no agent."""

from __future__ import annotations

import subprocess
import typing
from pathlib import Path

import pytest

from cluster_config.model import Images
from cluster_config.os_support import MIN_PYTHON, OS_SUPPORT, parse_env, render_env
from stacks.images import WORKING_DIRECTORY, ssm_user_data

REPO_ROOT = Path(__file__).resolve().parents[2]
STEPS = REPO_ROOT / "assets" / "image-build"
# /etc/os-release of each base OS's AMI: the ID and VERSION_ID the steps read
OS_RELEASE = {
    "debian13": ("debian", "13"),
    "ubuntu2204": ("ubuntu", "22.04"),
    "ubuntu2404": ("ubuntu", "24.04"),
    "al2023": ("amzn", "2023"),
    "rhel9": ("rhel", "9.6"),
    "rocky9": ("rocky", "9.6"),
}


def _lookup(tmp_path: Path, os_id: str, version: str, script: str) -> subprocess.CompletedProcess[str]:
    """`script` run by bash after sourcing os-lib.sh on a machine whose /etc/os-release says `os_id` `version`."""
    release = tmp_path / "os-release"
    release.write_text(f'ID={os_id}\nVERSION_ID="{version}"\nPRETTY_NAME="{os_id} {version}"\n', encoding="utf-8")
    return subprocess.run(
        ["bash", "-c", f'set -euo pipefail; . "{STEPS}/os-lib.sh"; {script}'],
        env={"PATH": "/usr/bin:/bin", "ES_OS_RELEASE_FILE": str(release)},
        capture_output=True,
        text=True,
        check=False,
    )


def test_committed_os_table_env_is_the_one_the_table_generates() -> None:
    assert (STEPS / "os-table.env").read_text(encoding="utf-8") == render_env()


def test_every_base_os_the_config_accepts_has_a_row_and_no_other() -> None:
    accepted = typing.get_args(Images.model_fields["base_os"].annotation)
    assert sorted(OS_SUPPORT) == sorted(accepted) == sorted(OS_RELEASE)


def test_parse_env_reads_back_every_row_render_env_writes() -> None:
    rows = parse_env(render_env())
    assert sorted(rows) == sorted(OS_SUPPORT)
    assert rows["ubuntu2204"]["python"] == "python3.11"
    assert rows["debian13"]["cuda_repo_arm64"] == ""
    assert rows["rhel9"]["cuda_repo_arm64"] == "rhel9/sbsa"


def test_every_base_os_has_a_python_of_at_least_3_11() -> None:
    assert {name: entry.python.version >= MIN_PYTHON for name, entry in OS_SUPPORT.items()} == dict.fromkeys(
        OS_SUPPORT, True
    )
    # Ubuntu 22.04's python3 is 3.10: the image uses universe's python3.11 with its venv module
    assert OS_SUPPORT["ubuntu2204"].python.command == "python3.11"
    assert {"python3.11", "python3.11-venv"} <= set(OS_SUPPORT["ubuntu2204"].packages)


@pytest.mark.parametrize("base_os", sorted(OS_RELEASE))
def test_build_steps_find_their_base_os_row_from_os_release(tmp_path: Path, base_os: str) -> None:
    result = _lookup(tmp_path, *OS_RELEASE[base_os], 'echo "$base_os $(os_value python)"')
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == [base_os, OS_SUPPORT[base_os].python.command]


def test_a_key_the_table_lacks_stops_the_step(tmp_path: Path) -> None:
    result = _lookup(tmp_path, "debian", "13", "value=$(os_value no_such_key); echo reached")
    assert result.returncode == 1
    assert "reached" not in result.stdout
    assert "os-table.env has no no_such_key for debian13" in result.stderr


def test_an_os_without_a_row_stops_the_step_naming_it(tmp_path: Path) -> None:
    result = _lookup(tmp_path, "fedora", "42", "echo reached")
    assert result.returncode == 1
    assert result.stdout == ""
    assert "unsupported base OS fedora 42" in result.stderr


def test_debian_user_data_installs_the_ssm_agent_deb_from_the_regions_bucket_and_asks_for_the_clean_up() -> None:
    text = ssm_user_data("debian13", "arm64", "eu-west-1")
    assert text is not None
    lines = text.splitlines()
    assert lines[0] == "#!/bin/bash"
    assert (
        "url=https://s3.eu-west-1.amazonaws.com/amazon-ssm-eu-west-1/latest/debian_arm64/amazon-ssm-agent.deb" in lines
    )
    assert f"touch {WORKING_DIRECTORY}/perform_cleanup" in lines
    assert any("dpkg -i" in line for line in lines)
    assert lines[-1] == "systemctl enable --now amazon-ssm-agent"


def test_rocky_user_data_installs_the_rpm_and_os_with_an_agent_keep_image_builders_user_data() -> None:
    text = ssm_user_data("rocky9", "x86_64", "us-east-1")
    assert text is not None
    assert "url=https://s3.us-east-1.amazonaws.com/amazon-ssm-us-east-1/latest/linux_amd64/amazon-ssm-agent.rpm" in text
    assert 'dnf install -y "$url"' in text
    assert {base_os: ssm_user_data(base_os, "x86_64", "us-east-1") is None for base_os in OS_SUPPORT} == {
        "debian13": False,
        "rocky9": False,
        "ubuntu2204": True,
        "ubuntu2404": True,
        "al2023": True,
        "rhel9": True,
    }
