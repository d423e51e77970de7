"""Turn recorded AWS calls into the IAM authorization requests AWS evaluates for them (pure).

IAM authorizes RunInstances/CreateFleet once per resource the call touches (Service Authorization Reference:
instance, volume, network-interface, subnet, security-group, image, launch-template, fleet, spot-instances-request),
each with its own condition keys: `aws:RequestTag/*` only where the call's TagSpecifications tag that resource type,
`ec2:Vpc` on subnets and security groups. Tagging on create is a separate `ec2:CreateTags` authorization with
`ec2:CreateAction`; a launch template's instance profile is an `iam:PassRole`. TerminateInstances is authorized per
instance with its `aws:ResourceTag/*`, SSM SendCommand per document and per instance (with its tags). Actions without resource-level
permissions are authorized on `*`.

`Inventory` is what the parameters alone do not say (subnet VPCs, template contents, instance tags); an I/O adapter
reads it from the (emulated) AWS.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

Context = dict[str, str | list[str]]

# Resource types the Service Authorization Reference lists for each launch action that our launches touch
# (CreateFleet authorizes no network-interface, security-group or spot-instances-request resource).
LAUNCH_RESOURCE_TYPES = {
    "CreateFleet": frozenset({"fleet", "image", "instance", "launch-template", "subnet", "volume"}),
    "RunInstances": frozenset(
        {
            "image",
            "instance",
            "network-interface",
            "security-group",
            "subnet",
            "volume",
            "launch-template",
            "spot-instances-request",
        }
    ),
}

_TAG_KEY = re.compile(r"TagSpecification\.(\d+)\.Tag\.(\d+)\.Key$")


@dataclass(frozen=True)
class Template:
    """What IAM sees of a launch template: its image, security groups and instance profile's role."""

    image_id: str
    security_group_ids: tuple[str, ...] = ()
    role_arn: str | None = None


@dataclass(frozen=True)
class Inventory:
    """Facts about existing resources the conditions need."""

    account: str
    subnet_vpc: Mapping[str, str] = field(default_factory=dict)  # subnet id -> VPC id
    group_vpc: Mapping[str, str] = field(default_factory=dict)  # security group id -> VPC id
    templates: Mapping[str, Template] = field(default_factory=dict)  # launch template id -> contents
    instance_tags: Mapping[str, Mapping[str, str]] = field(default_factory=dict)  # instance id -> tags


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


def _launch(action: str, region: str, params: Mapping[str, Any], inv: Inventory, call: str) -> list[AuthzRequest]:
    if action == "CreateFleet":
        templates = {str(v) for k, v in params.items() if k.endswith("LaunchTemplateSpecification.LaunchTemplateId")}
        subnets = {str(v) for k, v in params.items() if re.search(r"Overrides\.\d+\.SubnetId$", k)}
        spot = params.get("TargetCapacitySpecification.DefaultTargetCapacityType") == "spot"
    else:
        templates = (
            {str(params["LaunchTemplate.LaunchTemplateId"])} if "LaunchTemplate.LaunchTemplateId" in params else set()
        )
        subnets = {str(params["SubnetId"])} if "SubnetId" in params else set()
        spot = params.get("InstanceMarketOptions.MarketType") == "spot"
    tags = request_tags(params)
    full = f"ec2:{action}"
    acc = inv.account
    listed = LAUNCH_RESOURCE_TYPES[action]

    def on(resource: str, context: Context | None = None, act: str = full) -> AuthzRequest:
        return AuthzRequest(act, resource, context or {}, call)

    created = {
        "instance": "instance/i-new",
        "volume": "volume/vol-new",
        "network-interface": "network-interface/eni-new",
    }
    if action == "CreateFleet":
        created["fleet"] = "fleet/fleet-new"
    if spot:
        created["spot-instances-request"] = "spot-instances-request/sir-new"
    out = [
        on(_arn(region, acc, res), _tag_context(tags.get(kind, {}), "aws:RequestTag"))
        for kind, res in created.items()
        if kind in listed
    ]
    for subnet in sorted(subnets):
        vpc = _arn(region, acc, f"vpc/{inv.subnet_vpc.get(subnet, 'vpc-unknown')}")
        out.append(on(_arn(region, acc, f"subnet/{subnet}"), {"ec2:Vpc": vpc}))
    for template_id in sorted(templates):
        out.append(on(_arn(region, acc, f"launch-template/{template_id}")))
        template = inv.templates.get(template_id, Template("ami-unknown"))
        out.append(on(f"arn:aws:ec2:{region}::image/{template.image_id}"))
        for group in template.security_group_ids if "security-group" in listed else ():
            vpc = _arn(region, acc, f"vpc/{inv.group_vpc.get(group, 'vpc-unknown')}")
            out.append(on(_arn(region, acc, f"security-group/{group}"), {"ec2:Vpc": vpc}))
        if template.role_arn:
            out.append(on(template.role_arn, {"iam:PassedToService": "ec2.amazonaws.com"}, "iam:PassRole"))
    for kind, kind_tags in tags.items():
        context: Context = {"ec2:CreateAction": action, **_tag_context(kind_tags, "aws:RequestTag")}
        out.append(on(_arn(region, acc, created.get(kind, f"{kind}/new")), context, "ec2:CreateTags"))
    return out


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
