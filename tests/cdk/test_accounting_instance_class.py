"""The RDS instance class reaches the template with exactly one `db.` prefix, whether the config wrote it or not.

CDK's `ec2.InstanceType` adds `db.` for RDS, so a config's `db.r6g.large` used to become `db.db.r6g.large` (a failed
deploy); the model drops a leading `db.` (cluster_config/aws_catalog.rds_instance_class). The accounting stack is
built in process on a small VPC: about two seconds, no `cdk synth` of a whole app.
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


def _instance_class(given: str) -> str:
    app = cdk.App()
    network = cdk.Stack(app, "Net", env=ENV)
    isolated = ec2.SubnetConfiguration(name="db", subnet_type=ec2.SubnetType.PRIVATE_ISOLATED)
    vpc = ec2.Vpc(network, "Vpc", max_azs=2, nat_gateways=0, subnet_configuration=[isolated])
    clients = ec2.SecurityGroup(network, "Clients", vpc=vpc)
    accounting = Accounting.model_validate({"mode": "create", "engine": "mariadb_instance", "instance_class": given})
    stack = AccountingStack(
        app, "Acct", accounting=accounting, vpc=vpc, subnets=vpc.isolated_subnets, clients=clients, env=ENV
    )
    [instance] = Template.from_stack(stack).find_resources("AWS::RDS::DBInstance").values()
    return str(instance["Properties"]["DBInstanceClass"])


@pytest.mark.parametrize("given", ["r6g.large", "db.r6g.large"])
def test_mariadb_instance_class_has_one_db_prefix(given: str) -> None:
    assert _instance_class(given) == "db.r6g.large"
