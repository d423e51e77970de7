"""Turn recorded AWS calls into the IAM authorization requests AWS evaluates for them (pure).

IAM authorizes RunInstances/CreateFleet once per resource the call touches (Service Authorization Reference,
https://docs.aws.amazon.com/service-authorization/latest/reference/list_amazonec2.html, `LAUNCH_RESOURCE_TYPES`), each
with its own condition keys: `aws:RequestTag/*` only where the call's TagSpecifications tag that resource type,
`ec2:Vpc` on subnets and security groups, `ec2:InstanceType` on the instance, `ec2:Owner` and the image's tags on the
image, and for RunInstances `ec2:LaunchTemplate` (the template's ARN) on every type but spot-instances-request.
CreateFleet's resource-level permissions "do not include the resources specified in a launch template", which are
authorized as RunInstances (the reference's CreateFleet description): a fleet's template image, security groups,
interfaces, volumes and instances become RunInstances requests carrying `ec2:LaunchTemplate`. Tagging on create is a
separate `ec2:CreateTags` authorization with `ec2:CreateAction`; a launch template's instance profile is an
`iam:PassRole`. TerminateInstances is authorized per instance with its `aws:ResourceTag/*`, SSM SendCommand per
document and per instance (with its tags). Actions without resource-level permissions are authorized on `*`.

`Inventory` is what the parameters alone do not say (subnet VPCs, template contents, image owners and tags, instance
tags); an I/O adapter reads it from the (emulated) AWS.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

Context = dict[str, str | list[str]]

# Every resource type the Service Authorization Reference lists for each launch action (required or not), as the
# evaluator's copy of it has them (tests/aws/test_iam_requests_reference.py compares); requests are built only for
# the types a call touches.
LAUNCH_RESOURCE_TYPES = {
    "CreateFleet": frozenset(
        {"capacity-reservation", "fleet", "image", "instance", "launch-template", "placement-group", "subnet", "volume"}
    ),
    "RunInstances": frozenset(
        {
            "capacity-reservation",
            "elastic-gpu",
            "elastic-inference",
            "group",
            "image",
            "instance",
            "key-pair",
            "launch-template",
            "license-configuration",
            "network-interface",
            "placement-group",
            "secondary-interface",
            "secondary-subnet",
            "security-group",
            "snapshot",
            "spot-instances-request",
            "subnet",
            "volume",
        }
    ),
}
# RunInstances resource types without the ec2:LaunchTemplate condition key (of those our launches touch)
WITHOUT_TEMPLATE_KEY = frozenset({"spot-instances-request"})

_TAG_KEY = re.compile(r"TagSpecification\.(\d+)\.Tag\.(\d+)\.Key$")


@dataclass(frozen=True)
class Template:
    """What IAM sees of a launch template: its image, security groups and instance profile's role."""

    image_id: str
    security_group_ids: tuple[str, ...] = ()
    role_arn: str | None = None


@dataclass(frozen=True)
class Image:
    """What IAM sees of an AMI: its owner (`ec2:Owner`) and tags (`aws:ResourceTag/*`)."""

    owner: str
    tags: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Inventory:
    """Facts about existing resources the conditions need."""

    account: str
    subnet_vpc: Mapping[str, str] = field(default_factory=dict)  # subnet id -> VPC id
    group_vpc: Mapping[str, str] = field(default_factory=dict)  # security group id -> VPC id
    templates: Mapping[str, Template] = field(default_factory=dict)  # launch template id -> contents
    instance_tags: Mapping[str, Mapping[str, str]] = field(default_factory=dict)  # instance id -> tags
    images: Mapping[str, Image] = field(default_factory=dict)  # image id -> owner and tags


@dataclass(frozen=True)
class AuthzRequest:
    """One IAM authorization: action on one resource ARN with its request context."""

    action: str
    resource: str
    context: Context
    call: str  # the recorded call it came from, for messages


def _arn(region: str, account: str, resource: str, service: str = "ec2") -> str:
    return f"arn:aws:{service}:{region}:{account}:{resource}"


