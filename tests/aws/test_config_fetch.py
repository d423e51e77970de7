"""slurm_plugin/config_fetch.py, a controller's AWS reads for one config apply, run as elastic-slurm-config-apply runs
it (`python -m slurm_plugin.config_fetch`, credentials and endpoint from the environment) against the emulated AWS:
one GetParameters, and with --download-named one GetObject of the URL that same answer holds. (Every local-cloud
controller boot and every minute's config check run it too, through the script.)"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from localcloud.aws.emulated_aws import DUMMY_CREDENTIALS, EmulatedAws
from slurm_plugin.config_fetch import FetchError, s3_location


def _run(aws: EmulatedAws, tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {"PATH": os.environ["PATH"], "AWS_DEFAULT_REGION": "us-east-1", "AWS_ENDPOINT_URL": aws.url}
    argv = [sys.executable, "-m", "slurm_plugin.config_fetch", "--parameters-out", str(tmp_path / "parameters.json")]
    return subprocess.run([*argv, *args], env={**env, **DUMMY_CREDENTIALS}, capture_output=True, text=True, timeout=60)


def _parameters(aws: EmulatedAws, url: str) -> tuple[str, str]:
    """A config parameter holding `url` and a conf-server parameter; their names."""
    prefix = f"/fetch-{uuid.uuid4().hex[:8]}"
    ssm = aws.client("ssm")
    ssm.put_parameter(Name=f"{prefix}/config-url", Value=url, Type="String")
    ssm.put_parameter(Name=f"{prefix}/conf-server", Value="pending", Type="String")
    return f"{prefix}/config-url", f"{prefix}/conf-server"


def test_the_poll_reads_every_parameter_in_one_call_and_downloads_nothing(aws: EmulatedAws, tmp_path: Path) -> None:
    config, conf_server = _parameters(aws, "s3://nowhere/config.yaml")
    aws.reset_call_counts()
    result = _run(aws, tmp_path, "--parameters", config, conf_server, f"{config}-missing")
    assert result.returncode == 0, result.stderr
    answer = json.loads((tmp_path / "parameters.json").read_text())
    assert {p["Name"]: p["Value"] for p in answer["Parameters"]} == {
        config: "s3://nowhere/config.yaml",
        conf_server: "pending",
    }
    assert answer["InvalidParameters"] == [f"{config}-missing"]  # the script's check stops the apply on it
    assert aws.call_counts() == {"ssm:GetParameters": 1}


def test_the_apply_downloads_the_object_the_same_answer_names(aws: EmulatedAws, tmp_path: Path) -> None:
    bucket = f"fetch-{uuid.uuid4().hex[:8]}"
    aws.client("s3").create_bucket(Bucket=bucket)
    aws.client("s3").put_object(Bucket=bucket, Key="configs/abc.yaml", Body=b"clusters: []\n")
    config, conf_server = _parameters(aws, f"s3://{bucket}/configs/abc.yaml")
    aws.reset_call_counts()
    out = tmp_path / "cluster.yaml"
    result = _run(
        aws, tmp_path, "--parameters", config, conf_server, "--download-named", config, "--download-out", str(out)
    )
    assert result.returncode == 0, result.stderr
    assert out.read_bytes() == b"clusters: []\n"
    calls = aws.call_counts()  # (the emulator counts S3's REST calls by service only)
    assert calls.pop("ssm:GetParameters") == 1 and list(calls) == ["s3:?"] and calls["s3:?"] == 1


def test_a_missing_object_is_one_line_exit_1_and_writes_no_file(aws: EmulatedAws, tmp_path: Path) -> None:
    bucket = f"fetch-{uuid.uuid4().hex[:8]}"
    aws.client("s3").create_bucket(Bucket=bucket)
    config, _ = _parameters(aws, f"s3://{bucket}/gone.yaml")
    out = tmp_path / "cluster.yaml"
    result = _run(aws, tmp_path, "--parameters", config, "--download-named", config, "--download-out", str(out))
    assert result.returncode == 1
    assert result.stderr.startswith("config_fetch: GetObject: NoSuchKey") and result.stderr.count("\n") == 1
    assert not out.exists() and not (tmp_path / "parameters.json").exists()


@pytest.mark.parametrize("value", ["https://example.com/x.yaml", "s3://bucket-only", "s3:///key", "/etc/passwd"])
def test_a_config_parameter_that_is_not_an_s3_object_url_is_refused(
    aws: EmulatedAws, tmp_path: Path, value: str
) -> None:
    with pytest.raises(FetchError, match="is not an s3://bucket/key URL"):
        s3_location(value)
    config, _ = _parameters(aws, value)
    out = tmp_path / "cluster.yaml"
    result = _run(aws, tmp_path, "--parameters", config, "--download-named", config, "--download-out", str(out))
    assert result.returncode == 1
    assert result.stderr == f"config_fetch: '{value}' is not an s3://bucket/key URL\n"
    assert not out.exists()


def test_a_download_of_a_parameter_not_read_is_a_usage_error(aws: EmulatedAws, tmp_path: Path) -> None:
    result = _run(aws, tmp_path, "--parameters", "/a", "--download-named", "/b", "--download-out", str(tmp_path / "x"))
    assert result.returncode == 2 and "--download-named: /b is not one of --parameters" in result.stderr
