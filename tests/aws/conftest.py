"""Fixtures for the tests against the emulated AWS: the session's test network, a fresh manifest per test, and an
emulated AWS of a module's own enforcing the stacks' IAM policies."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest

from localcloud.aws.emulated_aws import EmulatedAws
from localcloud.aws.iam import ACCOUNT, Credentials, create_principals, role_documents
from slurm_plugin.manifest import Manifest
from stacks.iam_policies import RegionTarget
from stacks.node_policies import ControllerResources
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


ENFORCED_REGION = "us-east-1"
ENFORCED_TARGETS = [RegionTarget(ENFORCED_REGION, "vpc-unused", ["lt-0unused"], f"arn:aws:iam::{ACCOUNT}:role/compute")]
# the controller's own resources in `enforcing`: an events queue (the manager's) among them
ENFORCED_EVENTS_QUEUE = f"arn:aws:sqs:{ENFORCED_REGION}:{ACCOUNT}:east-events"
ENFORCED_RESOURCES = ControllerResources(
    config_object_arn="arn:aws:s3:::unused/*", events_queue_arn=ENFORCED_EVENTS_QUEUE
)


@pytest.fixture(scope="module")
def enforcing(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[EmulatedAws, dict[str, Credentials]]]:
    """An emulated AWS of the module's own enforcing IAM, with the stacks' principals of cluster `east` (controller,
    compute, login, deconfigure; the controller's resources: ENFORCED_RESOURCES) and the harness's admin."""
    aws = EmulatedAws.start(Path(tmp_path_factory.mktemp("iam-enforcing-aws")))
    try:
        principals = create_principals(aws, role_documents("east", ENFORCED_TARGETS, controller=ENFORCED_RESOURCES))
        aws.enforce_iam(principals["admin"])
        yield aws, principals
    finally:
        aws.stop()


def signed_client(aws: EmulatedAws, credentials: Credentials, service: str) -> Any:
    """A boto3 client of the emulated AWS signing as `credentials` (one of `enforcing`'s principals)."""
    return boto3.client(
        service,
        region_name=ENFORCED_REGION,
        endpoint_url=aws.url,
        aws_access_key_id=credentials.access_key_id,
        aws_secret_access_key=credentials.secret_access_key,
        aws_session_token=None,
    )
