"""Every IAM authorization the plugin's recorded calls need, evaluated against the stacks' policies (conditions too).

The emulated AWS records each call of a resume (CreateFleet, RunInstances, spot, remote region) and a suspend; the
calls become per-resource authorization requests (localcloud/aws/iam_requests.py) that a real IAM evaluator
(@cloud-copilot/iam-simulate) checks against the controller policy built by stacks/iam_policies.py.
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import pytest

from lambdas.deconfigure.handler import deconfigure
from localcloud.aws.emulated_aws import EmulatedAws
from localcloud.aws.iam import ACCOUNT, role_documents, without_statement
from localcloud.aws.iam_requests import AuthzRequest, Image, Inventory, Template, table
from slurm_plugin.powersave.launcher import resume_nodes
from slurm_plugin.powersave.terminator import terminate_nodes
from stacks.iam_policies import ArnScope, RegionTarget, fleet_statements
from tests.aws.iam_eval import evaluate
from tests.aws.plugin_env import HOME, REMOTE, FakeSlurm, Network, ec2_for, make_manifest, public_image, rid

# AWS-owned SSM documents have ARNs without an account (arn:aws:ssm:REGION::document/AWS-...); the evaluator's
# Service Authorization Reference pattern requires an account, so it cannot evaluate them: left out, see docs/iam.md.
UNEVALUABLE = "::document/"

# Statements no recorded call needs, each with the reason.
NOT_RECORDED = {
    "SpotServiceLinkedRole": "EC2 creates the spot service-linked role on the first spot launch of an account only",
    "RunCreatesSpotRequests": "only a spot pool with one instance type in one AZ launches spot by RunInstances; the "
    "recorded spot pool has two types (CreateFleet). tests/security/test_iam_abuse.py evaluates such a launch",
    "RunFromPoolImages": "the recorded launches all run in HOME from the cluster's own image; a launch from a pool's "
    "ami_id is evaluated in tests/security/test_iam_abuse.py",
}


def _vpc_of(aws: EmulatedAws, region: str, subnet: str) -> str:
    return str(aws.client("ec2", region).describe_subnets(SubnetIds=[subnet])["Subnets"][0]["VpcId"])


def _own_image(aws: EmulatedAws) -> str:
    """An AMI of this account in HOME, as Image Builder makes them (tagged for the cluster later: its name is unique
    to the manifest)."""
    ec2 = aws.client("ec2", HOME)
    public = public_image(ec2)
    builder = ec2.run_instances(ImageId=public, InstanceType="c7i.large", MinCount=1, MaxCount=1)["Instances"][0]
    image = ec2.create_image(InstanceId=builder["InstanceId"], Name=f"es-{uuid.uuid4().hex[:8]}")["ImageId"]
    ec2.terminate_instances(InstanceIds=[builder["InstanceId"]])
    return str(image)


def _template(aws: EmulatedAws, vpc: str, profile_arn: str) -> str:
    """A launch template like the stacks' (image, node security group, compute instance profile) in HOME."""
    ec2 = aws.client("ec2", HOME)
    group = ec2.create_security_group(GroupName=f"nodes-{uuid.uuid4().hex[:6]}", Description="nodes", VpcId=vpc)
    data = {
        "ImageId": _own_image(aws),
        "InstanceType": "c7i.large",
        "SecurityGroupIds": [group["GroupId"]],
        "IamInstanceProfile": {"Arn": profile_arn},
    }
    name = f"iam-test-{uuid.uuid4().hex[:8]}"
    return str(
        ec2.create_launch_template(LaunchTemplateName=name, LaunchTemplateData=data)["LaunchTemplate"][
            "LaunchTemplateId"
        ]
    )


def _compute_role(aws: EmulatedAws) -> tuple[str, str]:
    iam = aws.client("iam")
    name = f"compute-{uuid.uuid4().hex[:6]}"
    trust = {
        "Version": "2012-10-17",
        "Statement": [{"Effect": "Allow", "Principal": {"Service": "ec2.amazonaws.com"}, "Action": "sts:AssumeRole"}],
    }
    role = iam.create_role(RoleName=name, AssumeRolePolicyDocument=json.dumps(trust))["Role"]["Arn"]
    profile = iam.create_instance_profile(InstanceProfileName=name)["InstanceProfile"]["Arn"]
    iam.add_role_to_instance_profile(InstanceProfileName=name, RoleName=name)
    return str(role), str(profile)


def _every(ec2: Any, operation: str, key: str) -> list[dict[str, Any]]:
    """Every item of a paginated EC2 answer."""
    return [item for page in ec2.get_paginator(operation).paginate() for item in page[key]]


