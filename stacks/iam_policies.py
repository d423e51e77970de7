"""Least-privilege IAM statements for the controller, the compute nodes and the deconfigure Lambda.

The controller may launch only from this cluster's launch templates and only instances tagged for this cluster,
and may terminate only instances carrying the cluster tag (IAM conditions, not trust).
"""

from __future__ import annotations

from dataclasses import dataclass

import aws_cdk as cdk
from aws_cdk import aws_iam as iam

from stacks.naming import TAG_CLUSTER, TAG_SUBMIT_HOST

# What RunInstances/CreateFleet create (and tag) besides the launch template's inputs.
LAUNCHED = ("instance/*", "volume/*", "network-interface/*", "fleet/*", "spot-instances-request/*")


@dataclass(frozen=True)
class RegionTarget:
    """Where the controller may launch: one region's VPC, launch templates and compute role."""

    region: str
    vpc_id: str
    launch_template_ids: list[str]
    compute_role_arn: str


def terminate_only_cluster_instances(stack: cdk.Stack, regions: list[str], cluster: str) -> iam.PolicyStatement:
    """ec2:TerminateInstances on instances tagged for this cluster, in every region it uses (controller and deconfigure)."""
    return iam.PolicyStatement(
        sid="TerminateOnlyClusterInstances",
        actions=["ec2:TerminateInstances"],
        resources=[_arn(stack, "instance/*", region=r) for r in regions],
        conditions={"StringEquals": {f"aws:ResourceTag/{TAG_CLUSTER}": cluster}},
    )


def _arn(stack: cdk.Stack, resource: str, service: str = "ec2", region: str | None = None) -> str:
    return f"arn:{stack.partition}:{service}:{region or stack.region}:{stack.account}:{resource}"


def fleet_statements(stack: cdk.Stack, cluster: str, targets: list[RegionTarget]) -> list[iam.PolicyStatement]:
    """What the power-save plugin needs to launch and terminate compute nodes of `cluster` in every region."""
    tagged_on_create = {"StringEquals": {f"aws:RequestTag/{TAG_CLUSTER}": cluster}}
    regions = [t.region for t in targets]
    template_arns = [
        _arn(stack, f"launch-template/{lt}", region=t.region) for t in targets for lt in t.launch_template_ids
    ]
    launched = [_arn(stack, kind, region=r) for r in regions for kind in LAUNCHED]
    return [
        iam.PolicyStatement(
            sid="LaunchOnlyFromClusterTemplates",
            actions=["ec2:RunInstances", "ec2:CreateFleet"],
            resources=template_arns,
        ),
        iam.PolicyStatement(
            sid="LaunchOnlyTaggedInstances",
            actions=["ec2:RunInstances", "ec2:CreateFleet"],
            resources=launched,
            conditions=tagged_on_create,
        ),
        iam.PolicyStatement(
            sid="LaunchIntoClusterVpcsOnly",
            actions=["ec2:RunInstances", "ec2:CreateFleet"],
            resources=[_arn(stack, kind, region=r) for r in regions for kind in ("subnet/*", "security-group/*")],
            conditions={"ArnEquals": {"ec2:Vpc": [_arn(stack, f"vpc/{t.vpc_id}", region=t.region) for t in targets]}},
        ),
        iam.PolicyStatement(
            sid="LaunchFromImagesAndPlacementGroups",
            actions=["ec2:RunInstances", "ec2:CreateFleet"],
            resources=[
                *(_arn(stack, "placement-group/*", region=r) for r in regions),
                *(f"arn:{stack.partition}:ec2:{r}::image/*" for r in regions),
            ],
        ),
        iam.PolicyStatement(
            sid="TagOnlyWhileLaunching",
            actions=["ec2:CreateTags"],
            resources=launched,
            conditions={"StringEquals": {"ec2:CreateAction": ["RunInstances", "CreateFleet"]}},
        ),
        terminate_only_cluster_instances(stack, regions, cluster),
        iam.PolicyStatement(
            sid="PassOnlyComputeRolesToEc2",
            actions=["iam:PassRole"],
            resources=[t.compute_role_arn for t in targets],
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


def deconfigure_statements(stack: cdk.Stack, cluster: str, regions: list[str]) -> list[iam.PolicyStatement]:
    """What the deconfigure Lambda needs: find, terminate (cluster-tagged only) and clean up submit hosts."""
    return [
        iam.PolicyStatement(
            sid="DescribeHasNoResourceLevelPermissions",
            actions=["ec2:DescribeInstances", "ssm:GetCommandInvocation", "ssm:ListCommandInvocations"],
            resources=["*"],
        ),
        terminate_only_cluster_instances(stack, regions, cluster),
        iam.PolicyStatement(
            sid="RunShellOnlyOnSubmitHosts",
            actions=["ssm:SendCommand"],
            resources=[_arn(stack, "instance/*")],
            conditions={"StringEquals": {f"aws:ResourceTag/{TAG_SUBMIT_HOST}": cluster}},
        ),
        iam.PolicyStatement(
            sid="RunShellDocument",
            actions=["ssm:SendCommand"],
            resources=[f"arn:{stack.partition}:ssm:{stack.region}::document/AWS-RunShellScript"],
        ),
    ]
