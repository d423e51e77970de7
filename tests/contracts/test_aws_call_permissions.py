"""Contract: every AWS call the code makes (tests/contracts/aws_calls.py) is allowed by the policy of the role that
makes it, in every synthesized assembly, evaluated with the real IAM evaluator on the resources and conditions the
call uses.

Both sides are ours: the calls come from the code and the rendered user data; the roles, their policies and every
value the code reads (the env file the user data writes, the deployed-infra parameter the manifest is rendered from,
the launch templates) come from the synthesized templates, resolved by tests/contracts/cfn_resolve.py. Which role a
node runs as is read from the template too: each launch template's user data names its role (`ES_ROLE`) and its
instance profile names the IAM role; the deconfigure Lambda names its role.

Classified by hand (each with its reason, in `RESOURCES_OF`, `RESOURCES_AT` and `LOCALS`): which resource a call acts on where the
code passes a value from a shell variable or a module constant, not an env value; `ssm:SendCommand` on the AWS-owned
document (no account in its ARN: the evaluator cannot evaluate it, docs/iam.md). Not evaluated: AWS managed policies
(`AmazonSSMManagedInstanceCore`; only our statements are).

Negative cases: the controller policy less one statement denies the calls that need it; a made-up `ec2.delete_vpc`
in a snippet fed to the extractor comes out as a call the contract reports as unauthorized.
"""

from __future__ import annotations

import ast
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest

from cluster_config import load
from cluster_config.model_infra import ExistingNetwork
from localcloud.aws.iam_requests import AuthzRequest, Image, Inventory, Template, authorization_requests
from slurm_plugin.exporter.cloudwatch import NAMESPACE
from slurm_plugin.naming import TAG_SUBMIT_HOST, fleet_parameter
from stacks.iam_policies import ArnScope
from stacks.naming import TAG_CLUSTER
from stacks.node_policies import custom_action_objects
from stacks.user_data import env_values_in
from tests.aws.iam_eval import evaluate
from tests.aws.test_iam_requests_reference import reference_action
from tests.cdk.conftest import Assembly
from tests.contracts.aws_calls import AwsCall, _makers, code_calls, python_calls
from tests.contracts.cfn_resolve import Resolver

# AWS-owned SSM documents: ARN without an account, which the evaluator's ARN pattern rejects (docs/iam.md)
UNEVALUABLE = "::document/"


@dataclass
class RoleUse:
    """One IAM role as a component runs under it: its kind, stack, policies (resolved) and what its node reads."""

    kind: str  # controller, compute, login, deconfigure
    stack: str
    role: str  # logical id
    account: str
    region: str
    cluster: str
    policies: dict[str, Any]
    env: dict[str, str] = field(default_factory=dict)
    launch_templates: list[str] = field(default_factory=list)  # logical ids of the templates this role's nodes use


class _Resolver(Resolver):
    """cfn_resolve's Resolver, plus: `Ref` of a SecretTargetAttachment is the attached secret's ARN (CloudFormation
    docs of AWS::SecretsManager::SecretTargetAttachment, return values)."""

    def ref(self, stack: str, logical_id: str) -> str:
        resource = self.resources(stack).get(logical_id, {})
        if resource.get("Type") == "AWS::SecretsManager::SecretTargetAttachment":
            return str(self.resolve(stack, resource["Properties"]["SecretId"]))
        return super().ref(stack, logical_id)


def _policies(resolver: Resolver, stack: str, role: str) -> dict[str, Any]:
    result = {}
    # CDK moves what exceeds an inline policy's 10,240 characters into customer managed "OverflowPolicy" resources
    for kind in ("AWS::IAM::Policy", "AWS::IAM::ManagedPolicy"):
        for logical_id, policy in resolver.resources(stack, kind).items():
            if {"Ref": role} in policy["Properties"].get("Roles", []):
                result[logical_id] = resolver.resolve(stack, policy["Properties"]["PolicyDocument"])
    for index, inline in enumerate(resolver.resources(stack)[role]["Properties"].get("Policies", [])):
        result[f"{role}-inline-{index}"] = resolver.resolve(stack, inline["PolicyDocument"])
    return result


