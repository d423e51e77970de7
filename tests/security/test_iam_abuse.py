"""The attacker's view of the controller role: with its credentials (a compromised controller, or anyone reaching its
instance metadata) one can launch only what the cluster launches.

Evaluated with the real IAM evaluator (tests/aws/iam_eval.py) against the synthesized controller policy of the
`minimal` example (templates resolved by tests/contracts/cfn_resolve.py); the requests are built like the
contract's legitimate launches (the plugin's launch from each pool template of the deployed-infra parameter), then
altered one way each. The legitimate launch is the positive control.
"""

from __future__ import annotations

from dataclasses import replace

import pytest
import yaml

from localcloud.aws.iam import ACCOUNT, role_documents
from localcloud.aws.iam_requests import AuthzRequest, Image, Inventory, Template, authorization_requests
from stacks.iam_policies import ArnScope, RegionTarget
from stacks.naming import TAG_CLUSTER
from tests.aws.iam_eval import evaluate
from tests.cdk.conftest import REPO_ROOT, Assembly, synth_once
from tests.contracts.test_aws_call_permissions import Context, RoleUse, _contexts, _launch_requests, role_uses

FOREIGN_ACCOUNT = "999999999999"


@pytest.fixture(scope="module")
def controller(assemblies: dict[str, Assembly]) -> Context:
    """The `minimal` example's controller role and what its launches are built from."""
    return next(c for c in _contexts(assemblies["minimal"]) if c.use.kind == "controller")


def _results(ctx: Context, requests: list[AuthzRequest]) -> list[str]:
    return evaluate(ctx.use.policies, requests, ctx.use.account)


def _launch(ctx: Context) -> list[AuthzRequest]:
    return [*_launch_requests(ctx, "RunInstances"), *_launch_requests(ctx, "CreateFleet")]


def _only(requests: list[AuthzRequest], action: str, kind: str) -> list[AuthzRequest]:
    return [r for r in requests if r.action == action and f":{kind}/" in r.resource]


def test_the_legitimate_launches_from_the_cluster_templates_are_allowed(controller: Context) -> None:
    requests = _launch(controller)
    assert {r.action for r in requests} >= {"ec2:RunInstances", "ec2:CreateFleet", "ec2:CreateTags", "iam:PassRole"}
    assert _results(controller, requests) == ["Allowed"] * len(requests)


def test_run_instances_without_a_cluster_template_is_denied_at_its_instance(controller: Context) -> None:
    """Every RunInstances authorizes an instance; the instance statement requires a cluster template, so a launch
    without one (or with another template) is denied whatever else it names. The resources a launch takes from its
    template are bound by their own conditions (the other tests), not by the template (stacks/iam_policies.py)."""
    run = [r for r in _launch_requests(controller, "RunInstances") if r.action == "ec2:RunInstances"]
    instances = [r for r in run if ":instance/" in r.resource]
    untemplated = [
        replace(r, context={k: v for k, v in r.context.items() if k != "ec2:LaunchTemplate"}) for r in instances
    ]
    foreign = [
        replace(
            r,
            context={
                **r.context,
                "ec2:LaunchTemplate": str(r.context["ec2:LaunchTemplate"]).rsplit("/", 1)[0] + "/lt-0foreign0000000000",
            },
        )
        for r in instances
    ]
    assert instances and len(foreign) == len(untemplated) == len(instances)
    assert _results(controller, instances) == ["Allowed"] * len(instances)  # the control: with the cluster's template
    assert _results(controller, untemplated + foreign) == ["ImplicitlyDenied"] * (2 * len(instances))


def test_an_image_of_another_account_or_untagged_is_denied(controller: Context) -> None:
    (image,) = {r.resource: r for r in _only(_launch(controller), "ec2:RunInstances", "image")}.values()
    forged = [
        replace(
            image,
            resource=image.resource.rsplit("/", 1)[0] + "/ami-0foreign",
            context={**image.context, "ec2:Owner": FOREIGN_ACCOUNT},
        ),
        replace(image, context={k: v for k, v in image.context.items() if not k.startswith("aws:ResourceTag/")}),
        replace(image, context={**image.context, f"aws:ResourceTag/{TAG_CLUSTER}": "other"}),
    ]
    assert _results(controller, [image, *forged]) == ["Allowed", *["ImplicitlyDenied"] * len(forged)]


def test_an_instance_type_of_no_pool_is_denied_for_run_instances_and_create_fleet(controller: Context) -> None:
    instances = [r for r in _launch(controller) if ":instance/" in r.resource and r.action != "ec2:CreateTags"]
    assert {r.action for r in instances} == {"ec2:RunInstances", "ec2:CreateFleet"}
    forged = [replace(r, context={**r.context, "ec2:InstanceType": "p5.48xlarge"}) for r in instances]
    assert _results(controller, forged) == ["ImplicitlyDenied"] * len(forged)


def test_a_subnet_or_security_group_of_another_vpc_is_denied(controller: Context) -> None:
    network = [r for r in _launch(controller) if "ec2:Vpc" in r.context]
    assert {r.resource.split(":")[-1].split("/")[0] for r in network} == {"subnet", "security-group"}
    vpc = f"arn:aws:ec2:{controller.use.region}:{controller.use.account}:vpc/vpc-0foreign"
    forged = [replace(r, context={**r.context, "ec2:Vpc": vpc}) for r in network]
    assert _results(controller, forged) == ["ImplicitlyDenied"] * len(forged)


