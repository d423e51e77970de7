"""`elastic-slurm cluster ...` without AWS: the exact CDK command lines, refusals before any CDK call, `update
--against` offline, and the `create --dryrun` listing of a cloud assembly. (Against the emulated AWS:
tests/aws/test_cluster_lifecycle.py.)"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml

from elastic_slurm import cli
from elastic_slurm.commands import cluster_cmd
from elastic_slurm.commands.synth_cmd import CDK_ENV, REPO_ROOT, cdk_app_command
from elastic_slurm.lifecycle import cdk
from elastic_slurm.lifecycle.assembly import stacks_of
from elastic_slurm.lifecycle.status import belongs_to, cluster_of

Calls = list[list[str]]
MINIMAL = REPO_ROOT / "cluster_config" / "examples" / "minimal.yaml"


@pytest.fixture
def cdk_calls(monkeypatch: pytest.MonkeyPatch) -> Calls:
    """Every CDK CLI command the command runs (none really runs)."""
    calls: list[list[str]] = []

    def fake(command: list[str]) -> int:
        calls.append(command)
        return 0

    monkeypatch.setattr(cdk, "run_cdk", fake)
    return calls


@pytest.fixture(autouse=True)
def credentials(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Commands that deploy check the credentials first (STS); here they work. The regions asked."""
    asked: list[str] = []

    def account(region: str) -> str:
        asked.append(region)
        return "111122223333"

    monkeypatch.setattr(cluster_cmd, "caller_account", account)
    return asked


def _edited(tmp_path: Path, name: str, edit: Any) -> Path:
    data = yaml.safe_load(MINIMAL.read_text())
    edit(data)
    path = tmp_path / name
    path.write_text(yaml.safe_dump(data))
    return path


def _bigger(data: dict[str, Any]) -> None:
    data["clusters"][0]["partitions"][0]["pools"][0]["max_nodes"] = 40


def _new_cidr(data: dict[str, Any]) -> None:
    data["clusters"][0]["network"]["vpc_cidr"] = "100.65.0.0/16"