def role_uses(assembly: Assembly) -> list[RoleUse]:
    """Every node role (by its launch templates' user data) and the deconfigure Lambda's role of an assembly."""
    resolver = _Resolver.from_assembly(assembly.outdir)
    found: dict[tuple[str, str, str], RoleUse] = {}
    for name, stack in resolver.stacks.items():
        for logical_id, lt in resolver.resources(name, "AWS::EC2::LaunchTemplate").items():
            data = lt["Properties"].get("LaunchTemplateData", {})
            user_data = resolver.resolve(name, data.get("UserData"))
            profile = data.get("IamInstanceProfile", {}).get("Arn", {}).get("Fn::GetAtt", [None])[0]
            if not isinstance(user_data, str) or profile is None:
                continue
            try:
                env = env_values_in(user_data)  # stacks/user_data.py's own reader of what it writes
            except ValueError:
                continue  # not a cluster node (e.g. an image build)
            role = resolver.resources(name)[profile]["Properties"]["Roles"][0]["Ref"]
            key = (env["ES_ROLE"], name, role)
            if key not in found:
                found[key] = RoleUse(
                    env["ES_ROLE"], name, role, stack.account, env["ES_REGION"], env["ES_CLUSTER"],
                    _policies(resolver, name, role), env,
                )  # fmt: skip
            found[key].launch_templates.append(logical_id)
        for logical_id, fn in resolver.resources(name, "AWS::Lambda::Function").items():
            if logical_id.startswith("Deconfigure"):  # stacks/deconfigure.py's construct id
                role = fn["Properties"]["Role"]["Fn::GetAtt"][0]
                cluster = next(u.cluster for u in found.values() if u.stack == name)
                use = RoleUse("deconfigure", name, role, stack.account, stack.region, cluster,
                              _policies(resolver, name, role))  # fmt: skip
                found[("deconfigure", name, role)] = use
    return list(found.values())


# ------------------------------------------------------------------------------------ resources the calls act on


@dataclass(frozen=True)
class Context:
    """What the requests of one role in one assembly are built from."""

    use: RoleUse
    assembly: Assembly
    resolver: Resolver
    controller_stack: str

    def arn(self, resource: str, service: str, region: str | None = None) -> str:
        return f"arn:aws:{service}:{region or self.use.region}:{self.use.account}:{resource}"

    def parameter(self, name: str) -> str:
        return self.arn(f"parameter/{name.lstrip('/')}", "ssm")

    def config_object(self) -> list[str]:
        """The S3 object the config parameter names (its value in the template)."""
        name = self.use.env["ES_CONFIG_PARAMETER"]
        for p in self.resolver.resources(self.controller_stack, "AWS::SSM::Parameter").values():
            if self.resolver.resolve(self.controller_stack, p["Properties"]["Name"]) == name:
                url = str(self.resolver.resolve(self.controller_stack, p["Properties"]["Value"]))
                return [f"arn:aws:s3:::{url.removeprefix('s3://')}"]
        raise AssertionError(f"no parameter {name} in {self.controller_stack}")

    def action_objects(self) -> list[str]:
        config = load(self.assembly.config)
        cluster = config.cluster(self.use.cluster)
        return custom_action_objects(ArnScope("aws", self.use.account, self.use.region), cluster)

    def directory_secret(self) -> list[str]:
        cluster = load(self.assembly.config).cluster(self.use.cluster)
        secret = cluster.directory.bind_password_secret_arn if cluster.directory else None
        return [secret] if secret else []


def _req(action: str, resources: list[str], context: dict[str, Any] | None = None) -> list[AuthzRequest]:
    return [AuthzRequest(action, r, dict(context or {}), "") for r in resources]


def _env_resources(ctx: Context, var: str, to_arn: Callable[[str], str]) -> list[str]:
    value = ctx.use.env.get(var)
    return [to_arn(value)] if value else []  # absent: the config has no such resource, the script skips the call


