"""The SSH security group admits each of `clusters[].ssh_allowed_cidrs` on port 22 in its own family: an IPv6 CIDR
becomes a `CidrIpv6` ingress, an IPv4 one a `CidrIp` (stacks/network.py), and nothing else reaches port 22."""

from __future__ import annotations

from typing import Any

import aws_cdk as cdk
from aws_cdk.assertions import Match, Template

from stacks.network import NetworkStack
from tests.unit.test_render import small_config


def _ssh_rules(cidrs: list[str], **cluster: Any) -> list[dict[str, Any]]:
    config = small_config(ssh_allowed_cidrs=cidrs, **cluster)
    app = cdk.App()
    stack = NetworkStack(
        app, "net", cluster=config.clusters[0], env=cdk.Environment(account="123456789012", region="us-east-1")
    )
    groups = Template.from_stack(stack).find_resources(
        "AWS::EC2::SecurityGroup", {"Properties": {"GroupDescription": Match.string_like_regexp("SSH access")}}
    )
    (ssh,) = groups.values()
    rules: list[dict[str, Any]] = ssh["Properties"].get("SecurityGroupIngress", [])
    return rules


def test_an_ipv6_ssh_cidr_is_an_ipv6_ingress() -> None:
    rules = _ssh_rules(["2001:DB8:5::/48", "198.51.100.7", "fd00::/8"])
    opened = sorted(
        (("CidrIpv6", r["CidrIpv6"]) if "CidrIpv6" in r else ("CidrIp", r["CidrIp"]), r["IpProtocol"], r["FromPort"],
         r["ToPort"])
        for r in rules
    )  # fmt: skip
    assert opened == [
        (("CidrIp", "198.51.100.7/32"), "tcp", 22, 22),
        (("CidrIpv6", "2001:db8:5::/48"), "tcp", 22, 22),
        (("CidrIpv6", "fd00::/8"), "tcp", 22, 22),
    ]


def test_a_public_range_with_the_opt_in_is_opened_as_given() -> None:
    rules = _ssh_rules(["2600:1f18::/32", "1.2.3.0/24"], ssh_allow_public_cidrs=True)
    assert sorted(r.get("CidrIp") or r["CidrIpv6"] for r in rules) == ["1.2.3.0/24", "2600:1f18::/32"]
