"""`elastic-slurm cluster delete NAME --region R`, `cluster diff`, and the `--output json` of `cluster status|list`,
`fleet status` against the emulated AWS (botocore follows $AWS_ENDPOINT_URL). Delete works from the deployed config
(SSM parameter → S3 object, as `cdk deploy` leaves them: localcloud/instances/controller_boot.py deploy_config), names
every stack before asking, never deletes a multi-cluster config without every cluster named, and checks credentials
and existence before anything reaches the CDK CLI. The CDK CLI itself is replaced by a recorder."""

from __future__ import annotations

import json
import re
import uuid
from pathlib import Path
from typing import Any

import pytest
import yaml

from cluster_config import load
from elastic_slurm import cli
from elastic_slurm.commands import cluster_delete
from elastic_slurm.lifecycle import cdk
from localcloud.aws.emulated_aws import EmulatedAws
from localcloud.instances.controller_boot import assets_bucket, deploy_config

REPO_ROOT = Path(__file__).resolve().parents[2]
REGION = "us-east-1"
TINY_TEMPLATE = json.dumps({"Resources": {"Topic": {"Type": "AWS::SNS::Topic"}}})


@pytest.fixture
def destroyed(monkeypatch: pytest.MonkeyPatch) -> list[tuple[list[str], str]]:
    """Every CDK CLI command run, with the text of the config file it names (read while the command runs)."""
    calls: list[tuple[list[str], str]] = []

    def fake(command: list[str]) -> int:
        config = next(a.removeprefix("config=") for a in command if a.startswith("config="))
        calls.append((command, Path(config).read_text(encoding="utf-8")))
        return 0

    monkeypatch.setattr(cdk, "run_cdk", fake)
    return calls


def _name(prefix: str) -> str:
    return f"{prefix}{uuid.uuid4().hex[:8]}"


def _deploy(aws: EmulatedAws, path: Path) -> dict[str, str]:
    """The config objects and parameters `cdk deploy` leaves for every cluster of the file; name → URL."""
    urls = {}
    for cluster in load(path).clusters:
        s3 = aws.client("s3", cluster.region)
        where = (
            {}
            if cluster.region == "us-east-1"
            else {"CreateBucketConfiguration": {"LocationConstraint": cluster.region}}
        )
        s3.create_bucket(Bucket=assets_bucket(cluster.name), **where)
        urls[cluster.name] = deploy_config(aws.client, cluster, path)
    return urls


def _stack(aws: EmulatedAws, cluster: str, part: str, region: str = REGION) -> None:
    aws.client("cloudformation", region).create_stack(StackName=f"es-{cluster}-{part}", TemplateBody=TINY_TEMPLATE)


def _minimal(tmp_path: Path, name: str) -> Path:
    data = yaml.safe_load((REPO_ROOT / "cluster_config/examples/minimal.yaml").read_text())
    data["clusters"][0]["name"] = name
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def _federation(tmp_path: Path, east: str, west: str) -> Path:
    """federation.yaml with its clusters `east` and `west` renamed (everywhere they are named, not `us-east-1`)."""
    text = (REPO_ROOT / "cluster_config/examples/federation.yaml").read_text()
    for old, new in (("east", east), ("west", west)):
        text = re.sub(rf"(?<![-\w]){old}(?![-\w])", new, text)
    path = tmp_path / "fed.yaml"
    path.write_text(text)
    assert [c.name for c in load(path).clusters] == [east, west]
    return path