def _secret_arn(ctx: Context) -> Callable[[str], str]:
    """A secret id as IAM sees it: an ARN stays; a name (a federation member reads the owner's munge key by name) is
    authorized on the secret's ARN, which ends in `-` and six random characters."""
    return lambda v: v if v.startswith("arn:") else ctx.arn(f"secret:{v}-AbCdEf", "secretsmanager")


def _queue_arn(url: str) -> str:
    _, _, host, account, name = url.split("/")
    return f"arn:aws:sqs:{host.split('.')[1]}:{account}:{name}"


# Shell variables the scripts fill at run time (not env values), by hand: what each holds
LOCALS: dict[str, Callable[[Context], list[str]]] = {
    "script": Context.action_objects,  # elastic-slurm-custom-actions: each custom action's S3 script
    "secret": Context.directory_secret,  # elastic-slurm-directory: the directory section's bind password secret
}


def _cli_resources(call: AwsCall, ctx: Context) -> list[str]:
    """The resources a CLI call names: values of `--name(s)`, `--secret-id`, `--topic-arn`, or s3 cp's source."""
    words = list(call.argv)
    values: list[str] = []
    if call.service == "s3":
        values = [w for w in words[2:] if not w.startswith("-")][:1]
    for flag in ("--name", "--names", "--secret-id", "--topic-arn"):
        if flag in words:
            for w in words[words.index(flag) + 1 :]:
                if w.startswith("--"):
                    break
                values.append(w)
    resources: list[str] = []
    for value in values:
        var = value.strip('"').removeprefix("$").strip("{}")
        if var in LOCALS:
            resources += LOCALS[var](ctx)
        elif var.startswith("ES_"):
            resources += _env_resources(ctx, var, lambda v: v)
        else:
            raise AssertionError(f"{call.origin}: cannot tell what {value!r} names (add it to LOCALS)")
    if call.service == "ssm":
        resources = [ctx.parameter(r) if not r.startswith("arn:") else r for r in resources]
    return resources


