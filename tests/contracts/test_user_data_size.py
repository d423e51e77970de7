"""Contract: every user data we synthesize fits EC2's limit, with a margin.

EC2 limits user data to 16 KB in raw form, before base64 encoding
(https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/instancedata-add-user-data.html); a larger one fails the launch
(RunInstances, CreateFleet) or the launch template's creation. The user data of every launch template and instance in
every synthesized template is measured at its worst case: each CloudFormation token counted at the longest value it
can take (WORST_CASE below, from the resource it names), and must stay MARGIN_BYTES under the limit. The largest is
printed. Negative case: a user data inflated past the limit is reported.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from tests.cdk.conftest import Assembly
from tests.contracts.test_stack_dependencies import Stack, stacks_of

LIMIT_BYTES = 16 * 1024
# Room for what a config adds without a code change (custom actions, more directories, longer names): a user data
# within 2 KiB of the limit is reported before a config makes it fail.
MARGIN_BYTES = 2 * 1024
ARN_PREFIX = len("arn:aws-iso-b:secretsmanager:") + len("ap-southeast-7") + len(":123456789012:")
# Longest value of a token by what it names, when the template does not give the value itself. Sources: DNS names are
# at most 253 characters (RFC 1035); CloudFormation-generated physical names are at most the resource type's name
# limit (SQS queue name 80, SNS topic name 256, secret name 512); a wait condition handle's pre-signed S3 URL is under
# 1 KiB; pseudo parameters by their longest values today.
WORST_CASE = {
    "AWS::SQS::Queue": len("https://sqs.ap-southeast-7.amazonaws.com/123456789012/") + 80,
    "AWS::SNS::Topic": len("arn:aws-iso-b:sns:ap-southeast-7:123456789012:") + 256,
    "AWS::SecretsManager::Secret": ARN_PREFIX + len("secret:") + 512 + len("-AbCdEf"),
    "AWS::SecretsManager::SecretTargetAttachment": ARN_PREFIX + len("secret:") + 512 + len("-AbCdEf"),
    "AWS::CloudFormation::WaitConditionHandle": 1024,
    "AWS::SSM::Parameter": 2048,  # a parameter name's limit, when the template does not name it
    "AWS::Logs::LogGroup": 512,  # a log group name's limit, likewise
}
PSEUDO = {"AWS::Region": 14, "AWS::AccountId": 12, "AWS::Partition": 10, "AWS::URLSuffix": 17, "AWS::StackName": 128}
ATTRIBUTE = {"Endpoint.Address": 253, "Endpoint.Port": 5}
UNKNOWN = 2048  # anything else: counted large on purpose, so a new kind of token is noticed in the printout


def _named(resource: Mapping[str, Any]) -> int | None:
    """The length of a Ref whose value the template states: an SSM parameter's or a log group's literal name."""
    props = resource.get("Properties", {})
    for key in ("Name", "LogGroupName"):
        if resource["Type"] in ("AWS::SSM::Parameter", "AWS::Logs::LogGroup") and isinstance(props.get(key), str):
            return len(props[key])
    if resource["Type"] == "AWS::SecretsManager::Secret" and isinstance(props.get("Name"), str):
        return ARN_PREFIX + len("secret:") + len(props["Name"]) + len("-AbCdEf")
    return None


def worst_length(value: Any, stack: Stack, stacks: Mapping[str, Stack]) -> int:
    """The longest string `value` (a CloudFormation expression of `stack`) can become."""
    if isinstance(value, str):
        return len(value.encode())
    if isinstance(value, dict) and len(value) == 1:
        [(function, argument)] = value.items()
        if function == "Fn::Base64":
            return worst_length(argument, stack, stacks)
        if function == "Fn::Join":
            separator, parts = argument
            return len(separator) * max(len(parts) - 1, 0) + sum(worst_length(p, stack, stacks) for p in parts)
        if function == "Ref":
            if argument in PSEUDO:
                return PSEUDO[argument]
            resource = stack.template["Resources"].get(argument)
            if resource is None:
                return UNKNOWN
            named = _named(resource)
            return named if named is not None else WORST_CASE.get(resource["Type"], UNKNOWN)
        if function == "Fn::GetAtt":
            return ATTRIBUTE.get(argument[1], UNKNOWN)
        if function == "Fn::ImportValue" and isinstance(argument, str):
            exporter = stacks.get(argument.split(":", 1)[0])
            for output in exporter.template.get("Outputs", {}).values() if exporter else ():
                if output.get("Export", {}).get("Name") == argument:
                    return worst_length(output["Value"], exporter, stacks)  # type: ignore[arg-type]
    return UNKNOWN


def user_data_sizes(stacks: Mapping[str, Stack]) -> dict[str, int]:
    """`stack/logical id` → worst-case raw user data bytes of every launch template and instance."""
    sizes = {}
    for stack in stacks.values():
        for logical_id, resource in stack.template.get("Resources", {}).items():
            props = resource.get("Properties", {})
            if resource["Type"] == "AWS::EC2::LaunchTemplate":
                user_data = props.get("LaunchTemplateData", {}).get("UserData")
            elif resource["Type"] == "AWS::EC2::Instance":
                user_data = props.get("UserData")
            else:
                continue
            if user_data is not None:
                sizes[f"{stack.name}/{logical_id}"] = worst_length(user_data, stack, stacks)
    return sizes


def too_large(sizes: Mapping[str, int]) -> list[str]:
    """Every user data within MARGIN_BYTES of EC2's limit (or over it)."""
    return [f"{key}: {size} bytes" for key, size in sizes.items() if size > LIMIT_BYTES - MARGIN_BYTES]


