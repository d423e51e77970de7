"""Which CDK CLI `elastic-slurm synth` (and `cluster create|update|delete`) runs: $ELASTIC_SLURM_CDK, the checkout's
node_modules/.bin/cdk, `cdk` on PATH, `npx --yes aws-cdk@<package.json's pin>` — or one line naming what to install.
And the command runs the app of this installation from any working directory."""

from __future__ import annotations

import json
import os
import shlex
import sys
from pathlib import Path

import pytest

import cluster_config
from elastic_slurm.cli import main
from elastic_slurm.commands import synth_cmd
from elastic_slurm.errors import UserError
from stacks import project

PINNED = json.loads((project.PROJECT_DIR / "package.json").read_text(encoding="utf-8"))["devDependencies"]["aws-cdk"]
EXAMPLE = Path(cluster_config.__file__).parent / "examples" / "minimal.yaml"


def _executable(directory: Path, name: str) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / name
    path.write_text("#!/bin/sh\nexit 0\n", encoding="utf-8")
    path.chmod(0o755)
    return path


@pytest.fixture
def no_checkout_cli(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """As from a pip-installed package: no node_modules next to the code."""
    monkeypatch.setattr(synth_cmd, "CHECKOUT_CLI", tmp_path / "absent" / "node_modules" / ".bin" / "cdk")


def test_the_environment_variable_wins(tmp_path: Path) -> None:
    cli = _executable(tmp_path / "opt", "my-cdk")
    assert synth_cmd.cdk_cli({"ELASTIC_SLURM_CDK": str(cli), "PATH": ""}) == [str(cli)]
    with pytest.raises(UserError, match="ELASTIC_SLURM_CDK=/nowhere/cdk: no such executable"):
        synth_cmd.cdk_cli({"ELASTIC_SLURM_CDK": "/nowhere/cdk", "PATH": ""})


def test_a_checkout_runs_its_pinned_cli() -> None:
    if not synth_cmd.CHECKOUT_CLI.exists():
        pytest.skip("no node_modules (make setup)")
    assert synth_cmd.cdk_cli({"PATH": ""}) == [str(synth_cmd.CHECKOUT_CLI)]
    if "ELASTIC_SLURM_CDK" not in os.environ:
        assert synth_cmd.CDK_CLI == synth_cmd.CHECKOUT_CLI


@pytest.mark.usefixtures("no_checkout_cli")
def test_installed_package_uses_cdk_on_path_then_npx_with_the_pinned_version(tmp_path: Path) -> None:
    both, only_npx = tmp_path / "both", tmp_path / "npx"
    cdk = _executable(both, "cdk")
    _executable(both, "npx")
    npx = _executable(only_npx, "npx")
    assert synth_cmd.cdk_cli({"PATH": str(both)}) == [str(cdk)]
    assert synth_cmd.cdk_cli({"PATH": str(only_npx)}) == [str(npx), "--yes", f"aws-cdk@{PINNED}"]


@pytest.mark.usefixtures("no_checkout_cli")
def test_no_cli_and_no_node_is_one_line_naming_what_to_install(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(UserError) as error:
        synth_cmd.cdk_cli({"PATH": str(tmp_path)})
    message = str(error.value)
    assert "\n" not in message
    assert "Node.js" in message and f"aws-cdk@{PINNED}" in message and "ELASTIC_SLURM_CDK" in message
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.delenv("ELASTIC_SLURM_CDK", raising=False)
    assert main(["synth", str(EXAMPLE), "--out", str(tmp_path / "out")]) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith("elastic-slurm synth: no AWS CDK CLI found")


def test_synth_command_runs_this_installation_s_app_with_absolute_paths(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    cli = _executable(tmp_path / "bin", "cdk")
    monkeypatch.setenv("ELASTIC_SLURM_CDK", str(cli))
    monkeypatch.chdir(tmp_path)
    command = synth_cmd.synth_command(Path("my.yaml"), Path("out"))
    assert command[:3] == [str(cli), "synth", "--quiet"]
    assert command[command.index("-c") + 1] == f"config={tmp_path / 'my.yaml'}"
    assert command[command.index("-o") + 1] == str(tmp_path / "out")
    assert shlex.split(command[command.index("--app") + 1]) == [sys.executable, "-m", "stacks.cdk_app"]
    assert synth_cmd.cdk_command("deploy", "--all")[:3] == [str(cli), "deploy", "--all"]
    assert (synth_cmd.cdk_workdir() / "cdk.json").is_file()


def test_synth_env_puts_a_node_modules_cli_s_node_first_only(tmp_path: Path) -> None:
    bin_dir = tmp_path / "node_modules" / ".bin"
    cli = _executable(bin_dir, "cdk")
    plain = _executable(tmp_path / "plain", "cdk")
    assert synth_cmd.synth_env({"ELASTIC_SLURM_CDK": str(plain), "PATH": "/usr/bin"})["PATH"] == "/usr/bin"
    _executable(bin_dir, "node")
    env = synth_cmd.synth_env({"ELASTIC_SLURM_CDK": str(cli), "PATH": "/usr/bin"})
    assert env["PATH"].split(":") == [str(bin_dir), "/usr/bin"]
    assert env["AWS_EC2_METADATA_DISABLED"] == "true" and env["CDK_DISABLE_CLI_TELEMETRY"] == "true"


def test_repo_cdk_json_is_the_app_s_context() -> None:
    cdk_json = json.loads((project.PROJECT_DIR / "cdk.json").read_text(encoding="utf-8"))
    assert project.cdk_context() == cdk_json["context"]
    assert cdk_json["context"]["cli-telemetry"] is False


def test_the_cdk_extra_pins_what_the_checkout_installs() -> None:
    import tomllib

    from elastic_slurm.commands.synth_cmd import REPO_ROOT

    extra = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"][
        "optional-dependencies"
    ]
    tools = (REPO_ROOT / "requirements-tools.txt").read_text(encoding="utf-8").splitlines()
    pinned = {line.split(">")[0]: line for line in tools if line.startswith(("aws-cdk-lib", "constructs", "cdk-nag"))}
    assert sorted(extra["cdk"]) == sorted(pinned.values())


def test_without_the_cdk_extra_synth_is_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib.util

    from elastic_slurm.commands import synth_cmd
    from elastic_slurm.errors import UserError

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "aws_cdk" else real(name, *a))
    with pytest.raises(UserError, match=r"^the CDK app needs aws_cdk: install elastic-slurm with its cdk extra"):
        synth_cmd.cdk_command("synth")
