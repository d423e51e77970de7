"""The deconfigure custom resource: a Lambda (lambdas/deconfigure) that runs first when the cluster is deleted.

The controllers depend on it, so CloudFormation deletes (terminates) them first: slurmctld and the cluster manager
are gone and cannot relaunch a node. It depends on every other resource of the cluster stack, and the cluster stack
depends on the storage, accounting and network stacks, so CloudFormation deletes it next — terminating every compute
node and detaching submit hosts — before launch templates, roles, file systems, the database and the VPC go.
"""

from __future__ import annotations

from pathlib import Path

import aws_cdk as cdk
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from constructs import Construct

from stacks.iam_policies import ArnScope, deconfigure_statements, to_cdk

HANDLER_DIR = Path(__file__).resolve().parent.parent / "lambdas" / "deconfigure"
LAMBDA_TIMEOUT = cdk.Duration.minutes(15)
# CloudFormation gives up on the custom resource after this (default is one hour); the Lambda reports before.
SERVICE_TIMEOUT = cdk.Duration.minutes(20)


class Deconfigure(Construct):
    """Lambda + custom resource; call `run_before_deleting(...)` with what must outlive the clean-up."""

    def __init__(
        self, scope: Construct, construct_id: str, *, cluster: str, mount_points: list[str], regions: list[str]
    ) -> None:
        super().__init__(scope, construct_id)
        stack = cdk.Stack.of(self)
        log_group = logs.LogGroup(
            self, "Logs", retention=logs.RetentionDays.ONE_MONTH, removal_policy=cdk.RemovalPolicy.DESTROY
        )
        role = iam.Role(self, "Role", assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"))
        scope = ArnScope(stack.partition, stack.account, stack.region)
        for statement in to_cdk(deconfigure_statements(scope, cluster, regions)):
            role.add_to_policy(statement)
        role.add_to_policy(
            iam.PolicyStatement(
                sid="WriteOwnLogs",
                actions=["logs:CreateLogStream", "logs:PutLogEvents"],
                resources=[f"{log_group.log_group_arn}:*"],
            )
        )
        self.function = lambda_.Function(
            self,
            "Function",
            runtime=lambda_.Runtime.PYTHON_3_14,
            handler="handler.handler",
            code=lambda_.Code.from_asset(str(HANDLER_DIR), exclude=["__pycache__", "*.pyc"]),
            timeout=LAMBDA_TIMEOUT,
            memory_size=256,
            role=role,
            log_group=log_group,
            description=f"Deconfigure Slurm cluster {cluster} before its stacks are deleted",
        )
        # cfn-lint W3005: aws-cdk-lib's Function always adds DependsOn on its role next to the GetAtt; harmless.
        cfn_function = self.function.node.default_child
        assert isinstance(cfn_function, cdk.CfnResource)
        cfn_function.add_metadata("cfn-lint", {"config": {"ignore_checks": ["W3005"]}})
        self.resource = cdk.CustomResource(
            self,
            "Resource",
            service_token=self.function.function_arn,
            resource_type="Custom::ElasticSlurmDeconfigure",
            properties={"ClusterName": cluster, "MountPoints": mount_points, "Regions": regions},
            service_timeout=SERVICE_TIMEOUT,
        )

    def run_after_deleting(self, *constructs: Construct) -> None:
        """Make `constructs` depend on the custom resource: CloudFormation deletes them before it runs (and creates
        them after it, where its Create is a no-op)."""
        for construct in constructs:
            construct.node.add_dependency(self.resource)

    def run_before_deleting(self, *constructs: Construct) -> None:
        """Make the custom resource depend on `constructs`: CloudFormation deletes it (runs it) before them."""
        for construct in constructs:
            self.resource.node.add_dependency(construct)
