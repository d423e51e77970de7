"""Least-privilege IAM statements for launching and terminating compute nodes (controller) and for the deconfigure
Lambda, as policy data (what every node reads besides EC2: stacks/node_policies.py).

The statements are built as IAM JSON (dicts) from an `ArnScope` (partition, account, home region), so the same
documents feed the CDK stacks (`to_cdk`), the local cloud's IAM principals and the policy-evaluation tests.

The controller may launch only from this cluster's launch templates, only instances tagged for this cluster and of
its pools' instance types, only from the cluster's own images, and may terminate only instances carrying the cluster
tag (IAM conditions, not trust). IAM authorizes RunInstances/CreateFleet once per resource type the call touches
(Service Authorization Reference, https://docs.aws.amazon.com/service-authorization/latest/reference/list_amazonec2.html,
rows RunInstances and CreateFleet). For RunInstances every resource type we touch except spot-instances-request
carries `ec2:LaunchTemplate` (the template's ARN), so each RunInstances statement requires it: a launch without one of
the cluster's templates is denied on every resource. CreateFleet offers no `ec2:LaunchTemplate` key (and cannot launch
without a template); the resources a fleet takes from its template are authorized as RunInstances (the reference's
CreateFleet description), so the same template condition holds for them. Only the instance carries the cluster
request tag in every launch, so `aws:RequestTag` is required on `instance/*` alone.
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
# The condition key RunInstances sets, on every resource type it authorizes but spot-instances-request, to the ARN of
# the launch template the call names (Service Authorization Reference, RunInstances row).
LAUNCH_TEMPLATE_KEY = "ec2:LaunchTemplate"


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
    """Where the controller may launch: one region's VPC, launch templates and compute role, the instance types the
    pools launch (`ec2:InstanceType`; empty: not restricted, which the stacks never pass) and the images the pools name
    by id (pools[].ami_id) besides the cluster's own (owned by the account and tagged for the cluster)."""

    region: str
    vpc_id: str
    launch_template_ids: list[str]
    compute_role_arn: str
    instance_types: tuple[str, ...] = ()
    image_ids: tuple[str, ...] = ()


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


def _run_and_fleet(
    sid: str,
    run: list[str],
    fleet: list[str],
    templates: list[str] | None,
    conditions: dict[str, Any] | None = None,
) -> list[Statement]:
    """`Run{sid}`: ec2:RunInstances on `run` with `conditions` (and, with `templates`, the launch template one of
    them); `Fleet{sid}`: ec2:CreateFleet on `fleet` with `conditions` (CreateFleet has no ec2:LaunchTemplate key)."""
    run_conditions = {**(conditions or {})}
    if templates is not None:
        run_conditions["ArnEquals"] = {**run_conditions.get("ArnEquals", {}), LAUNCH_TEMPLATE_KEY: templates}
    result = [statement(f"Run{sid}", ["ec2:RunInstances"], run, run_conditions or None)]
    if fleet:
        result.append(statement(f"Fleet{sid}", ["ec2:CreateFleet"], fleet, conditions))
    return result


def fleet_statements(scope: ArnScope, cluster: str, targets: list[RegionTarget]) -> list[Statement]:
    """What the power-save plugin needs to launch and terminate compute nodes of `cluster` in every region.

    Resource types per action as the Service Authorization Reference lists them (RunInstances: image, instance,
    network-interface, security-group, subnet, volume required; launch-template, placement-group,
    capacity-reservation, spot-instances-request as our launches use them; CreateFleet: fleet, instance required;
    launch-template, subnet, volume, placement-group, capacity-reservation). Not granted, because our launch
    templates and calls never name them: key-pair (nodes are reached through SSM), snapshot (no block device mapping
    names one), elastic-gpu, elastic-inference, license-configuration, group
    (https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/ExamplePolicies_EC2.html#iam-example-runinstances)."""
    regions = [t.region for t in targets]
    templates = [scope.arn(f"launch-template/{lt}", region=t.region) for t in targets for lt in t.launch_template_ids]
    instance_types = sorted({it for t in targets for it in t.instance_types})
    instances = [scope.arn("instance/*", region=r) for r in regions]
    tagged: dict[str, Any] = {f"aws:RequestTag/{TAG_CLUSTER}": cluster}
    if instance_types:
        tagged["ec2:InstanceType"] = instance_types
    network = [scope.arn(kind, region=r) for r in regions for kind in ("subnet/*", "security-group/*")]
    in_vpc = {"ArnEquals": {"ec2:Vpc": [scope.arn(f"vpc/{t.vpc_id}", region=t.region) for t in targets]}}
    # any account's: a reservation (or Capacity Block) may be shared with this account
    groups = [
        *(scope.arn("placement-group/*", region=r) for r in regions),
        *(f"arn:{scope.partition}:ec2:{r}:*:capacity-reservation/*" for r in regions),
    ]
    all_images = [f"arn:{scope.partition}:ec2:{r}::image/*" for r in regions]
    named_images = [f"arn:{scope.partition}:ec2:{t.region}::image/{i}" for t in targets for i in t.image_ids]
    own_images = {"StringEquals": {"ec2:Owner": scope.account, f"aws:ResourceTag/{TAG_CLUSTER}": cluster}}
    # Only the instance is bound to a cluster template (`ec2:LaunchTemplate`): every RunInstances authorizes an
    # instance, so one without a cluster template is denied there. The resources a launch takes from its template
    # (image, network, volumes, interfaces) are bound by their own conditions instead (owner and cluster tag, the
    # cluster's VPC): CreateFleet authorizes them as RunInstances ("To specify resource-level permissions for
    # resources specified in a launch template, you must include the resources in the RunInstances action
    # statement", Service Authorization Reference, CreateFleet), and AWS documents no ec2:LaunchTemplate key in that
    # implied check, so requiring it there could deny every fleet launch.
    result = [
        statement("LaunchOnlyFromClusterTemplates", LAUNCH_ACTIONS, templates),
        *_run_and_fleet("OnlyTaggedPoolInstances", instances, instances, templates, {"StringEquals": tagged}),
        *_run_and_fleet(
            "CreatesVolumesInterfacesFleets",
            [*(scope.arn(k, region=r) for r in regions for k in ("volume/*", "network-interface/*")), *groups],
            [*(scope.arn(k, region=r) for r in regions for k in ("volume/*", "fleet/*")), *groups],
            None,
        ),
        # spot-instances-request has no ec2:LaunchTemplate key; it launches nothing without the instance above
        statement(
            "RunCreatesSpotRequests",
            ["ec2:RunInstances"],
            [scope.arn("spot-instances-request/*", region=r) for r in regions],
        ),
        *_run_and_fleet("IntoClusterVpcsOnly", network, [n for n in network if ":subnet/" in n], None, in_vpc),
        # the fleet's image comes from its template: authorized as RunInstances (so no Fleet statement)
        *_run_and_fleet("FromClusterImagesOnly", all_images, [], None, own_images),
    ]
    if named_images:
        result += _run_and_fleet("FromPoolImages", named_images, [], None)
    return [
        *result,
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
