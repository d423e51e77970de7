"""What every `elastic-slurm` command promises (docs/cli.md): `--version`, no traceback on a closed pipe, the exit
codes of elastic_slurm/exit_codes.py, and the Node.js check before the CDK CLI runs (one line, never Node's banner)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from elastic_slurm import cli, exit_codes
from elastic_slurm.commands import synth_cmd
from elastic_slurm.errors import UserError

REPO = Path(__file__).resolve().parents[2]
MINIMAL = REPO / "cluster_config" / "examples" / "minimal.yaml"


def test_version_names_the_installed_package(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["--version"])
    assert exit_info.value.code == 0
    from importlib.metadata import version

    assert capsys.readouterr().out.strip() == f"elastic-slurm {version('elastic-slurm')}"


@pytest.mark.parametrize(
    ("argv", "code"),
    [(["validate", str(MINIMAL)], cli.BROKEN_PIPE), (["schema"], cli.BROKEN_PIPE), (["--help"], 0)],
    ids=["validate", "schema", "help"],
)
def test_a_closed_pipe_ends_the_command_quietly(argv: list[str], code: int) -> None:
    """The reader is gone before the first write (`| head -0`: deterministic): no traceback, nothing on stderr, and
    the shell's SIGPIPE status (argparse's --help ignores write errors itself and exits 0)."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        result = subprocess.run(
            [sys.executable, "-m", "elastic_slurm.cli", *argv],
            stdout=write_end,
            stderr=subprocess.PIPE,
            text=True,
            timeout=120,
            check=False,
        )
    finally:
        os.close(write_end)
    assert (result.returncode, result.stderr) == (code, "")


def test_exit_codes_usage_invalid_config(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["cluster", "frobnicate"])
    assert exit_info.value.code == exit_codes.USAGE
    bad = tmp_path / "bad.yaml"
    bad.write_text(MINIMAL.read_text().replace("name: minimal", "name: Not_Valid", 1))
    assert cli.main(["validate", str(bad)]) == exit_codes.INVALID_CONFIG
    assert cli.main(["cluster", "update", str(MINIMAL), "--against", str(tmp_path / "none.yaml")]) == exit_codes.USAGE
    assert "Traceback" not in capsys.readouterr().err


def _fake(directory: Path, name: str, script: str) -> Path:
    directory.mkdir(exist_ok=True)
    path = directory / name
    path.write_text(f"#!/bin/sh\n{script}\n")
    path.chmod(0o755)
    return path


@pytest.mark.parametrize(("version", "ok"), [("v20.20.2", False), ("v22.11.0", True), ("v24.1.0", True)])
def test_the_node_version_is_checked_up_front(tmp_path: Path, version: str, ok: bool) -> None:
    _fake(tmp_path / "bin", "node", f"echo {version}")
    env = {"PATH": str(tmp_path / "bin")}
    if ok:
        synth_cmd.check_toolchain(env)
        return
    with pytest.raises(UserError) as error:
        synth_cmd.check_toolchain(env)
    message = str(error.value)
    assert "\n" not in message and message.startswith(f"Node.js 20 at {tmp_path / 'bin' / 'node'} is too old")
    assert "install a Node.js 22 LTS" in message


def test_no_node_is_one_line(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    with pytest.raises(UserError, match=r"^no Node.js found on PATH: the CDK CLI needs Node.js >= 22"):
        synth_cmd.check_toolchain({"PATH": str(tmp_path / "empty")})


def test_synth_with_an_old_node_stops_before_the_cdk_cli(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    ran = tmp_path / "cdk-ran"
    cdk = _fake(tmp_path / "cli", "cdk", f"touch {ran}")
    _fake(tmp_path / "bin", "node", "echo v20.20.2")
    monkeypatch.setenv(synth_cmd.CDK_ENV, str(cdk))
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}")
    assert cli.main(["synth", str(MINIMAL), "--out", str(tmp_path / "out")]) == exit_codes.USAGE
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith("elastic-slurm synth: Node.js 20 at ") and not ran.exists()


def test_the_pinned_checkout_cli_runs_on_a_new_enough_node() -> None:
    if not synth_cmd.CHECKOUT_CLI.exists():
        pytest.skip("no checkout CLI (make setup)")
    env = synth_cmd.synth_env({"PATH": os.environ.get("PATH", "")})
    synth_cmd.check_toolchain(env)  # node_modules/.bin/node first: the Node 22 LTS package.json pins


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (
            ["cluster", "delete", "abc\n", "--region", "us-east-1"],
            "NAME: 'abc\\n' is neither a file nor a cluster name",
        ),
        (["cluster", "delete", "a\x00b", "--region", "us-east-1"], "NAME: 'a\\x00b' is neither a file nor a cluster"),
        (["cluster", "status", "x" * 5000], "FILE|NAME: 'xxxx"),  # too long for a path: no OSError traceback
        (["cluster", "delete", "a" * 33, "--region", "us-east-1"], "is neither a file nor a cluster name"),
        (["fleet", "status", "abc\n", "--region", "us-east-1"], "NAME: 'abc\\n' is not a cluster name"),
        (["cluster", "list", "--region", "us-east-1\n"], "--region: 'us-east-1\\n' is not an AWS region"),
        (["cluster", "list", "--region", "us-east-1; rm -rf /"], "--region: 'us-east-1; rm -rf /' is not an AWS"),
        (["cluster", "update", "y" * 5000, "--dryrun"], "(cut at 80 of 5000 characters): no such file"),
        (["cluster", "diff", "/nonexistent/\nfile.yaml"], "FILE: '/nonexistent/\\nfile.yaml': no such file"),
    ],
    ids=[
        "name-newline",
        "name-nul",
        "target-too-long",
        "name-over-32",
        "fleet-newline",
        "region-newline",
        "region-shell",
        "long-file",
        "file-newline",
    ],
)
def test_hostile_arguments_are_one_escaped_line_exit_2(
    argv: list[str], expected: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main(argv) == exit_codes.USAGE
    (line,) = capsys.readouterr().err.splitlines()
    assert expected in line and len(line) < 400
