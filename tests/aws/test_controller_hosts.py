"""slurm_plugin/controller_hosts.py, run as elastic-slurm-config-apply runs it (`python -m slurm_plugin.controller_hosts
CONFIG CLUSTER > facts.env`, credentials, region and endpoint from the environment) against the emulated EC2: a
controller is found by its Name tag AND the cluster and role tags, so an instance that only carries the Name (anyone
who may launch in the account can name one so) never becomes a SlurmctldHost; the slurmdbd host of another cluster
is looked up in its own region; what it writes is read back by bash as config apply reads it. (Every local-cloud
controller boot runs it too: the found path.)"""

from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from localcloud.aws.emulated_aws import DUMMY_CREDENTIALS, EmulatedAws
from slurm_plugin import controller_hosts
from slurm_plugin.controller_hosts import Facts, newest_host
from slurm_plugin.naming import TAG_CLUSTER, TAG_ROLE
from tests.aws.plugin_env import public_image

EXAMPLES = Path(__file__).resolve().parents[2] / "cluster_config" / "examples"


def _config(tmp_path: Path, example: str, renames: dict[str, str]) -> Path:
    """An example config with its clusters renamed (exact lines): the session's emulated EC2 is shared."""
    text = (EXAMPLES / example).read_text()
    for old, new in renames.items():
        assert old in text, old
        text = text.replace(old, new)
    path = tmp_path / example
    path.write_text(text)
    return path


def _launch(aws: EmulatedAws, region: str, tags: dict[str, str]) -> dict[str, Any]:
    ec2 = aws.client("ec2", region=region)
    spec = [{"ResourceType": "instance", "Tags": [{"Key": k, "Value": v} for k, v in tags.items()]}]
    answer = ec2.run_instances(ImageId=public_image(ec2), MinCount=1, MaxCount=1, TagSpecifications=spec)
    return dict(answer["Instances"][0])


def _controller(aws: EmulatedAws, region: str, cluster: str, index: int = 0) -> dict[str, Any]:
    tags = {"Name": f"{cluster}-controller-{index}", TAG_CLUSTER: cluster, TAG_ROLE: "controller"}
    return _launch(aws, region, tags)


def _run(aws: EmulatedAws, config: Path, cluster: str, region: str) -> subprocess.CompletedProcess[str]:
    env = {"PATH": os.environ["PATH"], "AWS_ENDPOINT_URL": aws.url, "ES_REGION": region, **DUMMY_CREDENTIALS}
    argv = [sys.executable, "-m", "slurm_plugin.controller_hosts", str(config), cluster]
    return subprocess.run(argv, env=env, capture_output=True, text=True, timeout=120, check=False)


def _sourced(tmp_path: Path, text: str) -> dict[str, str]:
    """The variables as config apply reads the file (`set -a; . facts.env; set +a`)."""
    facts = tmp_path / "facts.env"
    facts.write_text(text)
    names = "ES_CONTROLLER_HOSTS ES_SLURMDBD_HOST ES_ACCOUNTING_MODE ES_SHARED_MOUNT"
    script = f'set -a; . "$1"; set +a; for n in {names}; do printf "%s=%s\\n" "$n" "${{!n}}"; done'
    out = subprocess.run(["bash", "-c", script, "facts", str(facts)], capture_output=True, text=True, check=True)
    return dict(line.split("=", 1) for line in out.stdout.splitlines())


def _short(instance: dict[str, Any]) -> str:
    return f"{instance['PrivateDnsName'].split('.')[0]}({instance['PrivateIpAddress']})"


def test_an_instance_that_only_carries_the_controller_name_is_not_taken_for_the_controller(
    aws: EmulatedAws, tmp_path: Path
) -> None:
    cluster = f"hosts-{uuid.uuid4().hex[:8]}"
    config = _config(tmp_path, "minimal.yaml", {"  - name: minimal\n": f"  - name: {cluster}\n"})
    ours = _controller(aws, "us-east-1", cluster)
    time.sleep(1.1)  # launch times have one-second resolution: the stranger's is the newest
    stranger = _launch(aws, "us-east-1", {"Name": f"{cluster}-controller-0"})
    aws.reset_call_counts()
    result = _run(aws, config, cluster, "us-east-1")
    assert result.returncode == 0, result.stderr
    facts = _sourced(tmp_path, result.stdout)
    assert facts["ES_CONTROLLER_HOSTS"] == _short(ours)
    assert facts["ES_SLURMDBD_HOST"] == ours["PrivateIpAddress"]  # this cluster's controller 0, found once
    assert facts["ES_ACCOUNTING_MODE"] == "create"
    assert stranger["PrivateIpAddress"] not in result.stdout
    assert aws.call_counts().get("ec2:DescribeInstances") == 1


def test_two_controllers_are_listed_primary_first_with_the_shared_mount(aws: EmulatedAws, tmp_path: Path) -> None:
    cluster = f"hosts-{uuid.uuid4().hex[:8]}"
    two = f"  - name: {cluster}\n    controller: {{count: 2}}\n"
    config = _config(tmp_path, "minimal.yaml", {"  - name: minimal\n": two})
    backup = _controller(aws, "us-east-1", cluster, 1)  # launched first: the order comes from the index
    primary = _controller(aws, "us-east-1", cluster, 0)
    result = _run(aws, config, cluster, "us-east-1")
    assert result.returncode == 0, result.stderr
    facts = _sourced(tmp_path, result.stdout)
    assert facts["ES_CONTROLLER_HOSTS"] == f"{_short(primary)},{_short(backup)}"
    assert facts["ES_SLURMDBD_HOST"] == primary["PrivateIpAddress"]  # minimal.yaml keeps accounting on controller 0
    assert facts["ES_SHARED_MOUNT"] == "/shared"


