"""`elastic-slurm cluster update --dryrun|status|list|create` against the emulated AWS (botocore follows
$AWS_ENDPOINT_URL): the deployed config is read from its SSM parameter and S3 object as `cdk deploy` leaves them
(localcloud/instances/controller_boot.py deploy_config), stacks from CloudFormation, controllers from EC2 tags. Each test uses
clusters of its own name: the emulated AWS is shared by the session."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import pytest
import yaml

from cluster_config import load
from elastic_slurm import cli
from elastic_slurm.lifecycle import cdk
from localcloud.aws.emulated_aws import EmulatedAws
from localcloud.instances.controller_boot import assets_bucket, deploy_config
from stacks.naming import TAG_CLUSTER, TAG_ROLE
from tests.aws.plugin_env import public_image

REPO_ROOT = Path(__file__).resolve().parents[2]
REGION = "us-east-1"
TINY_TEMPLATE = json.dumps({"Resources": {"Topic": {"Type": "AWS::SNS::Topic"}}})


@pytest.fixture
def cdk_calls(monkeypatch: pytest.MonkeyPatch) -> list[list[str]]:
    """Every CDK CLI command a command runs (none really runs)."""
    calls: list[list[str]] = []

    def fake(command: list[str]) -> int:
        calls.append(command)
        return 0

    monkeypatch.setattr(cdk, "run_cdk", fake)
    return calls


def _name(prefix: str) -> str:
    return f"{prefix}{uuid.uuid4().hex[:8]}"


def _config(tmp_path: Path, name: str, file: str = "cluster.yaml", **pool: Any) -> Path:
    data = yaml.safe_load((REPO_ROOT / "cluster_config/examples/minimal.yaml").read_text())
    data["clusters"][0]["name"] = name
    data["clusters"][0]["partitions"][0]["pools"][0].update(pool)
    path = tmp_path / file
    path.write_text(yaml.safe_dump(data))
    return path


def _deploy(aws: EmulatedAws, path: Path) -> str:
    """What `cdk deploy` leaves of the config: the object in the assets bucket and the config-url parameter."""
    cluster = load(path).clusters[0]
    aws.client("s3", REGION).create_bucket(Bucket=assets_bucket(cluster.name))
    return deploy_config(aws.client, cluster, path)


def test_update_dryrun_diffs_against_the_deployed_config(
    endpoint: EmulatedAws, tmp_path: Path, capsys: pytest.CaptureFixture[str], cdk_calls: list[list[str]]
) -> None:
    name = _name("upd")
    url = _deploy(endpoint, _config(tmp_path, name, "deployed.yaml", max_nodes=10))
    edited = _config(tmp_path, name, "edited.yaml", max_nodes=20)
    assert cli.main(["cluster", "update", str(edited), "--dryrun"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out == [
        "clusters[0].partitions[0].pools[0].max_nodes: 10 -> 20  (reconfigure)",
        out[1],
    ]
    assert out[1].startswith(f"1 change(s) against the deployed config of {name} ({url}); worst: reconfigure — ")
    assert url.startswith(f"s3://{assets_bucket(name)}/")
    assert cdk_calls == []


def test_update_refuses_a_not_allowed_change_of_the_deployed_config(
    endpoint: EmulatedAws, tmp_path: Path, capsys: pytest.CaptureFixture[str], cdk_calls: list[list[str]]
) -> None:
    name = _name("upd")
    _deploy(endpoint, _config(tmp_path, name, "deployed.yaml"))
    data = yaml.safe_load(_config(tmp_path, name, "edited.yaml").read_text())
    data["accounting"]["mode"] = "none"
    edited = tmp_path / "edited.yaml"
    edited.write_text(yaml.safe_dump(data))
    for dryrun in (["--dryrun"], []):
        assert cli.main(["cluster", "update", str(edited), *dryrun]) == 2
        captured = capsys.readouterr()
        assert "accounting.mode: create -> none  (not allowed)" in captured.out
        (line,) = captured.err.splitlines()
        assert line.startswith("elastic-slurm cluster: accounting.mode: not allowed: creates or replaces")
    assert cdk_calls == []


def test_update_of_a_cluster_never_deployed(
    endpoint: EmulatedAws, tmp_path: Path, capsys: pytest.CaptureFixture[str], cdk_calls: list[list[str]]
) -> None:
    name = _name("new")
    assert cli.main(["cluster", "update", str(_config(tmp_path, name)), "--dryrun"]) == 1
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith(f"elastic-slurm cluster: no deployed cluster in this file: {name} (us-east-1) has no")
    assert cdk_calls == []


def test_a_deployed_config_that_no_longer_validates_is_one_line(
    endpoint: EmulatedAws, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    name = _name("old")
    path = _config(tmp_path, name)
    _deploy(endpoint, path)
    bad = tmp_path / "bad.yaml"  # a deployed object written by an older version with a key since removed
    bad.write_text(path.read_text() + "retired_key: 1\n")
    deploy_config(endpoint.client, load(path).clusters[0], bad)
    assert cli.main(["cluster", "update", str(path), "--dryrun"]) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert "does not validate with this version: retired_key: unknown key 'retired_key'" in line
    assert line.endswith("compare with a local copy instead: --against OLD.yaml")


def test_create_refuses_a_deployed_cluster(
    endpoint: EmulatedAws, tmp_path: Path, capsys: pytest.CaptureFixture[str], cdk_calls: list[list[str]]
) -> None:
    name = _name("dup")
    path = _config(tmp_path, name)
    assert cli.main(["cluster", "create", str(path)]) == 0  # not deployed yet: deploys
    assert cdk_calls == [cdk.deploy_command(path)]
    _deploy(endpoint, path)
    assert cli.main(["cluster", "create", str(path)]) == 1
    assert f"cluster {name} is deployed already in us-east-1" in capsys.readouterr().err
    assert len(cdk_calls) == 1


def _stack(aws: EmulatedAws, cluster: str, part: str, tagged: bool = False) -> None:
    """A stack named like the app's; untagged like the real ones (cdk.json: @aws-cdk/core:explicitStackTags)."""
    tags = [{"Key": TAG_CLUSTER, "Value": cluster}] if tagged else []
    aws.client("cloudformation", REGION).create_stack(
        StackName=f"es-{cluster}-{part}", TemplateBody=TINY_TEMPLATE, Tags=tags
    )