def request_tags(params: Mapping[str, Any]) -> dict[str, dict[str, str]]:
    """Tags per resource type from TagSpecification.N.* parameters."""
    result: dict[str, dict[str, str]] = {}
    for name, key in params.items():
        match = _TAG_KEY.match(name)
        if match:
            spec, index = match.groups()
            kind = str(params.get(f"TagSpecification.{spec}.ResourceType", ""))
            result.setdefault(kind, {})[str(key)] = str(params.get(f"TagSpecification.{spec}.Tag.{index}.Value", ""))
    return result


def _tag_context(tags: Mapping[str, str], prefix: str) -> Context:
    context: Context = {f"{prefix}/{k}": v for k, v in tags.items()}
    if prefix == "aws:RequestTag" and tags:
        context["aws:TagKeys"] = sorted(tags)
    return context


def _launch_parameters(action: str, params: Mapping[str, Any]) -> tuple[set[str], set[str], set[str], bool]:
    """(template ids, subnet ids, instance types, spot) of a RunInstances/CreateFleet call."""
    if action == "CreateFleet":
        templates = {str(v) for k, v in params.items() if k.endswith("LaunchTemplateSpecification.LaunchTemplateId")}
        subnets = {str(v) for k, v in params.items() if re.search(r"Overrides\.\d+\.SubnetId$", k)}
        types = {str(v) for k, v in params.items() if re.search(r"Overrides\.\d+\.InstanceType$", k)}
        spot = params.get("TargetCapacitySpecification.DefaultTargetCapacityType") == "spot"
        return templates, subnets, types, spot
    templates = (
        {str(params["LaunchTemplate.LaunchTemplateId"])} if "LaunchTemplate.LaunchTemplateId" in params else set()
    )
    subnets = {str(params["SubnetId"])} if "SubnetId" in params else set()
    types = {str(params["InstanceType"])} if "InstanceType" in params else set()
    return templates, subnets, types, params.get("InstanceMarketOptions.MarketType") == "spot"


def _placements(params: Mapping[str, Any]) -> tuple[set[str], set[str]]:
    """(placement group names, capacity reservation ids) a launch names, in its parameters or overrides."""
    groups = {str(v) for k, v in params.items() if k == "Placement.GroupName" or k.endswith(".Placement.GroupName")}
    reservations = {str(v) for k, v in params.items() if k.endswith("CapacityReservationTarget.CapacityReservationId")}
    return groups, reservations


