"""`elastic-slurm connect` against the emulated AWS: which instance it picks (the cluster's tags, running only), the
exact `aws ssm start-session` line, and one-line errors for no instance or missing tools."""

from __future__ import annotations

import os
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from elastic_slurm.cli import main
from elastic_slurm.commands import connect_cmd
from localcloud.aws.emulated_aws import EmulatedAws
from stacks.naming import TAG_CLUSTER, TAG_LOGIN_POOL, TAG_ROLE
from tests.aws.plugin_env import public_image


def _cluster() -> str:
    return f"conn-{uuid.uuid4().hex[:8]}"


def _launch(
    aws: EmulatedAws, cluster: str, role: str, name: str | None = None, login_pool: str | None = None
) -> dict[str, Any]:
    ec2 = aws.client("ec2")
    ami = public_image(ec2)
    tags = [{"Key": TAG_CLUSTER, "Value": cluster}, {"Key": TAG_ROLE, "Value": role}]
    if name:
        tags.append({"Key": "Name", "Value": name})
    if login_pool:
        tags.append({"Key": TAG_LOGIN_POOL, "Value": login_pool})
    spec = [{"ResourceType": "instance", "Tags": tags}]
    return dict(ec2.run_instances(ImageId=ami, MinCount=1, MaxCount=1, TagSpecifications=spec)["Instances"][0])


def _connect(aws: EmulatedAws, cluster: str, *extra: str) -> int:
    return main(["connect", cluster, "--region", "us-east-1", "--endpoint-url", aws.url, "--print", *extra])


def _line(iid: str) -> str:
    return f"aws ssm start-session --target {iid} --region us-east-1\n"


def test_the_newest_running_controller_is_chosen_never_a_stopped_or_terminated_one(
    aws: EmulatedAws, capsys: pytest.CaptureFixture[str]
) -> None:
    cluster = _cluster()
    ec2 = aws.client("ec2")
    old = _launch(aws, cluster, "controller", f"{cluster}-controller-0")["InstanceId"]
    _launch(aws, cluster, "compute")  # a compute node is never "the controller"
    _launch(aws, _cluster(), "controller")  # another cluster's controller
    time.sleep(1.1)  # EC2 launch times have a one-second resolution
    new = _launch(aws, cluster, "controller", f"{cluster}-controller-0")["InstanceId"]  # a replaced controller
    assert _connect(aws, cluster) == 0
    assert capsys.readouterr().out == _line(new)
    time.sleep(1.1)
    stopped = _launch(aws, cluster, "controller", f"{cluster}-controller-1")["InstanceId"]
    terminated = _launch(aws, cluster, "controller", f"{cluster}-controller-1")["InstanceId"]
    ec2.stop_instances(InstanceIds=[stopped])
    ec2.terminate_instances(InstanceIds=[terminated])
    assert _connect(aws, cluster) == 0
    assert capsys.readouterr().out == _line(new)
    ec2.terminate_instances(InstanceIds=[new])
    assert _connect(aws, cluster, "--controller") == 0
    assert capsys.readouterr().out == _line(old)


def test_controller_n_is_found_by_its_name_tag(aws: EmulatedAws, capsys: pytest.CaptureFixture[str]) -> None:
    cluster = _cluster()
    _launch(aws, cluster, "controller", f"{cluster}-controller-0")
    backup = _launch(aws, cluster, "controller", f"{cluster}-controller-1")["InstanceId"]
    assert _connect(aws, cluster, "--controller", "1") == 0
    assert capsys.readouterr().out == _line(backup)


def test_a_node_is_found_by_instance_id_private_ip_host_name_or_name_tag(
    aws: EmulatedAws, capsys: pytest.CaptureFixture[str]
) -> None:
    cluster = _cluster()
    node = _launch(aws, cluster, "compute")
    controller = _launch(aws, cluster, "controller", f"{cluster}-controller-0")
    ip = node["PrivateIpAddress"]
    for name in (node["InstanceId"], ip, "ip-" + ip.replace(".", "-"), "ip-" + ip.replace(".", "-") + ".ec2.internal"):
        assert _connect(aws, cluster, "--node", name) == 0
        assert capsys.readouterr().out == _line(node["InstanceId"])
    assert _connect(aws, cluster, "--node", f"{cluster}-controller-0") == 0
    assert capsys.readouterr().out == _line(controller["InstanceId"])


def test_a_login_node_is_the_newest_running_one_of_the_cluster_or_of_its_pool(
    aws: EmulatedAws, capsys: pytest.CaptureFixture[str]
) -> None:
    cluster = _cluster()
    _launch(aws, cluster, "controller", f"{cluster}-controller-0")
    users = _launch(aws, cluster, "login", login_pool="users")["InstanceId"]
    time.sleep(1.1)  # EC2 launch times have a one-second resolution
    gpu = _launch(aws, cluster, "login", login_pool="viz")["InstanceId"]
    _launch(aws, _cluster(), "login", login_pool="users")  # another cluster's
    assert _connect(aws, cluster, "--login") == 0
    assert capsys.readouterr().out == _line(gpu)
    assert _connect(aws, cluster, "--login", "users") == 0
    assert capsys.readouterr().out == _line(users)
    aws.client("ec2").terminate_instances(InstanceIds=[users])
    assert _connect(aws, cluster, "--login", "users") == 1
    err = capsys.readouterr().err.strip()
    assert err == (
        f"elastic-slurm connect: --login: no running login node of login pool users of cluster {cluster} in us-east-1 "
        f"(clusters[].login_nodes, tag {TAG_ROLE}=login)"
    )