def _controller(aws: EmulatedAws, cluster: str) -> str:
    ec2 = aws.client("ec2", REGION)
    image = public_image(ec2)
    tags = [
        {"Key": "Name", "Value": f"{cluster}-controller-0"},
        {"Key": TAG_CLUSTER, "Value": cluster},
        {"Key": TAG_ROLE, "Value": "controller"},
    ]
    answer = ec2.run_instances(
        ImageId=image,
        InstanceType="c7i.large",
        MinCount=1,
        MaxCount=1,
        TagSpecifications=[{"ResourceType": "instance", "Tags": tags}],
    )
    return str(answer["Instances"][0]["InstanceId"])


def test_status_shows_stacks_controllers_and_config(
    endpoint: EmulatedAws, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    name = _name("st")
    path = _config(tmp_path, name)
    url = _deploy(endpoint, path)
    for part in ("network", "cluster", "region-us-west-2"):
        _stack(endpoint, name, part)
    _stack(endpoint, name, "storage", tagged=True)
    for part in ("cluster", "network"):  # es-NAME-x-* belong to cluster NAME-x
        _stack(endpoint, f"{name}-x", part)
    _stack(endpoint, f"{name}-y", "storage", tagged=True)
    instance = _controller(endpoint, name)
    assert cli.main(["cluster", "status", name, "--region", REGION]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[:2] == [f"cluster {name} ({REGION})", f"  config: {url}"]
    stacks = [line.split() for line in out.splitlines() if line.startswith("    es-")]
    assert stacks == [
        [f"es-{name}-{part}", REGION, "CREATE_COMPLETE"]
        for part in ("cluster", "network", "region-us-west-2", "storage")
    ]
    assert f"{name}-controller-0  {instance}  running  c7i.large" in out
    # the same from the file
    assert cli.main(["cluster", "status", str(path)]) == 0
    assert capsys.readouterr().out == out


def test_status_of_an_unknown_cluster(endpoint: EmulatedAws, capsys: pytest.CaptureFixture[str]) -> None:
    name = _name("none")
    assert cli.main(["cluster", "status", name, "--region", REGION]) == 1
    assert capsys.readouterr().err.strip() == (
        f"elastic-slurm cluster: not deployed: {name} ({REGION}): no es-NAME-* stack, controller or config-url parameter"
    )


def test_list_shows_every_cluster_of_the_region(
    endpoint: EmulatedAws, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    full, config_only, stack_only = _name("la"), _name("lb"), _name("lc")
    url = _deploy(endpoint, _config(tmp_path, full, "full.yaml"))
    _stack(endpoint, full, "cluster")
    only_url = _deploy(endpoint, _config(tmp_path, config_only, "config.yaml"))
    _stack(endpoint, stack_only, "cluster", tagged=True)
    _stack(endpoint, stack_only, "network")
    _stack(endpoint, f"{stack_only}-x", "network")  # no cluster stack: not listed
    assert cli.main(["cluster", "list", "--region", REGION]) == 0
    lines = {line.split()[0]: line.split() for line in capsys.readouterr().out.splitlines()}
    assert lines[full] == [full, "CREATE_COMPLETE", url]
    assert lines[config_only] == [config_only, "(no", "cluster", "stack)", only_url]
    assert lines[stack_only] == [stack_only, "CREATE_COMPLETE", "(no", "config-url", "parameter)"]
    assert f"{stack_only}-x" not in lines