def _launch_requests(ctx: Context, action: str) -> list[AuthzRequest]:
    """The plugin's launches from each pool template of the deployed-infra parameter (what its manifest says)."""
    r, stack = ctx.resolver, ctx.controller_stack
    infra_name = ctx.use.env["ES_DEPLOYED_INFRA"]
    infra = next(
        json.loads(r.resolve(stack, p["Properties"]["Value"]))
        for p in r.resources(stack, "AWS::SSM::Parameter").values()
        if r.resolve(stack, p["Properties"]["Name"]) == infra_name
    )
    config = load(ctx.assembly.config).cluster(ctx.use.cluster)
    types = {f"{part.name}-{p.name}": p.instance_types[0] for part in config.partitions for p in part.pools}
    subnet_vpc, group_vpc, templates, images = {}, {}, {}, {}
    for name in r.stacks:
        for lid, s in r.resources(name, "AWS::EC2::Subnet").items():
            subnet_vpc[r.ref(name, lid)] = r.resolve(name, s["Properties"]["VpcId"])
        for lid, g in r.resources(name, "AWS::EC2::SecurityGroup").items():
            group_vpc[r.ref(name, lid)] = r.resolve(name, g["Properties"].get("VpcId", ""))
        for lid, lt in r.resources(name, "AWS::EC2::LaunchTemplate").items():
            data = r.resolve(name, lt["Properties"]["LaunchTemplateData"])
            profile = lt["Properties"]["LaunchTemplateData"].get("IamInstanceProfile", {}).get("Arn", {})
            role = None
            if "Fn::GetAtt" in profile:
                role_id = r.resources(name)[profile["Fn::GetAtt"][0]]["Properties"]["Roles"][0]["Ref"]
                role = r.get_att(name, role_id, "Arn")
            image = str(data.get("ImageId", "ami-unknown"))
            if image.startswith("resolve:ssm:"):  # the cluster's image (Image Builder: this account, cluster tag)
                image = f"ami-{ctx.use.cluster}-{image.rsplit('/', 1)[1]}"
                images[image] = Image(ctx.use.account, {TAG_CLUSTER: ctx.use.cluster})
            templates[r.ref(name, lid)] = Template(image, tuple(data.get("SecurityGroupIds", [])), role)
    # what the config names rather than the templates create: an imported VPC's subnets, and the extra security
    # groups of controllers and pools, which the config requires to be in the cluster's (home) VPC
    network = config.network
    if isinstance(network, ExistingNetwork):
        subnet_vpc.update({s.subnet_id: network.vpc_id for s in network.subnets})
    home_subnet = next(s for az, s in infra["subnets"].items() if az.startswith(config.region))
    extra = [*config.controller.security_groups, *(g for part in config.partitions for p in part.pools
                                                   for g in p.security_groups)]  # fmt: skip
    group_vpc.update({g: subnet_vpc[home_subnet] for g in extra})
    inventory = Inventory(ctx.use.account, subnet_vpc, group_vpc, templates, {}, images)
    requests = []
    for key, template_id in sorted(infra["launch_templates"].items()):
        pool, region = key.split("@")
        subnet = next((s for az, s in infra["subnets"].items() if az.startswith(region)), None)
        subnet = subnet or next(iter(subnet_vpc))  # a remote region: its own stack's subnets
        params: dict[str, Any] = {
            "TagSpecification.1.ResourceType": "instance",
            "TagSpecification.1.Tag.1.Key": TAG_CLUSTER,
            "TagSpecification.1.Tag.1.Value": ctx.use.cluster,
        }
        if action == "RunInstances":
            params |= {"LaunchTemplate.LaunchTemplateId": template_id, "InstanceType": types[pool], "SubnetId": subnet}
        else:
            prefix = "LaunchTemplateConfigs.1."
            params |= {
                f"{prefix}LaunchTemplateSpecification.LaunchTemplateId": template_id,
                f"{prefix}Overrides.1.InstanceType": types[pool],
                f"{prefix}Overrides.1.SubnetId": subnet,
            }
        entry = {"service": "ec2", "region": region, "action": action, "params": params}
        requests += authorization_requests(entry, inventory)
    return requests


def _instance(ctx: Context) -> str:
    """An existing instance the call acts on (its tags go in the request context)."""
    return ctx.arn("instance/i-0cluster", "ec2")


def requests_for(call: AwsCall, ctx: Context) -> list[AuthzRequest]:
    """The authorizations IAM performs for `call` made by `ctx.use`'s component, with their resources/conditions."""
    action = call.action
    if call.argv:
        if action == "ec2:DescribeInstances":
            return _req(action, ["*"])
        return _req(action, _cli_resources(call, ctx))
    if action in ("ec2:RunInstances", "ec2:CreateFleet"):
        return _launch_requests(ctx, action.split(":")[1])
    if action == "ec2:TerminateInstances":
        return _req(action, [_instance(ctx)], {f"aws:ResourceTag/{TAG_CLUSTER}": ctx.use.cluster})
    if action == "ssm:SendCommand":  # the deconfigure Lambda: to submit hosts (and the AWS-owned document)
        return _req(action, [_instance(ctx)], {f"aws:ResourceTag/{TAG_SUBMIT_HOST}": ctx.use.cluster})
    module = call.origin.rsplit(":", 1)[0]
    if (module, action) in RESOURCES_AT:
        return _req(action, RESOURCES_AT[(module, action)](ctx), CONTEXT_OF.get(action, {}))
    if action in RESOURCES_OF:
        return _req(action, RESOURCES_OF[action](ctx), CONTEXT_OF.get(action, {}))
    # no resource-level permissions (Describe*, pricing, PutMetricData): authorized on "*"; an action on resources
    # that RESOURCES_OF does not know is evaluated on "*" too, which only a policy granting every resource allows:
    # a new call is reported until its resources are added here
    return _req(action, ["*"], CONTEXT_OF.get(action, {}))


