"""Least-privilege IAM statements for the controller, the compute nodes and the deconfigure Lambda.

The controller may launch only from this cluster's launch templates and only instances tagged for this cluster,
and may terminate only instances carrying the cluster tag (IAM conditions, not trust).
"""

from __future__ import annotations

import aws_cdk as cdk
from aws_cdk import aws_iam as iam

from stacks.naming import TAG_CLUSTER


def _arn(stack: cdk.Stack, resource: str, service: str = "ec2") -> str:
    return f"arn:{stack.partition}:{service}:{stack.region}:{stack.account}:{resource}"


def fleet_statements(
    stack: cdk.Stack, cluster: str, vpc_id: str, launch_template_ids: list[str], compute_role_arn: str
) -> list[iam.PolicyStatement]:
    """What the power-save plugin needs to launch and terminate compute nodes of `cluster`."""
    tagged_on_create = {"StringEquals": {f"aws:RequestTag/{TAG_CLUSTER}": cluster}}
    template_arns = [_arn(stack, f"launch-template/{lt}") for lt in launch_template_ids]
    return [
        iam.PolicyStatement(
            sid="LaunchOnlyFromClusterTemplates",
            actions=["ec2:RunInstances", "ec2:CreateFleet"],
            resources=template_arns,
        ),
        iam.PolicyStatement(
            sid="LaunchOnlyTaggedInstances",
            actions=["ec2:RunInstances", "ec2:CreateFleet"],
            resources=[
                _arn(stack, "instance/*"),
                _arn(stack, "volume/*"),
                _arn(stack, "network-interface/*"),
                _arn(stack, "fleet/*"),
                _arn(stack, "spot-instances-request/*"),
            ],
            conditions=tagged_on_create,
        ),
        iam.PolicyStatement(
            sid="LaunchIntoClusterVpcOnly",
            actions=["ec2:RunInstances", "ec2:CreateFleet"],
            resources=[_arn(stack, "subnet/*"), _arn(stack, "security-group/*")],
            conditions={"ArnEquals": {"ec2:Vpc": _arn(stack, f"vpc/{vpc_id}")}},
        ),
        iam.PolicyStatement(
            sid="LaunchFromImagesAndPlacementGroups",
            actions=["ec2:RunInstances", "ec2:CreateFleet"],
            resources=[_arn(stack, "placement-group/*"), f"arn:{stack.partition}:ec2:{stack.region}::image/*"],
        ),
        iam.PolicyStatement(
            sid="TagOnlyWhileLaunching",
            actions=["ec2:CreateTags"],
            resources=[_arn(stack, "instance/*"), _arn(stack, "volume/*"), _arn(stack, "network-interface/*"),
                       _arn(stack, "fleet/*"), _arn(stack, "spot-instances-request/*")],
            conditions={"StringEquals": {"ec2:CreateAction": ["RunInstances", "CreateFleet"]}},
        ),  # fmt: skip
        iam.PolicyStatement(
            sid="TerminateOnlyClusterInstances",
            actions=["ec2:TerminateInstances"],
            resources=[_arn(stack, "instance/*")],
            conditions={"StringEquals": {f"aws:ResourceTag/{TAG_CLUSTER}": cluster}},
        ),
        iam.PolicyStatement(
            sid="PassOnlyComputeRoleToEc2",
            actions=["iam:PassRole"],
            resources=[compute_role_arn],
            conditions={"StringEquals": {"iam:PassedToService": "ec2.amazonaws.com"}},
        ),
        iam.PolicyStatement(
            sid="SpotServiceLinkedRole",
            actions=["iam:CreateServiceLinkedRole"],
            resources=[f"arn:{stack.partition}:iam::{stack.account}:role/aws-service-role/spot.amazonaws.com/*"],
            conditions={"StringEquals": {"iam:AWSServiceName": "spot.amazonaws.com"}},
        ),
        iam.PolicyStatement(
            sid="DescribeHasNoResourceLevelPermissions",
            actions=[
                "ec2:DescribeInstances",
                "ec2:DescribeInstanceStatus",
                "ec2:DescribeInstanceTypes",
                "ec2:DescribeInstanceTypeOfferings",
                "ec2:DescribeSpotPriceHistory",
                "ec2:DescribeLaunchTemplates",
                "ec2:DescribeLaunchTemplateVersions",
                "ec2:DescribeSubnets",
                "ec2:DescribeCapacityReservations",
                "pricing:GetProducts",
            ],
            resources=["*"],
        ),
    ]


def deconfigure_statements(stack: cdk.Stack, cluster: str) -> list[iam.PolicyStatement]:
    """What the deconfigure Lambda needs: find, terminate (cluster-tagged only) and clean up submit hosts."""
    return [
        iam.PolicyStatement(
            sid="DescribeHasNoResourceLevelPermissions",
            actions=["ec2:DescribeInstances", "ssm:GetCommandInvocation", "ssm:ListCommandInvocations"],
            resources=["*"],
        ),
        iam.PolicyStatement(
            sid="TerminateOnlyClusterInstances",
            actions=["ec2:TerminateInstances"],
            resources=[_arn(stack, "instance/*")],
            conditions={"StringEquals": {f"aws:ResourceTag/{TAG_CLUSTER}": cluster}},
        ),
        iam.PolicyStatement(
            sid="RunShellOnlyOnClusterInstances",
            actions=["ssm:SendCommand"],
            resources=[_arn(stack, "instance/*")],
            conditions={"StringEquals": {f"aws:ResourceTag/{TAG_CLUSTER}": cluster}},
        ),
        iam.PolicyStatement(
            sid="RunShellDocument",
            actions=["ssm:SendCommand"],
            resources=[f"arn:{stack.partition}:ssm:{stack.region}::document/AWS-RunShellScript"],
        ),
    ]
