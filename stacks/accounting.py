"""Accounting stack: the RDS database slurmdbd writes to, shared by every cluster of the config (federation).

Aurora MySQL Serverless v2 (a long-term-support release, AURORA_MYSQL_LTS) or a single-AZ RDS MariaDB instance,
encrypted, deletion protection on unless the config turns it off, credentials generated into Secrets Manager, removal
policy SNAPSHOT, a parameter group with SchedMD's server settings that refuses connections without TLS
(`DB_PARAMETERS`). slurmdbd runs on the host cluster's controller 0; only the controllers' security group may reach
the database port (compute and login nodes, where job users run, may not).
"""

from __future__ import annotations

from typing import Any

import aws_cdk as cdk
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_rds as rds
from aws_cdk import aws_secretsmanager as secretsmanager
from constructs import Construct

from cluster_config.model import Accounting

DB_PORT = 3306
DB_USER = "slurm"
# A long-term-support (LTS) release: AWS keeps a cluster on an LTS minor version for at least three years (or until
# the end of standard support of the major version) and upgrades it only to the next LTS release, so a deployed
# accounting database is not forced through a minor-version upgrade every year. The current LTS releases of Aurora
# MySQL 3 are 3.10.* and 3.04.*
# (https://docs.aws.amazon.com/AmazonRDS/latest/AuroraUserGuide/AuroraMySQL.Update.SpecialVersions.html); 3.10.4
# (MySQL 8.0.42) is the newest 3.10 patch this aws-cdk-lib names. 3.08.0, pinned before, is not an LTS release.
AURORA_MYSQL_LTS = rds.AuroraMysqlEngineVersion.VER_3_10_4


# The server settings SchedMD's accounting page asks slurmdbd's database for (doc/html/accounting.shtml of 26.05):
# innodb_lock_wait_timeout 900 s (long purge and upgrade queries), max_allowed_packet at least 16M (64M: Aurora MySQL
# 3's own default, and more than Slurm's max_script_size of 4M for stored batch scripts). innodb_buffer_pool_size is
# left to RDS's formula, {DBInstanceClassMemory*3/4} of the instance (Aurora Serverless v2 resizes it with the ACUs):
# SchedMD asks for 5-50 % of the server's memory, which 3/4 of a database-only server exceeds.
# require_secure_transport: the server refuses a connection without TLS (slurmdbd connects with TLS and checks the
# certificate against the RDS CA bundle, slurm_plugin/render/dbd.py).
DB_PARAMETERS = {
    "innodb_lock_wait_timeout": "900",
    "max_allowed_packet": str(64 * 1024 * 1024),
    "require_secure_transport": "ON",
}


class AccountingStack(cdk.Stack):
    """The shared Slurm accounting database."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        accounting: Accounting,
        vpc: ec2.IVpc,
        subnets: list[ec2.ISubnet],
        clients: ec2.ISecurityGroup,
        **kwargs: Any,
    ) -> None:
        super().__init__(scope, construct_id, **kwargs)
        self.security_group = ec2.SecurityGroup(self, "Database", vpc=vpc, description="Slurm accounting database")
        self.security_group.add_ingress_rule(clients, ec2.Port.tcp(DB_PORT), "MySQL from slurmdbd (controllers only)")
        placement = ec2.SubnetSelection(subnets=subnets)
        common: dict[str, Any] = {
            "vpc": vpc,
            "vpc_subnets": placement,
            "security_groups": [self.security_group],
            "credentials": rds.Credentials.from_generated_secret(DB_USER),
            "storage_encrypted": True,
            "deletion_protection": accounting.deletion_protection,
            "removal_policy": cdk.RemovalPolicy.SNAPSHOT,
            "iam_authentication": True,
            "port": DB_PORT,
        }
        if accounting.engine == "aurora_serverless_v2":
            engine = rds.DatabaseClusterEngine.aurora_mysql(version=AURORA_MYSQL_LTS)
            cluster = rds.DatabaseCluster(
                self,
                "Aurora",
                engine=engine,
                parameter_group=rds.ParameterGroup(
                    self,
                    "AuroraParameters",
                    engine=engine,
                    parameters=DB_PARAMETERS,
                    description="Slurm accounting: SchedMD's server settings, TLS only",
                ),
                # on an LTS release AWS recommends turning automatic minor version upgrades off, so the cluster stays
                # on it; AWS still applies critical patches of the release (AURORA_MYSQL_LTS)
                writer=rds.ClusterInstance.serverless_v2("Writer", auto_minor_version_upgrade=False),
                serverless_v2_min_capacity=0.5,
                serverless_v2_max_capacity=8,
                backup=rds.BackupProps(retention=cdk.Duration.days(7)),
                cloudwatch_logs_exports=["error", "slowquery", "audit"],
                **common,
            )
            self.endpoint = cluster.cluster_endpoint.socket_address
            self.secret: secretsmanager.ISecret | None = cluster.secret
        else:
            mariadb = rds.DatabaseInstanceEngine.maria_db(version=rds.MariaDbEngineVersion.VER_10_11_15)
            instance = rds.DatabaseInstance(
                self,
                "MariaDb",
                engine=mariadb,
                parameter_group=rds.ParameterGroup(
                    self,
                    "MariaDbParameters",
                    engine=mariadb,
                    parameters=DB_PARAMETERS,
                    description="Slurm accounting: SchedMD's server settings, TLS only",
                ),
                instance_type=ec2.InstanceType(accounting.instance_class),
                allocated_storage=20,
                storage_type=rds.StorageType.GP3,
                max_allocated_storage=200,
                multi_az=False,
                backup_retention=cdk.Duration.days(7),
                cloudwatch_logs_exports=["error", "slowquery", "audit"],
                **common,
            )
            self.endpoint = instance.instance_endpoint.socket_address
            self.secret = instance.secret
        if not accounting.deletion_protection:
            # the config chose it (minimal.yaml: `cdk destroy` removes the database); RemovalPolicy.SNAPSHOT still
            # takes a final snapshot, so a delete keeps the data
            cdk.Validations.of(self).acknowledge(
                cdk.Acknowledgment(
                    id="AwsSolutions::AwsSolutions-RDS10",
                    reason="accounting.deletion_protection is false in the config; a final snapshot is taken on delete",
                )
            )
        cdk.CfnOutput(self, "Endpoint", value=self.endpoint, description="host:port of the accounting database")
