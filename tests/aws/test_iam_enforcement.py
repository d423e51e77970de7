"""The plugin against an emulated AWS that enforces IAM with the stacks' own policies (controller principal)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError

from lambdas.deconfigure.handler import deconfigure
from localcloud.aws.emulated_aws import EmulatedAws
from localcloud.aws.iam import Credentials, create_principals, role_documents, without_statement
from slurm_plugin.instance_cache import CacheError
from slurm_plugin.instance_cache_aws import ClientFactory, build_cache
from slurm_plugin.manifest import Manifest
from slurm_plugin.powersave.ec2 import Ec2
from slurm_plugin.powersave.launcher import resume_nodes
from stacks.iam_policies import RegionTarget
from tests.aws.plugin_env import (
    HOME,
    REMOTE,
    FakeSlurm,
    Network,
    build_network,
    live_instances,
    make_manifest,
    public_image,
    rid,
)

COMPUTE_ROLE = "arn:aws:iam::123456789012:role/compute"


@pytest.fixture(scope="module")
def enforcing(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[EmulatedAws, Network, dict[str, Credentials]]]:
    """An emulated AWS of its own: network and principals created unsigned, then IAM enforced."""
    aws = EmulatedAws.start(Path(tmp_path_factory.mktemp("iam-aws")))
    try:
        net = build_network(aws)
        targets = [RegionTarget(r, "vpc-unused", [net.templates[r]], COMPUTE_ROLE) for r in (HOME, REMOTE)]
        documents = role_documents("any", targets)
        documents["controller-without-terminate"] = without_statement(
            documents["controller"], "TerminateOnlyClusterInstances"
        )
        documents["controller-without-describe"] = without_statement(
            documents["controller"], "DescribeHasNoResourceLevelPermissions"
        )
        documents["deconfigure-without-describe"] = without_statement(
            documents["deconfigure"], "DescribeHasNoResourceLevelPermissions"
        )
        principals = create_principals(aws, documents)
        aws.enforce_iam(principals["admin"])
        yield aws, net, principals
    finally:
        aws.stop()


def _as(monkeypatch: pytest.MonkeyPatch, aws: EmulatedAws, credentials: Credentials) -> Ec2:
    monkeypatch.delenv("AWS_SESSION_TOKEN", raising=False)
    for key, value in credentials.env().items():
        monkeypatch.setenv(key, value)
    return Ec2(aws.url)


def _manifest(aws: EmulatedAws, net: Network, tmp_path: Path) -> Manifest:
    return make_manifest(aws, net, tmp_path)


def test_emulator_reports_enforcement_on(enforcing: tuple[EmulatedAws, Network, dict[str, Credentials]]) -> None:
    aws, _, _ = enforcing
    assert aws.iam_enforced()


def test_unknown_credentials_are_rejected(
    enforcing: tuple[EmulatedAws, Network, dict[str, Credentials]], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    aws, _, _ = enforcing
    ec2 = _as(monkeypatch, aws, Credentials("AKIANOTAUSER00000000", "nope"))
    with pytest.raises(ClientError) as denied:
        ec2.cluster_instances(HOME, "any", ["cpu-c7i"])
    assert denied.value.response["Error"]["Code"] == "AuthFailure"  # what EC2 answers for an unknown key


def test_controller_credentials_resume_launches_and_terminate_works(
    enforcing: tuple[EmulatedAws, Network, dict[str, Credentials]], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    aws, net, principals = enforcing
    manifest = _manifest(aws, net, tmp_path)
    ec2 = _as(monkeypatch, aws, principals["controller"])
    outcome = resume_nodes(manifest, ["cpu-c7i-1", "cpu-c7i-2"], [], ec2, FakeSlurm(), rid("iam"))
    assert sorted(outcome.launched) == ["cpu-c7i-1", "cpu-c7i-2"] and outcome.failed == {}
    live = live_instances(aws, manifest.cluster)
    assert len(live) == 2
    ec2.terminate(HOME, [i["InstanceId"] for i in live])
    assert live_instances(aws, manifest.cluster) == []


def test_controller_without_the_terminate_statement_is_denied(
    enforcing: tuple[EmulatedAws, Network, dict[str, Credentials]], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    aws, net, principals = enforcing
    manifest = _manifest(aws, net, tmp_path)
    resume_nodes(manifest, ["cpu-c7i-1"], [], _as(monkeypatch, aws, principals["controller"]), FakeSlurm(), rid("t"))
    [instance] = live_instances(aws, manifest.cluster)
    ec2 = _as(monkeypatch, aws, principals["controller-without-terminate"])
    with pytest.raises(ClientError) as denied:
        ec2.terminate(HOME, [instance["InstanceId"]])
    assert denied.value.response["Error"]["Code"] == "AccessDenied"
    assert len(live_instances(aws, manifest.cluster)) == 1


def test_controller_without_the_describe_statement_is_denied(
    enforcing: tuple[EmulatedAws, Network, dict[str, Credentials]], monkeypatch: pytest.MonkeyPatch
) -> None:
    aws, _, principals = enforcing
    ec2 = _as(monkeypatch, aws, principals["controller-without-describe"])
    with pytest.raises(ClientError) as denied:
        ec2.cluster_instances(HOME, "any", ["cpu-c7i"])
    assert denied.value.response["Error"]["Code"] == "AccessDenied"


def _client_as(aws: EmulatedAws, credentials: Credentials, service: str) -> Any:
    return boto3.client(
        service,  # type: ignore[call-overload]
        region_name=HOME,
        endpoint_url=aws.url,
        aws_access_key_id=credentials.access_key_id,
        aws_secret_access_key=credentials.secret_access_key,
    )


def test_deconfigure_lambda_as_its_role_terminates_the_clusters_instances_and_without_describe_is_denied(
    enforcing: tuple[EmulatedAws, Network, dict[str, Credentials]],
) -> None:
    aws, _, principals = enforcing
    cluster = f"dc{uuid.uuid4().hex[:8]}"
    admin_ec2 = aws.client("ec2", HOME)
    ami = public_image(admin_ec2)
    spec = [{"ResourceType": "instance", "Tags": [{"Key": "elastic-slurm:cluster", "Value": cluster}]}]

    def launch() -> set[str]:
        started = admin_ec2.run_instances(
            ImageId=ami, InstanceType="c7i.large", MinCount=2, MaxCount=2, TagSpecifications=spec
        )
        return {i["InstanceId"] for i in started["Instances"]}

    def run_as(role: Credentials) -> Any:
        ec2, ssm = _client_as(aws, role, "ec2"), _client_as(aws, role, "ssm")
        return deconfigure(ec2, ssm, cluster, ["/shared"], remaining_ms=lambda: 60_000)

    kept = launch()
    refused = run_as(principals["deconfigure-without-describe"])
    assert not refused.ok and "AccessDenied" in refused.reason
    assert {i["InstanceId"] for i in live_instances(aws, cluster)} == kept  # nothing terminated
    outcome = run_as(principals["deconfigure"])
    assert outcome.ok, outcome.reason
    assert set(outcome.terminated) == kept
    assert live_instances(aws, cluster) == []


def test_controller_credentials_price_the_instance_cache_and_without_describe_are_denied(
    enforcing: tuple[EmulatedAws, Network, dict[str, Credentials]],
) -> None:
    aws, _, principals = enforcing

    def as_role(role: Credentials) -> ClientFactory:
        return lambda service, region: _client_as(aws, role, service)

    cache = build_cache({HOME: {"c7i.large"}}, as_role(principals["controller"]))
    prices = cache.get(HOME, "c7i.large").prices
    assert prices.on_demand is not None and prices.spot  # pricing:GetProducts and ec2:DescribeSpotPriceHistory allowed
    with pytest.raises(CacheError, match="AccessDenied"):
        build_cache({HOME: {"c7i.large"}}, as_role(principals["controller-without-describe"]))
    with pytest.raises(ClientError) as denied:
        _client_as(aws, principals["controller-without-describe"], "pricing").get_products(ServiceCode="AmazonEC2")
    # the IAM action is `pricing:GetProducts` (signing name = IAM prefix); the gate answers in moto's XML, not JSON
    assert denied.value.response["ResponseMetadata"]["HTTPStatusCode"] == 403
    assert "not authorized to perform: pricing:GetProducts" in denied.value.response["Error"]["Message"]
