"""The Aurora accounting database runs a long-term-support (LTS) release of Aurora MySQL and stays on it.

AWS's current LTS releases of Aurora MySQL 3 are 3.10.* and 3.04.*
(https://docs.aws.amazon.com/AmazonRDS/latest/AuroraUserGuide/AuroraMySQL.Update.SpecialVersions.html), and AWS
recommends turning automatic minor version upgrades off on an LTS cluster. Built in process on a small VPC (about two
seconds), like tests/cdk/test_accounting_instance_class.py.
"""

from __future__ import annotations

import aws_cdk as cdk
import pytest
from aws_cdk import aws_ec2 as ec2
from aws_cdk.assertions import Template

from cluster_config.model import Accounting
from stacks.accounting import AccountingStack

pytestmark = pytest.mark.cdk

ENV = cdk.Environment(account="111122223333", region="us-east-1")
LTS_MINORS = ("3.10.", "3.04.")


def _aurora() -> Template:
    app = cdk.App()
    network = cdk.Stack(app, "Net", env=ENV)
    isolated = ec2.SubnetConfiguration(name="db", subnet_type=ec2.SubnetType.PRIVATE_ISOLATED)
    vpc = ec2.Vpc(network, "Vpc", max_azs=2, nat_gateways=0, subnet_configuration=[isolated])
    clients = ec2.SecurityGroup(network, "Clients", vpc=vpc)
    accounting = Accounting.model_validate({"mode": "create", "engine": "aurora_serverless_v2"})
    stack = AccountingStack(
        app, "Acct", accounting=accounting, vpc=vpc, subnets=vpc.isolated_subnets, clients=clients, env=ENV
    )
    return Template.from_stack(stack)


def test_aurora_runs_an_lts_release_without_automatic_minor_upgrades() -> None:
    template = _aurora()
    [cluster] = template.find_resources("AWS::RDS::DBCluster").values()
    version = cluster["Properties"]["EngineVersion"]
    assert version.startswith("8.0.mysql_aurora.")
    assert version.removeprefix("8.0.mysql_aurora.").startswith(LTS_MINORS), version
    [writer] = template.find_resources("AWS::RDS::DBInstance").values()
    assert writer["Properties"]["AutoMinorVersionUpgrade"] is False


def test_the_release_pinned_before_is_not_lts() -> None:
    """Negative case: 3.08.0 (pinned until now) fails the LTS check above."""
    assert not "3.08.0".startswith(LTS_MINORS)