def test_deploy_and_destroy_command_lines(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(CDK_ENV, "true")  # any executable: the command line names it first
    cli_file = shutil.which("true")
    config = tmp_path / "c.yaml"
    app = ["--app", cdk_app_command()]
    assert cdk.deploy_command(config) == [
        str(cli_file),
        "deploy",
        "--all",
        "-c",
        f"config={config.resolve()}",
        "--require-approval",
        "broadening",
        *app,
    ]
    assert cdk.deploy_command(config, yes=True)[6] == "never"
    assert cdk.diff_command(config) == [str(cli_file), "diff", "--all", "-c", f"config={config.resolve()}", *app]
    assert cdk.destroy_command(config) == [
        str(cli_file),
        "destroy",
        "--all",
        "--force",
        "-c",
        f"config={config.resolve()}",
        *app,
    ]


def test_cdk_env_keeps_instance_metadata_on() -> None:
    assert "AWS_EC2_METADATA_DISABLED" not in cdk.cdk_env({"PATH": "/usr/bin"})
    assert cdk.cdk_env({"AWS_EC2_METADATA_DISABLED": "true"})["AWS_EC2_METADATA_DISABLED"] == "true"


def test_update_dryrun_against_a_file(tmp_path: Path, capsys: pytest.CaptureFixture[str], cdk_calls: Calls) -> None:
    new = _edited(tmp_path, "new.yaml", _bigger)
    assert cli.main(["cluster", "update", str(new), "--dryrun", "--against", str(MINIMAL)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "clusters[0].partitions[0].pools[0].max_nodes: 16 -> 40  (reconfigure)"
    assert out[1].startswith(f"1 change(s) against {MINIMAL}; worst: reconfigure — ")
    assert cdk_calls == []


def test_update_refuses_not_allowed_before_deploying(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], cdk_calls: Calls
) -> None:
    def both(data: dict[str, Any]) -> None:
        _bigger(data)
        _new_cidr(data)

    new = _edited(tmp_path, "new.yaml", both)
    assert cli.main(["cluster", "update", str(new), "--against", str(MINIMAL)]) == 2
    captured = capsys.readouterr()
    old = yaml.safe_load(MINIMAL.read_text())["clusters"][0]["network"]["vpc_cidr"]
    assert f"clusters[0].network.vpc_cidr: {old} -> 100.65.0.0/16  (not allowed)" in captured.out
    assert "worst: not allowed" in captured.out
    (line,) = captured.err.splitlines()
    assert line.startswith("elastic-slurm cluster: clusters[0].network.vpc_cidr: not allowed: create-only")
    assert cdk_calls == []


def test_update_deploys_allowed_changes(tmp_path: Path, capsys: pytest.CaptureFixture[str], cdk_calls: Calls) -> None:
    new = _edited(tmp_path, "new.yaml", _bigger)
    assert cli.main(["cluster", "update", str(new), "--against", str(MINIMAL)]) == 0
    assert cdk_calls == [cdk.deploy_command(new)]


def _new_pool(data: dict[str, Any]) -> None:
    pool = data["clusters"][0]["partitions"][0]["pools"][0]
    data["clusters"][0]["partitions"][0]["pools"].append({**pool, "name": "extra"})


@pytest.mark.parametrize(
    ("edit", "first"),
    [
        (lambda d: d["clusters"][0].update(controller={"instance_type": "c7i.xlarge"}), "controller.instance_type"),
        (lambda d: d["clusters"][0]["partitions"][0]["pools"].pop(), "pools[1]: removed pool 'extra'"),
    ],
    ids=["controller-replaced", "pool-removed"],
)
def test_update_acting_on_running_work_needs_yes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], cdk_calls: Calls, edit: Any, first: str
) -> None:
    old = _edited(tmp_path, "old.yaml", _new_pool)  # two pools, so one can go
    new = _edited(tmp_path, "new.yaml", lambda d: (_new_pool(d), edit(d)))
    assert cli.main(["cluster", "update", str(new), "--against", str(old)]) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith("elastic-slurm cluster: --yes: 1 change(s) act on running work (first: clusters[0].")
    assert first in line
    assert cdk_calls == []
    assert cli.main(["cluster", "update", str(new), "--against", str(old), "--yes"]) == 0
    assert cdk_calls == [cdk.deploy_command(new, yes=True)]


def test_update_names_a_missing_file(tmp_path: Path, capsys: pytest.CaptureFixture[str], cdk_calls: Calls) -> None:
    assert cli.main(["cluster", "update", str(MINIMAL), "--against", str(tmp_path / "nope.yaml")]) == 2
    assert (
        capsys.readouterr().err.strip() == f"elastic-slurm cluster: --against: {tmp_path / 'nope.yaml'}: no such file"
    )
    assert cdk_calls == []


def test_create_refuses_a_deployed_cluster_before_deploying(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], cdk_calls: Calls
) -> None:
    monkeypatch.setattr(cluster_cmd, "config_url", lambda name, region: "s3://bucket/abc.yaml")
    assert cli.main(["cluster", "create", str(MINIMAL)]) == 1
    (line,) = capsys.readouterr().err.splitlines()
    assert line == (
        "elastic-slurm cluster: cluster minimal is deployed already in us-east-1 (/elastic-slurm/minimal/config-url"
        f" = s3://bucket/abc.yaml): change it with `elastic-slurm cluster update {MINIMAL}`"
    )
    assert cdk_calls == []


def test_create_deploys_a_new_cluster(monkeypatch: pytest.MonkeyPatch, cdk_calls: Calls) -> None:
    asked: list[tuple[str, str]] = []
    monkeypatch.setattr(cluster_cmd, "config_url", lambda name, region: asked.append((name, region)))
    assert cli.main(["cluster", "create", str(MINIMAL)]) == 0
    assert asked == [("minimal", "us-east-1")]
    assert cdk_calls == [cdk.deploy_command(MINIMAL)]


def test_create_refuses_an_invalid_config(tmp_path: Path, capsys: pytest.CaptureFixture[str], cdk_calls: Calls) -> None:
    bad = _edited(tmp_path, "bad.yaml", lambda d: d["clusters"][0].update(region="nowhere"))
    assert cli.main(["cluster", "create", str(bad), "--dryrun"]) == 3
    assert "clusters[0].region" in capsys.readouterr().err
    assert cdk_calls == []


