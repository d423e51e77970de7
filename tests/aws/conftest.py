"""Fixtures for the power-save plugin tests: the session's test network and a fresh manifest per test."""

from __future__ import annotations

from pathlib import Path

import boto3
import pytest

from localcloud.aws.emulated_aws import EmulatedAws
from slurm_plugin.manifest import Manifest
from tests.aws.plugin_env import Network, build_network, make_manifest


@pytest.fixture(scope="session")
def network(emulated_aws: EmulatedAws) -> Network:
    """VPCs, subnets and launch templates in the emulated AWS, built once."""
    return build_network(emulated_aws)


@pytest.fixture
def manifest(aws: EmulatedAws, network: Network, tmp_path: Path) -> Manifest:
    """A manifest for a cluster of its own (unique name, own state dir)."""
    return make_manifest(aws, network, tmp_path)


@pytest.fixture
def no_aws_credentials(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No AWS credentials anywhere boto3 looks: environment, files, instance metadata."""
    for variable in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
        monkeypatch.delenv(variable, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.setattr(boto3, "DEFAULT_SESSION", None)  # a session an earlier test made keeps its credentials


@pytest.fixture
def endpoint(aws: EmulatedAws, monkeypatch: pytest.MonkeyPatch) -> EmulatedAws:
    """The commands' boto3 clients talk to the emulated AWS, in us-east-1."""
    monkeypatch.setenv("AWS_ENDPOINT_URL", aws.url)
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    return aws