def test_passing_the_compute_role_without_a_cluster_template_launches_nothing(controller: Context) -> None:
    """iam:PassRole has no key naming the launch template (its keys: iam:PassedToService, iam:AssociatedResourceArn),
    so the pass itself looks the same; the launch it is part of is denied on its instance, and no other role can be
    passed."""
    launch = _launch_requests(controller, "RunInstances")
    (passed,) = {r.resource: r for r in launch if r.action == "iam:PassRole"}.values()
    instance = _only(launch, "ec2:RunInstances", "instance")[0]
    untemplated = replace(instance, context={k: v for k, v in instance.context.items() if k != "ec2:LaunchTemplate"})
    other_role = replace(passed, resource=passed.resource.rsplit("/", 1)[0] + "/Admin")
    assert _results(controller, [passed, untemplated, other_role]) == [
        "Allowed",
        "ImplicitlyDenied",
        "ImplicitlyDenied",
    ]


def test_a_pool_ami_id_and_a_single_type_spot_run_instances_are_allowed_by_the_same_statements() -> None:
    """What the recorded resume does not exercise (tests/aws/test_iam_conditions.py NOT_RECORDED), from the same
    statement builder: a pool's own AMI named by id, and spot by RunInstances (one type, one AZ)."""
    region, cluster, template = "us-east-1", "c1", "lt-0abc"
    target = RegionTarget(region, "vpc-1", [template], f"arn:aws:iam::{ACCOUNT}:role/compute", ("c7i.large",),
                          ("ami-0pool",))  # fmt: skip
    policy = role_documents(cluster, [target], ArnScope("aws", ACCOUNT, region))["controller"]
    inventory = Inventory(ACCOUNT, {"subnet-1": "vpc-1"}, {}, {template: Template("ami-0pool")},
                          images={"ami-0pool": Image(FOREIGN_ACCOUNT)})  # fmt: skip
    params = {
        "LaunchTemplate.LaunchTemplateId": template,
        "InstanceType": "c7i.large",
        "SubnetId": "subnet-1",
        "InstanceMarketOptions.MarketType": "spot",
        "TagSpecification.1.ResourceType": "instance",
        "TagSpecification.1.Tag.1.Key": TAG_CLUSTER,
        "TagSpecification.1.Tag.1.Value": cluster,
    }
    requests = authorization_requests({"service": "ec2", "region": region, "action": "RunInstances",
                                       "params": params}, inventory)  # fmt: skip
    assert {r.resource.split(":")[-1].split("/")[0] for r in requests} >= {"image", "spot-instances-request"}
    assert evaluate({"controller": policy}, requests, ACCOUNT) == ["Allowed"] * len(requests)
    other = [
        replace(r, resource=r.resource.replace("ami-0pool", "ami-0other")) for r in requests if ":image/" in r.resource
    ]
    assert evaluate({"controller": policy}, other, ACCOUNT) == ["ImplicitlyDenied"]


# ------------------------------------------------------------------ accounting.mode existing: the host alone (#3)
EXISTING_SECRET = "arn:aws:secretsmanager:us-east-1:111122223333:secret:slurm-accounting-AbCdEf"


@pytest.fixture(scope="module")
def existing_accounting(tmp_path_factory: pytest.TempPathFactory) -> list[RoleUse]:
    """The federation example with an existing database instead of a created one (east hosts slurmdbd): its
    controllers' roles as synthesized by the real CLI."""
    data = yaml.safe_load((REPO_ROOT / "cluster_config" / "examples" / "federation.yaml").read_text())
    data["accounting"] = {"mode": "existing", "host_cluster": "east", "endpoint": "slurmdb.example.com:3306",
                          "secret_arn": EXISTING_SECRET}  # fmt: skip
    for cluster in data["clusters"]:
        cluster["account_id"] = "111122223333"
    base = tmp_path_factory.mktemp("existing-accounting")
    config = base / "federation-existing.yaml"
    config.write_text(yaml.safe_dump(data), encoding="utf-8")
    result = synth_once(config, base / "out")
    assert result.returncode == 0, (result.stdout + result.stderr)[-2000:]
    assembly = Assembly(config, base / "out", result.returncode, result.stdout)
    return [u for u in role_uses(assembly) if u.kind == "controller"]


def test_only_the_accounting_host_reads_an_existing_database_secret_and_runs_slurmdbd(
    existing_accounting: list[RoleUse],
) -> None:
    """A cluster that uses another cluster's slurmdbd (the west member) gets no database secret in its boot env and
    its controller role cannot read it (the real evaluator), so it starts no second slurmdbd on the shared
    database; the host (east) can, the positive control."""
    by_cluster = {u.cluster: u for u in existing_accounting}
    assert set(by_cluster) == {"east", "west"}
    read = [AuthzRequest("secretsmanager:GetSecretValue", EXISTING_SECRET, {}, "get-secret-value")]
    east, west = by_cluster["east"], by_cluster["west"]
    assert evaluate(east.policies, read, east.account) == ["Allowed"]
    assert evaluate(west.policies, read, west.account) == ["ImplicitlyDenied"]
    assert east.env["ES_DB_SECRET"] == EXISTING_SECRET and east.env["ES_DB_ENDPOINT"] == "slurmdb.example.com:3306"
    assert "ES_DB_SECRET" not in west.env and "ES_DB_ENDPOINT" not in west.env