def test_delete_refuses_what_is_neither_file_nor_name(capsys: pytest.CaptureFixture[str], cdk_calls: Calls) -> None:
    assert cli.main(["cluster", "delete", "Not_A_Name", "--region", "us-east-1"]) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line == "elastic-slurm cluster: NAME: 'Not_A_Name' is neither a file nor a cluster name"
    assert cdk_calls == []


def test_status_refuses_what_is_neither_file_nor_name(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["cluster", "status", "Not_A_Name"]) == 2
    assert "neither a file nor a cluster name" in capsys.readouterr().err


def test_list_refuses_a_bad_region(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["cluster", "list", "--region", "mars"]) == 2
    assert (
        capsys.readouterr().err.strip()
        == "elastic-slurm cluster: --region: 'mars' is not an AWS region (e.g. us-east-1)"
    )


def _assembly(out: Path) -> None:
    out.mkdir()
    artifacts: dict[str, Any] = {"Tree": {"type": "cdk:tree", "properties": {"file": "tree.json"}}}
    for name, count in (("es-c-network", 3), ("es-c-cluster", 2)):
        (out / f"{name}.template.json").write_text(json.dumps({"Resources": {f"R{i}": {} for i in range(count)}}))
        artifacts[name] = {
            "type": "aws:cloudformation:stack",
            "environment": "aws://123456789012/us-east-1",
            "properties": {"templateFile": f"{name}.template.json"},
        }
    (out / "manifest.json").write_text(json.dumps({"artifacts": artifacts}))


def test_create_dryrun_lists_the_stacks_of_the_assembly(tmp_path: Path) -> None:
    _assembly(tmp_path / "out")
    stacks = stacks_of(tmp_path / "out")
    assert [(s.name, s.region, s.resources) for s in stacks] == [
        ("es-c-network", "us-east-1", 3),
        ("es-c-cluster", "us-east-1", 2),
    ]
    assert cluster_cmd.dryrun_lines("c.yaml", stacks) == [
        "c.yaml: valid; `cluster create` would create 2 stack(s):",
        "  es-c-network  us-east-1         3 resources",
        "  es-c-cluster  us-east-1         2 resources",
        "  5 resources in all",
    ]


def test_create_dryrun_synthesizes_and_prints(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], cdk_calls: Calls
) -> None:
    synthesized: list[Path] = []

    def fake_synth(path: Path, out: Path) -> int:
        synthesized.append(path)
        _assembly(out / "x")
        return 0

    monkeypatch.setattr(cluster_cmd, "_synth", fake_synth)
    monkeypatch.setattr(cluster_cmd, "stacks_of", lambda out: stacks_of(out / "x"))
    assert cli.main(["cluster", "create", str(MINIMAL), "--dryrun", "--out", str(tmp_path)]) == 0
    assert synthesized == [MINIMAL]
    assert "would create 2 stack(s)" in capsys.readouterr().out
    assert cdk_calls == []  # no deploy, and no AWS call (config_url is not reached)


@pytest.mark.parametrize(
    ("stack", "cluster", "ours"),
    [
        ("es-a-network", "a", True),
        ("es-a-region-us-west-2", "a", True),
        ("es-a-network-eu-central-1", "a", True),
        ("es-a-federation-bc", "a", True),
        ("es-a-b-network", "a", False),  # cluster a-b's
        ("es-a-b-network", "a-b", True),
        ("es-a-something", "a", False),
        ("other-a-network", "a", False),
    ],
)
def test_stacks_belong_to_a_cluster_by_name(stack: str, cluster: str, ours: bool) -> None:
    assert belongs_to({"StackName": stack}, cluster) is ours


def test_a_tag_on_a_stack_must_name_the_cluster() -> None:
    tagged = {"StackName": "es-a-cluster", "Tags": [{"Key": "elastic-slurm:cluster", "Value": "b"}]}
    assert not belongs_to(tagged, "a")
    assert cluster_of(tagged) is None
    assert cluster_of({"StackName": "es-a-b-cluster"}) == "a-b"
    assert cluster_of({"StackName": "es-a-b-network"}) is None