def test_delete_by_name_destroys_the_deployed_config_after_naming_every_stack(
    endpoint: EmulatedAws, tmp_path: Path, capsys: pytest.CaptureFixture[str], destroyed: list[Any]
) -> None:
    name = _name("del")
    path = _minimal(tmp_path, name)
    url = _deploy(endpoint, path)[name]
    for part in ("network", "cluster"):
        _stack(endpoint, name, part)
    assert cli.main(["cluster", "delete", name, "--region", REGION, "--yes"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith(f"cluster delete: cluster(s) {name} ({REGION}), account ") and out[0].endswith(url)
    assert out[1] == "  2 stack(s), every resource in them, controllers and compute instances:"
    assert out[2:4] == [
        f"    es-{name}-cluster  {REGION}  CREATE_COMPLETE",
        f"    es-{name}-network  {REGION}  CREATE_COMPLETE",
    ]
    ((command, text),) = destroyed
    assert command[1:4] == ["destroy", "--all", "--force"]
    assert text == path.read_text()  # the deployed object, not a local file


def test_delete_asks_and_does_nothing_unless_confirmed(
    endpoint: EmulatedAws,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    destroyed: list[Any],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    name = _name("ask")
    _deploy(endpoint, _minimal(tmp_path, name))
    # no terminal and no --yes: nothing deleted, one line
    monkeypatch.setattr("sys.stdin.isatty", lambda: False)
    assert cli.main(["cluster", "delete", name, "--region", REGION]) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith("elastic-slurm cluster: --yes: nothing deleted: no terminal")
    monkeypatch.setattr("sys.stdin.isatty", lambda: True)
    answers = iter(["yes", name])
    monkeypatch.setattr(cluster_delete, "input", lambda prompt: next(answers), raising=False)
    assert cli.main(["cluster", "delete", name, "--region", REGION]) == 1  # "yes" is not the cluster's name
    assert capsys.readouterr().err.strip() == "elastic-slurm cluster: not confirmed: nothing deleted"
    assert destroyed == []
    assert cli.main(["cluster", "delete", name, "--region", REGION]) == 0
    assert len(destroyed) == 1

    def end_of_input(prompt: str) -> str:
        raise EOFError

    monkeypatch.setattr(cluster_delete, "input", end_of_input, raising=False)  # Ctrl-D at the prompt
    assert cli.main(["cluster", "delete", name, "--region", REGION]) == 1
    assert "not confirmed: nothing deleted" in capsys.readouterr().err and len(destroyed) == 1


def test_a_multi_cluster_config_is_deleted_only_with_every_cluster_named(
    endpoint: EmulatedAws, tmp_path: Path, capsys: pytest.CaptureFixture[str], destroyed: list[Any]
) -> None:
    east, west = _name("e"), _name("w")
    _deploy(endpoint, _federation(tmp_path, east, west))
    _stack(endpoint, west, "cluster", "us-west-2")
    assert cli.main(["cluster", "delete", east, "--region", REGION, "--yes"]) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert f"NAME: {east} was deployed from one config with {west}; they are deleted together" in line
    assert line.endswith(f"name them all: elastic-slurm cluster delete {east} {west} --region {REGION}")
    assert destroyed == []
    assert cli.main(["cluster", "delete", east, west, "--region", REGION, "--yes"]) == 0
    out = capsys.readouterr().out
    assert f"cluster(s) {east} ({REGION}), {west} (us-west-2)" in out and f"es-{west}-cluster  us-west-2" in out
    assert len(destroyed) == 1


def test_delete_of_nothing_deployed_is_one_line_before_any_synth(
    endpoint: EmulatedAws, tmp_path: Path, capsys: pytest.CaptureFixture[str], destroyed: list[Any]
) -> None:
    name = _name("gone")
    assert cli.main(["cluster", "delete", name, "--region", REGION, "--yes"]) == 1
    assert capsys.readouterr().err.strip() == (
        f"elastic-slurm cluster: NAME: no cluster '{name}' is deployed in {REGION} (no es-{name}-* stack, no parameter)"
    )
    assert cli.main(["cluster", "delete", str(_minimal(tmp_path, name)), "--yes"]) == 1
    assert "nothing of" in capsys.readouterr().err
    assert destroyed == []


@pytest.mark.usefixtures("no_aws_credentials")
def test_without_credentials_delete_and_diff_stop_at_one_line(
    endpoint: EmulatedAws,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    destroyed: list[Any],
) -> None:
    path = _minimal(tmp_path, _name("cred"))
    for argv in (["cluster", "delete", "anyname", "--region", REGION], ["cluster", "diff", str(path)]):
        assert cli.main(argv) == 1
        (line,) = capsys.readouterr().err.splitlines()
        assert line.startswith(f"elastic-slurm cluster: AWS credentials ({REGION}; `aws sts get-caller-identity`")
        assert "Unable to locate credentials" in line and "123456789012" not in line
    assert destroyed == []


def test_diff_runs_cdk_diff_of_the_file(endpoint: EmulatedAws, tmp_path: Path, destroyed: list[Any]) -> None:
    path = _minimal(tmp_path, _name("diff"))
    assert cli.main(["cluster", "diff", str(path)]) == 0
    ((command, text),) = destroyed
    assert command == cdk.diff_command(path) and text == path.read_text()


def test_status_list_and_fleet_status_as_json(
    endpoint: EmulatedAws, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    name = _name("js")
    url = _deploy(endpoint, _minimal(tmp_path, name))[name]
    _stack(endpoint, name, "cluster")
    assert cli.main(["cluster", "status", name, "--region", REGION, "--output", "json"]) == 0
    (status,) = json.loads(capsys.readouterr().out)["clusters"]
    assert status == {
        "name": name,
        "region": REGION,
        "deployed": True,
        "config_url": url,
        "stacks": [{"name": f"es-{name}-cluster", "region": REGION, "status": "CREATE_COMPLETE", "reason": ""}],
        "controllers": [],
    }
    assert cli.main(["cluster", "list", "--region", REGION, "--output", "json"]) == 0
    listing = json.loads(capsys.readouterr().out)
    assert listing["region"] == REGION
    assert {"name": name, "stack_status": "CREATE_COMPLETE", "config_url": url} in listing["clusters"]
    assert cli.main(["fleet", "status", name, "--output", "json"]) == 0
    assert json.loads(capsys.readouterr().out) == {"cluster": name, "region": REGION, "fleet": "RUNNING"}
    missing = _name("none")
    assert cli.main(["cluster", "status", missing, "--region", REGION, "--output", "json"]) == 1
    captured = capsys.readouterr()
    assert json.loads(captured.out)["clusters"][0]["deployed"] is False and len(captured.err.splitlines()) == 1