def test_no_running_instance_is_one_line_and_exit_1(aws: EmulatedAws, capsys: pytest.CaptureFixture[str]) -> None:
    cluster = _cluster()
    assert _connect(aws, cluster) == 1
    err = capsys.readouterr().err
    assert err == (
        f"elastic-slurm connect: no running controller of cluster {cluster} in us-east-1 "
        f"(tags {TAG_CLUSTER}={cluster}, {TAG_ROLE}=controller)\n"
    )
    stopped = _launch(aws, cluster, "compute")
    aws.client("ec2").stop_instances(InstanceIds=[stopped["InstanceId"]])
    assert _connect(aws, cluster, "--node", stopped["InstanceId"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert err.startswith(f"elastic-slurm connect: --node: no running instance of cluster {cluster} in us-east-1")
    assert _connect(aws, cluster, "--node", "cpu-c7i-1") == 1  # a Slurm node name: no such tag on instances
    assert "NodeAddr" in capsys.readouterr().err
    assert _connect(aws, cluster, "--controller", "1") == 1
    assert capsys.readouterr().err == (
        f"elastic-slurm connect: --controller: no running controller of cluster {cluster} in us-east-1 "
        f"is named {cluster}-controller-1\n"
    )


def _tools(tmp_path: Path, *names: str) -> str:
    """A PATH holding only stand-ins for `names`."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    for name in names:
        tool = bin_dir / name
        tool.write_text("#!/bin/sh\nexit 0\n")
        tool.chmod(0o755)
    return str(bin_dir)


def test_without_print_it_execs_the_aws_cli(
    aws: EmulatedAws, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    cluster = _cluster()
    iid = _launch(aws, cluster, "controller", f"{cluster}-controller-0")["InstanceId"]
    monkeypatch.setenv("PATH", _tools(tmp_path, "aws", "session-manager-plugin"))
    monkeypatch.setenv("AWS_ENDPOINT_URL", aws.url)  # the lookup honours the environment's endpoint too
    calls: list[tuple[str, list[str]]] = []
    monkeypatch.setattr(os, "execvp", lambda file, argv: calls.append((file, list(argv))))
    assert main(["connect", cluster, "--region", "us-east-1"]) == 0
    assert calls == [("aws", ["aws", "ssm", "start-session", "--target", iid, "--region", "us-east-1"])]
    assert capsys.readouterr().err == f"elastic-slurm connect: {iid} ({cluster}-controller-0, " + (
        aws.client("ec2").describe_instances(InstanceIds=[iid])["Reservations"][0]["Instances"][0]["PrivateIpAddress"]
        + ", running)\n"
    )


@pytest.mark.parametrize(
    ("present", "missing", "link"),
    [
        ((), "the AWS CLI (`aws`)", connect_cmd.AWS_CLI_DOCS),
        (("aws",), "`session-manager-plugin`", connect_cmd.PLUGIN_DOCS),
    ],
)
def test_a_missing_tool_is_one_line_saying_what_to_install(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    present: tuple[str, ...],
    missing: str,
    link: str,
) -> None:
    monkeypatch.setenv("PATH", _tools(tmp_path, *present))
    monkeypatch.setattr(os, "execvp", lambda *_: pytest.fail("must not exec"))
    assert main(["connect", "c1", "--region", "us-east-1"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and missing in err and link in err and "install" in err


def test_bad_name_region_or_index_is_one_line_naming_it(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["connect", "Bad_Name", "--region", "us-east-1", "--print"]) == 2
    assert capsys.readouterr().err.startswith("elastic-slurm connect: NAME: ")
    assert main(["connect", "c1", "--region", "useast1", "--print"]) == 2
    assert capsys.readouterr().err.startswith("elastic-slurm connect: --region: ")
    assert main(["connect", "c1", "--region", "us-east-1", "--controller", "-3", "--print"]) == 2
    assert capsys.readouterr().err.startswith("elastic-slurm connect: --controller: ")


@pytest.mark.usefixtures("no_aws_credentials")
def test_an_aws_failure_is_one_line_and_exit_1(
    aws: EmulatedAws, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert _connect(aws, _cluster()) == 1
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith("elastic-slurm connect: aws: ") and "credentials" in line
    argv = ["logs", "export", _cluster(), "--region", "us-east-1", "--endpoint-url", aws.url, "--out", str(tmp_path)]
    assert main(argv) == 1
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith("elastic-slurm logs: aws: ") and "credentials" in line