def _inventory(aws: EmulatedAws, role_by_profile: dict[str, str]) -> Inventory:
    subnets: dict[str, str] = {}
    groups: dict[str, str] = {}
    templates: dict[str, Template] = {}
    tags: dict[str, dict[str, str]] = {}
    images: dict[str, Image] = {}
    for region in (HOME, REMOTE):
        ec2 = aws.client("ec2", region)
        # every page: the emulated EC2 answers 100 reservations (and as EC2 does, a page) at a time, and the worker's
        # other tests may have launched more than that before this one
        subnets.update({s["SubnetId"]: s["VpcId"] for s in _every(ec2, "describe_subnets", "Subnets")})
        groups.update(
            {g["GroupId"]: g.get("VpcId", "") for g in _every(ec2, "describe_security_groups", "SecurityGroups")}
        )
        versions = [
            version
            for lt in _every(ec2, "describe_launch_templates", "LaunchTemplates")
            for version in ec2.describe_launch_template_versions(
                LaunchTemplateId=lt["LaunchTemplateId"], Versions=["$Default"]
            )["LaunchTemplateVersions"]
        ]
        for version in versions:
            data = version["LaunchTemplateData"]
            profile = data.get("IamInstanceProfile", {}).get("Arn")
            templates[version["LaunchTemplateId"]] = Template(
                data.get("ImageId", "ami-unknown"),
                tuple(data.get("SecurityGroupIds", [])),
                role_by_profile.get(profile or ""),
            )
        for reservation in _every(ec2, "describe_instances", "Reservations"):
            for instance in reservation["Instances"]:
                tags[instance["InstanceId"]] = {t["Key"]: t["Value"] for t in instance.get("Tags", [])}
        used = sorted({t.image_id for t in templates.values()})
        for image in ec2.describe_images(ImageIds=used)["Images"] if used else []:
            images[image["ImageId"]] = Image(image["OwnerId"], {t["Key"]: t["Value"] for t in image.get("Tags", [])})
    return Inventory(ACCOUNT, subnets, groups, templates, tags, images)


@pytest.fixture
def recorded(aws: EmulatedAws, network: Network, tmp_path: Path) -> tuple[dict[str, Any], list[AuthzRequest], str]:
    """(controller policy, authorization table of a recorded resume + suspend, cluster name)."""
    home_vpc = _vpc_of(aws, HOME, network.subnets["us-east-1a"])
    remote_vpc = _vpc_of(aws, REMOTE, network.subnets["us-west-2a"])
    role, profile = _compute_role(aws)
    template = _template(aws, home_vpc, profile)
    net = Network(network.subnets, {HOME: template, REMOTE: network.templates[REMOTE]})
    manifest = make_manifest(aws, net, tmp_path)
    home_image = aws.client("ec2", HOME).describe_launch_template_versions(LaunchTemplateId=template)[
        "LaunchTemplateVersions"
    ][0]["LaunchTemplateData"]["ImageId"]
    aws.client("ec2", HOME).create_tags(
        Resources=[home_image], Tags=[{"Key": "elastic-slurm:cluster", "Value": manifest.cluster}]
    )
    remote_image = aws.client("ec2", REMOTE).describe_launch_template_versions(
        LaunchTemplateId=network.templates[REMOTE]
    )["LaunchTemplateVersions"][0]["LaunchTemplateData"]["ImageId"]
    log = tmp_path / "requests.jsonl"
    aws.log_requests(log)
    try:
        slurm = FakeSlurm()
        for prefix, count in (("cpu-c7i-", 3), ("gpu-g5-", 1), ("spot-s-", 2), ("far-x-", 1)):
            nodes = [f"{prefix}{i}" for i in range(1, count + 1)]
            outcome = resume_nodes(manifest, nodes, [], ec2_for(aws), slurm, rid("iam"))
            assert sorted(outcome.launched) == sorted(nodes)
        terminate_nodes(manifest, sorted(slurm.addresses), ec2_for(aws), slurm, "suspend")
    finally:
        aws.log_requests(None)
    entries = [json.loads(line) for line in log.read_text().splitlines()]
    requests = table(entries, _inventory(aws, {profile: role}))
    types = tuple(sorted({t for pool in manifest.pools for t in pool.instance_types}))
    # HOME launches the cluster's own image (owned, tagged); REMOTE names a public one by id, as a pool's ami_id
    targets = [
        RegionTarget(HOME, home_vpc, [template], role, types),
        RegionTarget(REMOTE, remote_vpc, [network.templates[REMOTE]], role, types, (remote_image,)),
    ]
    scope = ArnScope("aws", ACCOUNT, HOME)
    controller = role_documents(manifest.cluster, targets, scope)["controller"]
    # the power-save plugin's share of the controller role (what the recorded requests exercise); the boot's and the
    # cluster manager's reads (stacks/node_policies.py) are enforced by the local cloud (tests/e2e/test_local_cloud_iam.py)
    plugin = {s["Sid"] for s in fleet_statements(scope, manifest.cluster, targets)}
    policy = {**controller, "Statement": [s for s in controller["Statement"] if s["Sid"] in plugin]}
    return policy, requests, manifest.cluster