def _launch(action: str, region: str, params: Mapping[str, Any], inv: Inventory, call: str) -> list[AuthzRequest]:
    templates, subnets, types, spot = _launch_parameters(action, params)
    groups, reservations = _placements(params)
    tags = request_tags(params)
    acc = inv.account
    template_arn = _arn(region, acc, f"launch-template/{sorted(templates)[0]}") if templates else None

    def on(act: str, kind: str, resource: str, context: Context | None = None) -> AuthzRequest | None:
        """`act` on `resource` if the reference lists `kind` for it; RunInstances adds `ec2:LaunchTemplate`."""
        if act.startswith("ec2:") and kind not in LAUNCH_RESOURCE_TYPES[act.removeprefix("ec2:")]:
            return None
        full: Context = dict(context or {})
        if act == "ec2:RunInstances" and template_arn and kind not in WITHOUT_TEMPLATE_KEY:
            full["ec2:LaunchTemplate"] = template_arn
        return AuthzRequest(act, resource, full, call)

    def created(act: str, kind: str, resource: str) -> AuthzRequest | None:
        return on(act, kind, _arn(region, acc, resource), _tag_context(tags.get(kind, {}), "aws:RequestTag"))

    def instances(act: str) -> list[AuthzRequest | None]:
        context = _tag_context(tags.get("instance", {}), "aws:RequestTag")
        return [
            on(act, "instance", _arn(region, acc, "instance/i-new"), {**context, "ec2:InstanceType": t})
            for t in sorted(types) or ["unknown"]
        ]

    full = f"ec2:{action}"
    # what the call itself names: the launch itself, its overrides (subnets, placement), the template
    out: list[AuthzRequest | None] = [*instances(full)]
    if action == "CreateFleet":
        out.append(created(full, "fleet", "fleet/fleet-new"))
    for subnet in sorted(subnets):
        vpc = _arn(region, acc, f"vpc/{inv.subnet_vpc.get(subnet, 'vpc-unknown')}")
        out.append(on(full, "subnet", _arn(region, acc, f"subnet/{subnet}"), {"ec2:Vpc": vpc}))
    for group in sorted(groups):
        out.append(on(full, "placement-group", _arn(region, acc, f"placement-group/{group}")))
    for reservation in sorted(reservations):
        out.append(on(full, "capacity-reservation", _arn(region, acc, f"capacity-reservation/{reservation}")))
    for template_id in sorted(templates):
        out.append(on(full, "launch-template", _arn(region, acc, f"launch-template/{template_id}")))
    # what the launch creates and takes from the template: RunInstances (for a fleet too, see the module docstring)
    run = "ec2:RunInstances"
    if action == "CreateFleet":
        out += instances(run)
    out += [created(run, "volume", "volume/vol-new"), created(run, "network-interface", "network-interface/eni-new")]
    if spot and action == "RunInstances":
        out.append(created(run, "spot-instances-request", "spot-instances-request/sir-new"))
    for template_id in sorted(templates):
        template = inv.templates.get(template_id, Template("ami-unknown"))
        image = inv.images.get(template.image_id, Image("unknown"))
        image_context: Context = {"ec2:Owner": image.owner, **_tag_context(image.tags, "aws:ResourceTag")}
        out.append(on(run, "image", f"arn:aws:ec2:{region}::image/{template.image_id}", image_context))
        for group in template.security_group_ids:
            vpc = _arn(region, acc, f"vpc/{inv.group_vpc.get(group, 'vpc-unknown')}")
            out.append(on(run, "security-group", _arn(region, acc, f"security-group/{group}"), {"ec2:Vpc": vpc}))
        if template.role_arn:
            out.append(on("iam:PassRole", "role", template.role_arn, {"iam:PassedToService": "ec2.amazonaws.com"}))
    created_arns = {"instance": "instance/i-new", "fleet": "fleet/fleet-new"}
    for kind, kind_tags in tags.items():
        context: Context = {"ec2:CreateAction": action, **_tag_context(kind_tags, "aws:RequestTag")}
        out.append(
            AuthzRequest("ec2:CreateTags", _arn(region, acc, created_arns.get(kind, f"{kind}/new")), context, call)
        )
    return [r for r in out if r is not None]


def _on_instances(action: str, region: str, ids: list[str], inv: Inventory, call: str) -> list[AuthzRequest]:
    """`action` on each existing instance, with its tags as `aws:ResourceTag/*`."""
    return [
        AuthzRequest(
            action,
            _arn(region, inv.account, f"instance/{i}"),
            _tag_context(inv.instance_tags.get(i, {}), "aws:ResourceTag"),
            call,
        )
        for i in ids
    ]


def authorization_requests(entry: Mapping[str, Any], inv: Inventory) -> list[AuthzRequest]:
    """The authorizations IAM performs for one recorded call `{"service", "region", "action", "params"}`."""
    service, region, action = str(entry["service"]), str(entry["region"]), str(entry["action"])
    params: Mapping[str, Any] = entry.get("params", {})
    call = f"{service}:{action} in {region}"
    if service == "ec2" and action in ("RunInstances", "CreateFleet"):
        return _launch(action, region, params, inv, call)
    if service == "ec2" and action == "TerminateInstances":
        ids = [str(v) for k, v in sorted(params.items()) if re.match(r"InstanceId\.\d+$", k)]
        return _on_instances("ec2:TerminateInstances", region, ids, inv, call)
    if service == "ssm" and action == "SendCommand":
        document = f"arn:aws:ssm:{region}::document/{params.get('DocumentName', '')}"
        hosts = [str(i) for i in params.get("InstanceIds", [])]
        return [
            AuthzRequest("ssm:SendCommand", document, {}, call),
            *_on_instances("ssm:SendCommand", region, hosts, inv, call),
        ]
    return [AuthzRequest(f"{service}:{action}", "*", {}, call)]


def table(entries: Iterable[Mapping[str, Any]], inv: Inventory) -> list[AuthzRequest]:
    """Every authorization of every recorded call, duplicates removed (first occurrence kept)."""
    seen: set[str] = set()
    result = []
    for entry in entries:
        for request in authorization_requests(entry, inv):
            key = repr((request.action, request.resource, sorted(request.context.items())))
            if key not in seen:
                seen.add(key)
                result.append(request)
    return result
