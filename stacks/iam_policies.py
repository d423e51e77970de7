"""Least-privilege IAM statements for launching and terminating compute nodes (controller) and for the deconfigure
Lambda, as policy data (what every node reads besides EC2: stacks/node_policies.py).

The statements are built as IAM JSON (dicts) from an `ArnScope` (partition, account, home region), so the same
documents feed the CDK stacks (`to_cdk`), the local cloud's IAM principals and the policy-evaluation tests.

The controller may launch only from this cluster's launch templates and only instances tagged for this cluster,
and may terminate only instances carrying the cluster tag (IAM conditions, not trust). IAM authorizes
RunInstances/CreateFleet once per resource type the call touches; only the instance carries the cluster request tag
in every launch, so `aws:RequestTag` is required on `instance/*` alone — the other created resources (volumes,
network interfaces, the fleet, spot requests) are scoped by account and region instead.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from stacks.naming import TAG_CLUSTER, TAG_SUBMIT_HOST

if TYPE_CHECKING:  # the local cloud builds its principals from these statements without loading CDK (jsii, node)
    from aws_cdk import aws_iam as iam

Statement = dict[str, Any]

LAUNCH_ACTIONS = ["ec2:RunInstances", "ec2:CreateFleet"]
# Created (and tagged) by RunInstances/CreateFleet besides the instance itself; they carry no cluster request tag.
LAUNCHED_UNTAGGED = ("volume/*", "network-interface/*", "fleet/*", "spot-instances-request/*")
# Every resource type a launch creates: TagSpecifications may name any of them.
LAUNCHED = ("instance/*", *LAUNCHED_UNTAGGED)


@dataclass(frozen=True)
class ArnScope:
    """Partition, account and home region the ARNs are built in (CDK tokens in stacks, literals in the local cloud)."""

    partition: str
    account: str
    region: str

    def arn(self, resource: str, service: str = "ec2", region: str | None = None) -> str:
        """`arn:{partition}:{service}:{region}:{account}:{resource}`."""
        return f"arn:{self.partition}:{service}:{region or self.region}:{self.account}:{resource}"


@dataclass(frozen=True)
class RegionTarget:
    """Where the controller may launch: one region's VPC, launch templates and compute role."""

    region: str
    vpc_id: str
    launch_template_ids: list[str]
    compute_role_arn: str


def statement(
    sid: str, actions: list[str], resources: list[str], conditions: dict[str, Any] | None = None
) -> Statement:
    """One Allow statement as IAM JSON."""
    result: Statement = {"Sid": sid, "Effect": "Allow", "Action": actions, "Resource": resources}
    if conditions:
        result["Condition"] = conditions
    return result


def document(statements: list[Statement]) -> dict[str, Any]:
    """A policy document holding `statements`."""
    return {"Version": "2012-10-17", "Statement": statements}


def to_cdk(statements: list[Statement]) -> list[iam.PolicyStatement]:
    """The same statements as CDK objects."""
    from aws_cdk import aws_iam as iam

    return [iam.PolicyStatement.from_json(s) for s in statements]


def terminate_only_cluster_instances(scope: ArnScope, regions: list[str], cluster: str) -> Statement:
    """ec2:TerminateInstances on instances tagged for this cluster, in every region it uses (controller and deconfigure)."""
    return statement(
        "TerminateOnlyClusterInstances",
        ["ec2:TerminateInstances"],
        [scope.arn("instance/*", region=r) for r in regions],
        {"StringEquals": {f"aws:ResourceTag/{TAG_CLUSTER}": cluster}},
    )