# Python calls on resources: what each acts on (the code reads these names from the env or the naming module)
RESOURCES_OF: dict[str, Callable[[Context], list[str]]] = {
    # slurm_plugin/boot_fetch.py, started by the user data with --munge-secret "$ES_MUNGE_SECRET"
    "secretsmanager:GetSecretValue": lambda c: _env_resources(c, "ES_MUNGE_SECRET", _secret_arn(c)),
    # boot_fetch --parameters "$ES_MOUNTS_PARAMETER" "$ES_CONF_SERVER_PARAMETER"
    "ssm:GetParameters": lambda c: [
        c.parameter(c.use.env[v]) for v in ("ES_MOUNTS_PARAMETER", "ES_CONF_SERVER_PARAMETER")
    ],
    # slurm_plugin/manager/fleet.py: the operator's fleet stop/start parameter
    "ssm:GetParameter": lambda c: [c.parameter(fleet_parameter(c.use.cluster))],
    # slurm_plugin/manager/events.py: the events queue (ES_EVENTS_QUEUE is its URL)
    "sqs:ReceiveMessage": lambda c: _env_resources(c, "ES_EVENTS_QUEUE", _queue_arn),
    "sqs:DeleteMessage": lambda c: _env_resources(c, "ES_EVENTS_QUEUE", _queue_arn),
}
# ... where one module's call acts on other resources than the action's other callers
RESOURCES_AT: dict[tuple[str, str], Callable[[Context], list[str]]] = {
    # slurm_plugin/config_fetch.py, run by elastic-slurm-config-apply with --parameters "$ES_CONFIG_PARAMETER"
    # "$ES_CONF_SERVER_PARAMETER" "$ES_DEPLOYED_INFRA" and --download-named "$ES_CONFIG_PARAMETER"
    ("slurm_plugin/config_fetch.py", "ssm:GetParameters"): lambda c: [
        c.parameter(c.use.env[v]) for v in ("ES_CONFIG_PARAMETER", "ES_CONF_SERVER_PARAMETER", "ES_DEPLOYED_INFRA")
    ],
    ("slurm_plugin/config_fetch.py", "s3:GetObject"): Context.config_object,
}
CONTEXT_OF: dict[str, dict[str, Any]] = {"cloudwatch:PutMetricData": {"cloudwatch:namespace": NAMESPACE}}


# ------------------------------------------------------------------------------------------------------ the contract


def _denied(use: RoleUse, calls: list[AwsCall], ctx: Context) -> list[str]:
    pairs = [(c, r) for c in calls for r in requests_for(c, ctx) if UNEVALUABLE not in r.resource]
    if not pairs:
        return []
    results = evaluate(use.policies, [r for _, r in pairs], use.account)
    return [
        f"{use.kind} ({use.stack}/{use.role}): {c.origin}: {r.action} on {r.resource} {r.context} -> {res}"
        for (c, r), res in zip(pairs, results, strict=True)
        if res != "Allowed"
    ]


def _contexts(assembly: Assembly) -> list[Context]:
    resolver = _Resolver.from_assembly(assembly.outdir)
    uses = role_uses(assembly)
    controller = {u.cluster: u.stack for u in uses if u.kind == "controller"}
    return [Context(u, assembly, resolver, controller[u.cluster]) for u in uses]


@pytest.fixture(scope="module")
def calls() -> list[AwsCall]:
    return code_calls()


def test_every_call_site_has_a_service_and_an_iam_action_the_reference_knows(calls: list[AwsCall]) -> None:
    assert {c.action for c in calls} >= {"ec2:RunInstances", "ec2:CreateFleet", "ssm:GetParameters", "s3:GetObject"}
    assert [c.origin for c in calls if c.service is None] == []
    for call in calls:
        assert reference_action(call.action)["name"] == call.action.split(":")[1], call.origin


