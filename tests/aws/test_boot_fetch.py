"""slurm_plugin/boot_fetch.py, the boot's one-process read of the munge secret and the boot parameters, run as the
user data runs it (`python -m slurm_plugin.boot_fetch`, credentials and endpoint from the environment) against the
emulated AWS."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import uuid
from pathlib import Path

from localcloud.aws.emulated_aws import DUMMY_CREDENTIALS, EmulatedAws
from slurm_plugin.boot_fetch import munge_key_bytes


def _run(aws: EmulatedAws, tmp_path: Path, secret: str, names: list[str]) -> subprocess.CompletedProcess[str]:
    env = {
        "PATH": os.environ["PATH"],
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_ENDPOINT_URL": aws.url,
        **DUMMY_CREDENTIALS,
    }
    argv = [sys.executable, "-m", "slurm_plugin.boot_fetch", "--munge-secret", secret]
    argv += ["--munge-key", str(tmp_path / "munge.key"), "--parameters", *names]
    argv += ["--parameters-out", str(tmp_path / "parameters.json")]
    return subprocess.run(argv, env=env, capture_output=True, text=True, timeout=60)


def test_the_munge_key_is_what_the_aws_cli_pipeline_wrote() -> None:
    # aws ... --output text | sha512sum | cut -d' ' -f1: the CLI prints the string and a newline
    shell = subprocess.run(
        ["bash", "-c", "printf '%s\\n' \"$0\" | sha512sum | cut -d' ' -f1", "s3cr3t value"],
        capture_output=True,
        check=True,
    )
    assert munge_key_bytes("s3cr3t value") == shell.stdout


def test_one_run_writes_the_key_and_the_parameters_in_get_parameters_shape(aws: EmulatedAws, tmp_path: Path) -> None:
    name = f"boot-fetch-{uuid.uuid4().hex[:8]}"
    aws.client("secretsmanager").create_secret(Name=f"{name}/munge", SecretString="k3y")
    aws.client("ssm").put_parameter(Name=f"/{name}/mounts", Value='[{"type": "efs"}]', Type="String")
    aws.reset_call_counts()
    result = _run(aws, tmp_path, f"{name}/munge", [f"/{name}/mounts", f"/{name}/missing"])
    assert result.returncode == 0, result.stderr
    key = tmp_path / "munge.key"
    assert key.read_bytes() == munge_key_bytes("k3y")
    assert stat.S_IMODE(key.stat().st_mode) == 0o400
    answer = json.loads((tmp_path / "parameters.json").read_text())
    assert [(p["Name"], p["Value"]) for p in answer["Parameters"]] == [(f"/{name}/mounts", '[{"type": "efs"}]')]
    assert answer["InvalidParameters"] == [f"/{name}/missing"]  # the boot's jq check fails the boot on it
    calls = aws.call_counts()
    assert calls.get("secretsmanager:GetSecretValue") == 1 and calls.get("ssm:GetParameters") == 1


def test_a_missing_secret_is_one_line_and_exit_1(aws: EmulatedAws, tmp_path: Path) -> None:
    result = _run(aws, tmp_path, "no-such-secret-anywhere", [])
    assert result.returncode == 1
    assert result.stderr.startswith("boot_fetch: GetSecretValue: ResourceNotFoundException")
    assert len(result.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "munge.key").exists()