def fleet_statements(scope: ArnScope, cluster: str, targets: list[RegionTarget]) -> list[Statement]:
    """What the power-save plugin needs to launch and terminate compute nodes of `cluster` in every region."""
    regions = [t.region for t in targets]
    template_arns = [
        scope.arn(f"launch-template/{lt}", region=t.region) for t in targets for lt in t.launch_template_ids
    ]
    return [
        statement("LaunchOnlyFromClusterTemplates", LAUNCH_ACTIONS, template_arns),
        statement(
            "LaunchOnlyTaggedInstances",
            LAUNCH_ACTIONS,
            [scope.arn("instance/*", region=r) for r in regions],
            {"StringEquals": {f"aws:RequestTag/{TAG_CLUSTER}": cluster}},
        ),
        statement(
            "LaunchCreatesVolumesInterfacesFleets",
            LAUNCH_ACTIONS,
            [scope.arn(kind, region=r) for r in regions for kind in LAUNCHED_UNTAGGED],
        ),
        statement(
            "LaunchIntoClusterVpcsOnly",
            LAUNCH_ACTIONS,
            [scope.arn(kind, region=r) for r in regions for kind in ("subnet/*", "security-group/*")],
            {"ArnEquals": {"ec2:Vpc": [scope.arn(f"vpc/{t.vpc_id}", region=t.region) for t in targets]}},
        ),
        statement(
            "LaunchFromImagesAndPlacementGroups",
            LAUNCH_ACTIONS,
            [
                *(scope.arn("placement-group/*", region=r) for r in regions),
                # any account's: a reservation (or Capacity Block) may be shared with this account
                *(f"arn:{scope.partition}:ec2:{r}:*:capacity-reservation/*" for r in regions),
                *(f"arn:{scope.partition}:ec2:{r}::image/*" for r in regions),
            ],
        ),
        statement(
            "TagOnlyWhileLaunching",
            ["ec2:CreateTags"],
            [scope.arn(kind, region=r) for r in regions for kind in LAUNCHED],
            {"StringEquals": {"ec2:CreateAction": ["RunInstances", "CreateFleet"]}},
        ),
        terminate_only_cluster_instances(scope, regions, cluster),
        statement(
            "PassOnlyComputeRolesToEc2",
            ["iam:PassRole"],
            [t.compute_role_arn for t in targets],
            {"StringEquals": {"iam:PassedToService": "ec2.amazonaws.com"}},
        ),
        statement(
            "SpotServiceLinkedRole",
            ["iam:CreateServiceLinkedRole"],
            [f"arn:{scope.partition}:iam::{scope.account}:role/aws-service-role/spot.amazonaws.com/*"],
            {"StringEquals": {"iam:AWSServiceName": "spot.amazonaws.com"}},
        ),
        statement(
            "DescribeHasNoResourceLevelPermissions",
            [
                "ec2:DescribeInstances",
                "ec2:DescribeInstanceStatus",
                "ec2:DescribeInstanceTopology",  # the manager, for pools with network_topology
                "ec2:DescribeInstanceTypes",
                "ec2:DescribeInstanceTypeOfferings",
                "ec2:DescribeSpotPriceHistory",
                "ec2:DescribeLaunchTemplates",
                "ec2:DescribeLaunchTemplateVersions",
                "ec2:DescribeSubnets",
                "ec2:DescribeCapacityReservations",
                "pricing:GetProducts",
            ],
            ["*"],
        ),
    ]


def deconfigure_statements(scope: ArnScope, cluster: str, regions: list[str]) -> list[Statement]:
    """What the deconfigure Lambda needs: find, terminate (cluster-tagged only) and clean up submit hosts."""
    return [
        statement(
            "DescribeHasNoResourceLevelPermissions",
            ["ec2:DescribeInstances", "ssm:GetCommandInvocation", "ssm:ListCommandInvocations"],
            ["*"],
        ),
        terminate_only_cluster_instances(scope, regions, cluster),
        statement(
            "RunShellOnlyOnSubmitHosts",
            ["ssm:SendCommand"],
            [scope.arn("instance/*")],
            {"StringEquals": {f"aws:ResourceTag/{TAG_SUBMIT_HOST}": cluster}},
        ),
        statement(
            "RunShellDocument",
            ["ssm:SendCommand"],
            [f"arn:{scope.partition}:ssm:{scope.region}::document/AWS-RunShellScript"],
        ),
    ]