def test_every_user_data_fits_ec2s_limit_with_a_margin(assemblies: dict[str, Assembly]) -> None:
    largest: tuple[int, str] = (0, "")
    measured = 0
    for name, assembly in sorted(assemblies.items()):
        assert assembly.returncode == 0, assembly.output[-2000:]
        sizes = user_data_sizes(stacks_of(assembly))
        assert sizes, f"{name}: no user data found"
        assert too_large(sizes) == [], name
        measured += len(sizes)
        size, key = max((s, k) for k, s in sizes.items())
        largest = max(largest, (size, f"{name}/{key}"))
    size, key = largest
    print(
        f"{measured} user data measured; largest {key}: {size} bytes worst case, {LIMIT_BYTES - size} under the limit"
    )
    assert measured > 0


def test_an_inflated_user_data_is_reported(assemblies: dict[str, Assembly]) -> None:
    name, assembly = sorted(assemblies.items())[0]
    stacks = stacks_of(assembly)
    sizes = user_data_sizes(stacks)
    key, size = max(sizes.items(), key=lambda item: item[1])
    stack_name, logical_id = key.split("/")
    resource = stacks[stack_name].template["Resources"][logical_id]["Properties"]
    data = resource.get("LaunchTemplateData", resource)
    padding = "# " + "x" * (LIMIT_BYTES - size) + "\n"  # one line pushes it just over the limit
    data["UserData"] = {"Fn::Base64": {"Fn::Join": ["", [padding, data["UserData"]]]}}
    inflated = user_data_sizes(stacks)
    assert inflated[key] > LIMIT_BYTES
    assert too_large(inflated) == [f"{key}: {inflated[key]} bytes"], name


def test_tokens_count_at_their_worst_case_not_their_placeholder_text() -> None:
    stack = Stack("s", "us-east-1", {"Resources": {"Q": {"Type": "AWS::SQS::Queue"}, "W": {"Type": "Other"}}})
    joined = {"Fn::Join": ["", ["a=", {"Ref": "Q"}, ";b=", {"Ref": "W"}, ";c=", {"Ref": "AWS::Region"}]]}
    expected = len("a=;b=;c=") + WORST_CASE["AWS::SQS::Queue"] + UNKNOWN + PSEUDO["AWS::Region"]
    assert worst_length(json.loads(json.dumps({"Fn::Base64": joined})), stack, {"s": stack}) == expected
