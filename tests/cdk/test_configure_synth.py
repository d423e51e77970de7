"""`configure` can no longer write a config that `validate` passes and synth rejects: the answers of issue 34 (an SSH
address without a mask, an IPv6 CIDR, a GPU instance type) go through the wizard, the file it writes validates, and the
real CDK CLI synthesizes it (`elastic-slurm synth`, offline) with the SSH rule as the config says."""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path
from typing import Any

import pytest

from cluster_config import load
from elastic_slurm.cli import main
from tests.cdk.conftest import synth_once
from tests.unit.test_configure import script

pytestmark = pytest.mark.cdk


def test_configure_answers_of_the_issue_validate_and_synthesize(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    for env in ("AWS_REGION", "AWS_DEFAULT_REGION"):
        monkeypatch.delenv(env, raising=False)
    answers = {
        "cluster_name": "asked",
        "pool_count": "2",
        "pool2_instance_types": "g5.xlarge",
        "pool2_purchase_option": "on_demand",
        "ssh_cidrs": ["fe80::1%eth0", "198.51.100.7, 2001:db8::/32"],
    }
    monkeypatch.setattr(sys, "stdin", io.StringIO(script(answers)))
    assert main(["configure", "--out", "asked.yaml"]) == 0
    _out, err = capsys.readouterr()
    assert len(err.splitlines()) == 1 and "ssh_cidrs: 'fe80::1%eth0' is not a CIDR: a zone index" in err
    path = tmp_path / "asked.yaml"
    cluster = load(path).clusters[0]
    assert cluster.ssh_allowed_cidrs == ["198.51.100.7/32", "2001:db8::/32"]
    gpu_pool = cluster.partitions[0].pools[1]
    assert (gpu_pool.instance_types, gpu_pool.gpu is not None) == (["g5.xlarge"], True)
    assert main(["validate", str(path)]) == 0
    capsys.readouterr()

    out = tmp_path / "cdk.out"
    result = synth_once(path, out)
    assert result.returncode == 0, (result.stdout + result.stderr)[-3000:]
    ssh_rules = sorted(
        rule.get("CidrIp") or rule["CidrIpv6"]
        for template in out.glob("*.template.json")
        for resource in _resources(template)
        if resource["Type"] == "AWS::EC2::SecurityGroup" and "SSH access" in resource["Properties"]["GroupDescription"]
        for rule in resource["Properties"].get("SecurityGroupIngress", [])
        if rule.get("FromPort") == 22
    )
    assert ssh_rules == ["198.51.100.7/32", "2001:db8::/32"]  # the IPv6 range as an IPv6 rule (Peer.ipv6)


def test_the_stacks_ssh_rule_refuses_what_the_model_normalises_or_refuses() -> None:
    """The negative side: without the model's normalisation (an address alone → /32) and the stacks' choice of
    `Peer.ipv6` for IPv6 ranges, `Peer.ipv4` fails the synth on exactly these answers."""
    from aws_cdk import aws_ec2 as ec2

    for given in ("198.51.100.7", "2001:db8::/32"):
        with pytest.raises(Exception, match="IPv4"):
            ec2.Peer.ipv4(given)
    assert ec2.Peer.ipv4("198.51.100.7/32").unique_id == "198.51.100.7/32"


def _resources(template: Path) -> list[dict[str, Any]]:
    data: dict[str, Any] = json.loads(template.read_text(encoding="utf-8"))
    return list(data.get("Resources", {}).values())
