"""The controllers' access security group opens `rest_api.web_port` to `rest_api.allowed_cidrs` only (and nothing
for slurmrestd's own port, which listens on 127.0.0.1); a cluster without the REST API gets no such rule."""

from __future__ import annotations

from typing import Any

import aws_cdk as cdk
from aws_cdk.assertions import Match, Template

from stacks.network import NetworkStack
from tests.unit.test_render import small_config


def _ingress(rest_api: dict[str, Any]) -> list[dict[str, Any]]:
    cluster = small_config(rest_api=rest_api, ssh_allowed_cidrs=["198.51.100.7/32"]).clusters[0]
    app = cdk.App()
    stack = NetworkStack(app, "net", cluster=cluster, env=cdk.Environment(account="123456789012", region="us-east-1"))
    groups = Template.from_stack(stack).find_resources(
        "AWS::EC2::SecurityGroup", {"Properties": {"GroupDescription": Match.string_like_regexp("SSH access")}}
    )
    (ssh,) = groups.values()
    rules: list[dict[str, Any]] = ssh["Properties"].get("SecurityGroupIngress", [])
    return rules


def test_the_web_page_port_is_open_to_the_allowed_cidrs_only() -> None:
    rules = _ingress({"enabled": True, "web_port": 8443, "allowed_cidrs": ["100.64.3.0/24", "fd00:db8::/32"]})
    opened = sorted((r.get("CidrIp") or r.get("CidrIpv6"), r["FromPort"], r["ToPort"]) for r in rules)
    assert opened == [("100.64.3.0/24", 8443, 8443), ("198.51.100.7/32", 22, 22), ("fd00:db8::/32", 8443, 8443)]


def test_no_rule_without_the_rest_api() -> None:
    assert {r["FromPort"] for r in _ingress({"enabled": False})} == {22}