def _denied(policy: dict[str, Any], requests: list[AuthzRequest]) -> list[str]:
    results = evaluate({"controller": policy}, requests, ACCOUNT)
    return [
        f"{r.call}: {r.action} on {r.resource} {r.context} -> {res}"
        for r, res in zip(requests, results, strict=True)
        if res != "Allowed"
    ]


def test_every_recorded_request_is_allowed_and_the_table_covers_launch_tag_pass_terminate(
    recorded: tuple[dict[str, Any], list[AuthzRequest], str],
) -> None:
    policy, requests, _ = recorded
    assert {
        "ec2:CreateFleet",
        "ec2:RunInstances",
        "ec2:CreateTags",
        "iam:PassRole",
        "ec2:TerminateInstances",
        "ec2:DescribeInstances",
    } <= {r.action for r in requests}
    assert _denied(policy, requests) == []


def test_launch_from_a_foreign_template_untagged_instance_foreign_vpc_and_foreign_terminate_are_denied(
    recorded: tuple[dict[str, Any], list[AuthzRequest], str],
) -> None:
    policy, requests, cluster = recorded
    template = next(r for r in requests if r.action == "ec2:CreateFleet" and ":launch-template/" in r.resource)
    instance = next(r for r in requests if r.action == "ec2:CreateFleet" and ":instance/" in r.resource)
    subnet = next(r for r in requests if r.action == "ec2:RunInstances" and ":subnet/" in r.resource)
    terminate = next(r for r in requests if r.action == "ec2:TerminateInstances")
    forged = [
        AuthzRequest(
            template.action, template.resource.rsplit("/", 1)[0] + "/lt-0foreign000000000", {}, "foreign template"
        ),
        AuthzRequest(instance.action, instance.resource, {}, "untagged instance"),
        AuthzRequest(
            instance.action,
            instance.resource,
            {"aws:RequestTag/elastic-slurm:cluster": "other", "aws:TagKeys": ["elastic-slurm:cluster"]},
            "other cluster's tag",
        ),
        AuthzRequest(
            subnet.action, subnet.resource, {"ec2:Vpc": f"arn:aws:ec2:{HOME}:{ACCOUNT}:vpc/vpc-0foreign"}, "foreign VPC"
        ),
        AuthzRequest(
            terminate.action,
            terminate.resource,
            {"aws:ResourceTag/elastic-slurm:cluster": cluster + "x"},
            "foreign instance",
        ),
    ]
    assert evaluate({"controller": policy}, forged, ACCOUNT) == ["ImplicitlyDenied"] * len(forged)


def test_removing_any_statement_the_code_needs_denies_a_recorded_request(
    recorded: tuple[dict[str, Any], list[AuthzRequest], str],
) -> None:
    policy, requests, _ = recorded
    for statement in policy["Statement"]:
        if statement["Sid"] in NOT_RECORDED:
            continue
        assert _denied(without_statement(policy, statement["Sid"]), requests), (
            f"{statement['Sid']} is needed by no recorded call"
        )


def test_deconfigure_lambda_requests_are_allowed_and_commands_reach_only_submit_hosts(
    aws: EmulatedAws, network: Network, tmp_path: Path
) -> None:
    cluster = f"dc{uuid.uuid4().hex[:8]}"
    ec2, ssm = aws.client("ec2", HOME), aws.client("ssm", HOME)
    ami = public_image(ec2)
    for tag, count in (("elastic-slurm:cluster", 2), ("elastic-slurm:submit-host", 1)):
        spec = [{"ResourceType": "instance", "Tags": [{"Key": tag, "Value": cluster}]}]
        ec2.run_instances(ImageId=ami, InstanceType="c7i.large", MinCount=count, MaxCount=count, TagSpecifications=spec)
    log = tmp_path / "requests.jsonl"
    aws.log_requests(log)
    try:
        outcome = deconfigure(ec2, ssm, cluster, ["/shared"], remaining_ms=lambda: 600_000)
    finally:
        aws.log_requests(None)
    assert outcome.ok, outcome.reason
    inventory = _inventory(aws, {})
    recorded = table([json.loads(line) for line in log.read_text().splitlines()], inventory)
    requests = [r for r in recorded if UNEVALUABLE not in r.resource]
    assert len(requests) == len(recorded) - 1
    assert {"ec2:DescribeInstances", "ec2:TerminateInstances", "ssm:SendCommand"} <= {r.action for r in requests}
    policy = role_documents(cluster, [RegionTarget(HOME, "vpc-any", [], "arn:aws:iam::123456789012:role/c")])[
        "deconfigure"
    ]
    assert evaluate({"deconfigure": policy}, requests, ACCOUNT).count("Allowed") == len(requests)
    compute = next(r for r in requests if r.action == "ec2:TerminateInstances")
    to_compute = AuthzRequest("ssm:SendCommand", compute.resource, compute.context, "command to a compute node")
    assert evaluate({"deconfigure": policy}, [to_compute], ACCOUNT) == ["ImplicitlyDenied"]