def test_the_slurmdbd_host_of_another_cluster_is_looked_up_in_its_region(aws: EmulatedAws, tmp_path: Path) -> None:
    suffix = uuid.uuid4().hex[:6]
    east, west = f"east{suffix}", f"west{suffix}"
    renames = {
        "  - name: east\n": f"  - name: {east}\n",
        "  - name: west\n": f"  - name: {west}\n",
        "host_cluster: east\n": f"host_cluster: {east}\n",
        "clusters: {east: 60, west: 40}": f"clusters: {{{east}: 60, {west}: 40}}",
        "clusters: [east, west]": f"clusters: [{east}, {west}]",
        "burst_to: [east]": f"burst_to: [{east}]",
    }
    config = _config(tmp_path, "federation.yaml", renames)
    dbd = _controller(aws, "us-east-1", east)
    mine = _controller(aws, "us-west-2", west)
    _controller(aws, "us-west-2", east)  # east's Name and tags, but in the wrong region: not the slurmdbd host
    result = _run(aws, config, west, "us-west-2")
    assert result.returncode == 0, result.stderr
    facts = _sourced(tmp_path, result.stdout)
    assert facts["ES_CONTROLLER_HOSTS"] == _short(mine)
    assert facts["ES_SLURMDBD_HOST"] == dbd["PrivateIpAddress"]


def test_a_controller_that_never_appears_fails_in_one_line_after_the_bound(
    aws: EmulatedAws, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    cluster = f"hosts-{uuid.uuid4().hex[:8]}"
    config = _config(tmp_path, "minimal.yaml", {"  - name: minimal\n": f"  - name: {cluster}\n"})
    _launch(aws, "us-east-1", {"Name": f"{cluster}-controller-0"})  # only the Name: never taken
    monkeypatch.setattr(controller_hosts, "LOOKUPS", 3)
    monkeypatch.setattr(controller_hosts, "LOOKUP_PAUSE", 0.0)
    for name, value in {"AWS_ENDPOINT_URL": aws.url, **DUMMY_CREDENTIALS}.items():
        monkeypatch.setenv(name, value)
    aws.reset_call_counts()
    assert controller_hosts.main([str(config), cluster], {"ES_REGION": "us-east-1"}) == 1
    err = capsys.readouterr()
    assert err.out == ""
    assert err.err == f"elastic-slurm-controller-hosts: no controller 0 of cluster {cluster} in us-east-1\n"
    assert aws.call_counts().get("ec2:DescribeInstances") == 3


@pytest.mark.parametrize(
    ("argv", "region", "named"),
    [
        (["minimal.yaml", "minimal"], "us-east-1; reboot", "ES_REGION: "),
        (["minimal.yaml", "nosuch"], "us-east-1", "CLUSTER: no cluster 'nosuch'"),
        (["absent.yaml", "minimal"], "us-east-1", "CONFIG: "),
    ],
)
def test_bad_arguments_are_one_line_naming_them_and_exit_2(
    argv: list[str], region: str, named: str, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = [str(EXAMPLES / argv[0]), argv[1]]
    assert controller_hosts.main(argv, {"ES_REGION": region}) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"elastic-slurm-controller-hosts: {named}") and err.count("\n") == 1, err


def _answer(dns: str, ip: str) -> list[dict[str, Any]]:
    instance = {"LaunchTime": "2026-11-01T00:00:00Z", "PrivateDnsName": dns, "PrivateIpAddress": ip}
    return [{"Reservations": [{"Instances": [instance]}]}]


def test_a_host_name_or_address_that_is_not_plain_is_never_taken() -> None:
    address = "127.0.0.9"
    assert newest_host(_answer("ip-127-0-0-9.ec2.internal", address)) == controller_hosts.Host("ip-127-0-0-9", address)
    for dns, ip in [
        ("ip-1;reboot.ec2.internal", address),
        ("$(reboot).ec2.internal", address),
        ("ip 1.ec2.internal", address),
        ("", address),
        ("ip-127-0-0-9.ec2.internal", "127.0.0.9'"),
        ("ip-127-0-0-9.ec2.internal", ""),
    ]:
        assert newest_host(_answer(dns, ip)) is None, (dns, ip)


def test_facts_are_single_quoted_and_a_value_that_is_not_plain_is_refused(tmp_path: Path) -> None:
    facts = Facts("ip-a(127.0.0.10),ip-b(127.0.0.11)", "127.0.0.10", "create", "/shared")
    text = facts.env_text()
    assert "ES_CONTROLLER_HOSTS='ip-a(127.0.0.10),ip-b(127.0.0.11)'" in text.splitlines()
    assert _sourced(tmp_path, text)["ES_CONTROLLER_HOSTS"] == "ip-a(127.0.0.10),ip-b(127.0.0.11)"
    assert _sourced(tmp_path, Facts("", "", "none", "").env_text())["ES_SHARED_MOUNT"] == ""
    for bad in (
        Facts("ip-a(127.0.0.10)'; reboot; '", "", "none", ""),
        Facts("ip-a", "127.0.0.1 2", "none", ""),
        Facts("ip-a", "", "none\nX=1", ""),
        Facts("ip-a", "", "none", "/shared dir"),
    ):
        with pytest.raises(ValueError, match=r"^ES_\w+: .* is not a plain value$"):
            bad.env_text()
