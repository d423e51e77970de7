"""Recorded AWS calls -> IAM authorization requests (localcloud/aws/iam_requests.py), pure."""

from __future__ import annotations

from localcloud.aws.iam_requests import Inventory, Template, authorization_requests, request_tags, table

INV = Inventory(
    "123456789012",
    subnet_vpc={"subnet-a": "vpc-1"},
    group_vpc={"sg-1": "vpc-1"},
    templates={"lt-1": Template("ami-1", ("sg-1",), "arn:aws:iam::123456789012:role/compute")},
    instance_tags={"i-1": {"elastic-slurm:cluster": "c1"}},
)
TAGS = {
    "TagSpecification.1.ResourceType": "instance",
    "TagSpecification.1.Tag.1.Key": "elastic-slurm:cluster",
    "TagSpecification.1.Tag.1.Value": "c1",
}


def _fleet() -> dict[str, object]:
    params = {
        "LaunchTemplateConfigs.1.LaunchTemplateSpecification.LaunchTemplateId": "lt-1",
        "LaunchTemplateConfigs.1.Overrides.1.SubnetId": "subnet-a",
        "TargetCapacitySpecification.DefaultTargetCapacityType": "on-demand",
        **TAGS,
    }
    return {"service": "ec2", "region": "us-east-1", "action": "CreateFleet", "params": params}


def test_tag_specifications_are_grouped_by_resource_type() -> None:
    assert request_tags({**TAGS, "TagSpecification.2.ResourceType": "volume", "TagSpecification.2.Tag.1.Key": "k",
                         "TagSpecification.2.Tag.1.Value": "v"}) == {
        "instance": {"elastic-slurm:cluster": "c1"},
        "volume": {"k": "v"},
    }  # fmt: skip


def test_create_fleet_is_authorized_per_listed_resource_type_with_its_own_condition_keys() -> None:
    by_resource = {r.resource: r for r in authorization_requests(_fleet(), INV) if r.action == "ec2:CreateFleet"}
    arn = "arn:aws:ec2:us-east-1:123456789012:"
    assert sorted(by_resource) == sorted(
        [
            f"{arn}instance/i-new",
            f"{arn}fleet/fleet-new",
            f"{arn}subnet/subnet-a",
            f"{arn}launch-template/lt-1",
        ]
    )  # CreateFleet lists no network-interface or security-group resource
    assert by_resource[f"{arn}instance/i-new"].context == {
        "aws:RequestTag/elastic-slurm:cluster": "c1",
        "aws:TagKeys": ["elastic-slurm:cluster"],
        "ec2:InstanceType": "unknown",  # the inventory knows no instance type
    }
    assert by_resource[f"{arn}fleet/fleet-new"].context == {}  # untagged by the call: no request tag
    assert by_resource[f"{arn}subnet/subnet-a"].context == {"ec2:Vpc": f"{arn}vpc/vpc-1"}
    # what the fleet takes from its template (volumes, interfaces, image, groups) is authorized as RunInstances
    implied = {r.resource for r in authorization_requests(_fleet(), INV) if r.action == "ec2:RunInstances"}
    assert {f"{arn}volume/vol-new", "arn:aws:ec2:us-east-1::image/ami-1", f"{arn}security-group/sg-1"} <= implied


def test_launch_also_authorizes_tagging_on_create_and_passing_the_template_role() -> None:
    extra = {r.action: r for r in authorization_requests(_fleet(), INV) if r.action != "ec2:CreateFleet"}
    assert extra["ec2:CreateTags"].context["ec2:CreateAction"] == "CreateFleet"
    assert extra["iam:PassRole"].resource == "arn:aws:iam::123456789012:role/compute"
    assert extra["iam:PassRole"].context == {"iam:PassedToService": "ec2.amazonaws.com"}


def test_run_instances_includes_security_groups_with_their_vpc() -> None:
    entry = {
        "service": "ec2",
        "region": "us-east-1",
        "action": "RunInstances",
        "params": {"LaunchTemplate.LaunchTemplateId": "lt-1", "SubnetId": "subnet-a", **TAGS},
    }
    groups = [r for r in authorization_requests(entry, INV) if ":security-group/" in r.resource]
    assert [(g.resource.rsplit("/", 1)[1], g.context) for g in groups] == [
        (
            "sg-1",
            {
                "ec2:Vpc": "arn:aws:ec2:us-east-1:123456789012:vpc/vpc-1",
                "ec2:LaunchTemplate": "arn:aws:ec2:us-east-1:123456789012:launch-template/lt-1",
            },
        )
    ]


def test_terminate_carries_each_instances_tags_and_describe_is_on_star() -> None:
    terminate = {
        "service": "ec2",
        "region": "us-east-1",
        "action": "TerminateInstances",
        "params": {"InstanceId.1": "i-1"},
    }
    [request] = authorization_requests(terminate, INV)
    assert request.resource.endswith(":instance/i-1")
    assert request.context == {"aws:ResourceTag/elastic-slurm:cluster": "c1"}
    describe = {"service": "ec2", "region": "us-east-1", "action": "DescribeInstances", "params": {}}
    assert [(r.action, r.resource) for r in authorization_requests(describe, INV)] == [("ec2:DescribeInstances", "*")]


def test_table_removes_duplicate_authorizations() -> None:
    assert len(table([_fleet(), _fleet()], INV)) == len(table([_fleet()], INV))