def test_every_call_is_allowed_for_the_role_that_makes_it_in_every_assembly(
    assemblies: dict[str, Assembly], calls: list[AwsCall]
) -> None:
    denied: list[str] = []
    kinds = set()
    for name, assembly in sorted(assemblies.items()):
        if assembly.returncode != 0:
            continue  # tests/cdk report failed synths
        for ctx in _contexts(assembly):
            kinds.add(ctx.use.kind)
            mine = [c for c in calls if ctx.use.kind in c.roles]
            denied += [f"{name}: {d}" for d in _denied(ctx.use, mine, ctx)]
    assert {"controller", "compute", "deconfigure"} <= kinds
    assert denied == []


def _minimal(assemblies: dict[str, Assembly]) -> Context:
    assembly = assemblies["minimal"]
    return next(c for c in _contexts(assembly) if c.use.kind == "controller")


def test_a_controller_policy_less_one_statement_denies_the_calls_that_need_it(
    assemblies: dict[str, Assembly], calls: list[AwsCall]
) -> None:
    ctx = _minimal(assemblies)
    mine = [c for c in calls if "controller" in c.roles]
    cases = {
        "ReadClusterConfig": {"s3:GetObject"},
        "RunOnlyTaggedPoolInstances": {"ec2:RunInstances"},  # a fleet's instances are RunInstances requests too
        "ConsumeClusterEvents": {"sqs:ReceiveMessage", "sqs:DeleteMessage"},
        "PassOnlyComputeRolesToEc2": {"iam:PassRole"},
    }
    for sid, actions in cases.items():
        broken = {
            k: {**doc, "Statement": [s for s in doc["Statement"] if s.get("Sid") != sid]}
            for k, doc in ctx.use.policies.items()
        }
        assert broken != ctx.use.policies, sid
        use = RoleUse(**{**ctx.use.__dict__, "policies": broken})
        denied = _denied(use, mine, Context(use, ctx.assembly, ctx.resolver, ctx.controller_stack))
        assert {d.split(": ")[2].split(" on ")[0] for d in denied} == actions, (sid, denied)


def test_a_new_boto3_call_without_a_permission_is_extracted_and_reported_unauthorized(
    assemblies: dict[str, Assembly],
) -> None:
    snippet = 'import boto3\n\ndef cleanup(vpc):\n    ec2 = boto3.client("ec2")\n    ec2.delete_vpc(VpcId=vpc)\n'
    found = python_calls(snippet, "snippet.py", ["ec2"], _makers(ast.parse(snippet)))
    assert [(c.service, c.operation, c.action) for c in found] == [("ec2", "DeleteVpc", "ec2:DeleteVpc")]
    ctx = _minimal(assemblies)
    (call,) = (AwsCall(c.service, c.operation, c.origin, frozenset({"controller"})) for c in found)
    denied = _denied(ctx.use, [call], ctx)
    assert len(denied) == 1 and "snippet.py:5: ec2:DeleteVpc on * {} -> ImplicitlyDenied" in denied[0]


def test_the_images_the_controller_may_launch_are_the_images_the_images_stack_tags(
    assemblies: dict[str, Assembly],
) -> None:
    """The launch policy admits the account's images tagged `elastic-slurm:cluster=<cluster>` (the requests above
    assume it): every distribution of every images stack must tag its AMIs so, else every launch would be denied."""
    checked = 0
    for name, assembly in assemblies.items():
        for stack in assembly.templates:
            resources = assembly.template_json(stack).get("Resources", {})
            for resource in resources.values():
                if resource["Type"] != "AWS::ImageBuilder::DistributionConfiguration":
                    continue
                cluster = stack.removeprefix("es-").removesuffix("-images")
                for distribution in resource["Properties"]["Distributions"]:
                    tags = distribution["AmiDistributionConfiguration"]["AmiTags"]
                    assert tags.get(TAG_CLUSTER) == cluster, f"{name}/{stack}: {tags}"
                    checked += 1
    assert checked >= len(assemblies)  # at least one distribution per config
