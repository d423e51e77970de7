"""Resolve the CloudFormation intrinsics of our synthesized templates to plain values with deterministic stand-ins, so
contract tests can compare both sides of an agreement as data (ARNs, ids, JSON strings) instead of as CDK tokens.

What CloudFormation would fill in at deploy time becomes a stand-in that is the same wherever it is referenced:
`Ref` of a resource → a physical id in the format its type uses (`fs-…`, `subnet-…`, a role name, a topic ARN, …),
derived from the stack and logical id; `Fn::GetAtt …Arn` → an ARN built from the type and that id; other attributes
(`IpAddress`, `DNSName`, `GroupId`, …) → stand-ins of their shape. Pseudo parameters come from the stack's
environment in manifest.json. `Fn::Join`, `Fn::Sub`, `Fn::Select`, `Fn::Split`, `Fn::GetAZs`, `Fn::If` (with the
template's Conditions), `Fn::Base64` (its input, so scripts stay readable) are evaluated; cross-stack references are
followed to the exporting stack: `Fn::ImportValue` to the output with that export name, and CDK's cross-region
references (`{{resolve:ssm:/cdk/exports/…}}` or a `Custom::CrossRegionExportReader` attribute of that name in the
consumer, the `Custom::CrossRegionExportWriter` in the producer) to the value the producer writes. Template parameters resolve to their defaults.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

NO_VALUE = object()  # AWS::NoValue: the property or list item is left out
_DYNAMIC = re.compile(r"\{\{resolve:ssm:(/cdk/exports/[^}]+)\}\}")
_SUB_VAR = re.compile(r"\$\{([^}]+)\}")
_ARN_SERVICE = {
    # CloudFormation type → (service, resource part with {id}); regional unless the service is global
    "AWS::IAM::Role": ("iam", "role/{id}"),
    "AWS::IAM::InstanceProfile": ("iam", "instance-profile/{id}"),
    "AWS::IAM::ManagedPolicy": ("iam", "policy/{id}"),
    "AWS::EFS::FileSystem": ("elasticfilesystem", "file-system/{id}"),
    "AWS::EFS::AccessPoint": ("elasticfilesystem", "access-point/{id}"),
    "AWS::FSx::FileSystem": ("fsx", "file-system/{id}"),
    "AWS::SSM::Parameter": ("ssm", "parameter/{id}"),
    "AWS::SQS::Queue": ("sqs", "{id}"),
    "AWS::Lambda::Function": ("lambda", "function:{id}"),
    "AWS::KMS::Key": ("kms", "key/{id}"),
    "AWS::Logs::LogGroup": ("logs", "log-group:{id}:*"),
    "AWS::Events::Rule": ("events", "rule/{id}"),
    "AWS::EC2::LaunchTemplate": ("ec2", "launch-template/{id}"),
    "AWS::EC2::Subnet": ("ec2", "subnet/{id}"),
    "AWS::EC2::SecurityGroup": ("ec2", "security-group/{id}"),
    "AWS::EC2::VPC": ("ec2", "vpc/{id}"),
    "AWS::Backup::BackupVault": ("backup", "backup-vault:{id}"),
    "AWS::Backup::BackupPlan": ("backup", "backup-plan:{id}"),
    "AWS::StepFunctions::StateMachine": ("states", "stateMachine:{id}"),
}
_GLOBAL = {"iam", "s3"}
_ID_PREFIX = {
    # CloudFormation type → prefix of the physical id `Ref` returns (17 hex digits follow)
    "AWS::EC2::Subnet": "subnet-",
    "AWS::EC2::SecurityGroup": "sg-",
    "AWS::EC2::VPC": "vpc-",
    "AWS::EC2::LaunchTemplate": "lt-",
    "AWS::EC2::VPCPeeringConnection": "pcx-",
    "AWS::EC2::RouteTable": "rtb-",
    "AWS::EC2::InternetGateway": "igw-",
    "AWS::EC2::NatGateway": "nat-",
    "AWS::EC2::Instance": "i-",
    "AWS::EC2::PlacementGroup": "pg-",
    "AWS::EFS::FileSystem": "fs-",
    "AWS::EFS::MountTarget": "fsmt-",
    "AWS::EFS::AccessPoint": "fsap-",
    "AWS::FSx::FileSystem": "fs-",
    "AWS::FSx::StorageVirtualMachine": "svm-",
    "AWS::FSx::Volume": "fsvol-",
}
_NAME_PROPERTY = {
    # CloudFormation type → the property that, when literal, is what `Ref` returns
    "AWS::IAM::Role": "RoleName",
    "AWS::IAM::InstanceProfile": "InstanceProfileName",
    "AWS::SSM::Parameter": "Name",
    "AWS::S3::Bucket": "BucketName",
    "AWS::SQS::Queue": "QueueName",
    "AWS::Lambda::Function": "FunctionName",
    "AWS::Logs::LogGroup": "LogGroupName",
    "AWS::SNS::Topic": "TopicName",
    "AWS::SecretsManager::Secret": "Name",
    "AWS::Events::Rule": "Name",
}


class ResolveError(ValueError):
    """A template uses something the resolver does not know (an unknown logical id, export or function)."""


def _digest(*parts: str, length: int = 17) -> str:
    return hashlib.sha256("/".join(parts).encode()).hexdigest()[:length]


@dataclass(frozen=True)
class Stack:
    """One stack of an assembly: its template and environment."""

    name: str
    account: str
    region: str
    template: Mapping[str, Any]


class Resolver:
    """Plain values for the intrinsics of every stack of one cloud assembly (stand-ins are stable per logical id)."""

    def __init__(self, stacks: Mapping[str, Stack], partition: str = "aws") -> None:
        self.stacks = dict(stacks)
        self.partition = partition
        self._exports: dict[str, tuple[str, Any]] = {}  # export name → (stack, output value)
        self._cross_region: dict[str, tuple[str, Any]] = {}  # /cdk/exports/... → (producing stack, value)
        for stack in self.stacks.values():
            for output in stack.template.get("Outputs", {}).values():
                name = output.get("Export", {}).get("Name")
                if name is not None:
                    self._exports[str(self.resolve(stack.name, name))] = (stack.name, output["Value"])
            for resource in stack.template.get("Resources", {}).values():
                if resource.get("Type") == "Custom::CrossRegionExportWriter":
                    exports = resource["Properties"]["WriterProps"]["exports"]
                    self._cross_region.update({k: (stack.name, v) for k, v in exports.items()})

    @classmethod
    def from_assembly(cls, outdir: Path) -> Resolver:
        """Every CloudFormation stack of the cloud assembly in `outdir` (manifest.json names their environments)."""
        manifest = json.loads((outdir / "manifest.json").read_text(encoding="utf-8"))
        stacks = {}
        for artifact_id, artifact in manifest["artifacts"].items():
            if artifact.get("type") != "aws:cloudformation:stack":
                continue
            account, region = artifact["environment"].removeprefix("aws://").split("/")
            template_file = artifact["properties"]["templateFile"]
            template = json.loads((outdir / template_file).read_text(encoding="utf-8"))
            stacks[artifact_id] = Stack(artifact_id, account, region, template)
        return cls(stacks)

    # -- public ----------------------------------------------------------------------------------------------------

    def resources(self, stack: str, type_: str | None = None) -> dict[str, Mapping[str, Any]]:
        """Logical id → resource of `stack` (of one type, if given), unresolved."""
        found = self.stacks[stack].template.get("Resources", {})
        return {k: v for k, v in found.items() if type_ is None or v.get("Type") == type_}

    def resolve(self, stack: str, value: Any) -> Any:
        """`value` (a template fragment of `stack`) with every intrinsic replaced by its plain value."""
        result = self._resolve(stack, value)
        return None if result is NO_VALUE else result

    def ref(self, stack: str, logical_id: str) -> str:
        """What `Ref` of a resource returns (its stand-in physical id)."""
        resource = self._resource(stack, logical_id)
        type_ = resource["Type"]
        props = resource.get("Properties", {})
        name_key = _NAME_PROPERTY.get(type_)
        if name_key and isinstance(props.get(name_key), (str, dict)):
            name = self._resolve(stack, props[name_key])
            if isinstance(name, str):
                if type_ in ("AWS::SNS::Topic", "AWS::SecretsManager::Secret"):
                    return self._arn_of(stack, logical_id, type_, name)
                return name
        if type_ in _ID_PREFIX:
            return _ID_PREFIX[type_] + _digest(stack, logical_id)
        if type_ == "AWS::KMS::Key":
            h = _digest(stack, logical_id, length=32)
            return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"
        generated = f"{stack}-{logical_id}-{_digest(stack, logical_id, length=8)}"
        if type_ in ("AWS::SNS::Topic", "AWS::SecretsManager::Secret", "AWS::IAM::ManagedPolicy"):
            return self._arn_of(stack, logical_id, type_, generated)
        if type_ == "AWS::SQS::Queue":
            env = self.stacks[stack]
            return f"https://sqs.{env.region}.amazonaws.com/{env.account}/{generated}"
        return generated

    def get_att(self, stack: str, logical_id: str, attribute: str) -> Any:
        """What `Fn::GetAtt` returns: `Arn` built from the type, other attributes as stand-ins of their shape."""
        resource = self._resource(stack, logical_id)
        type_ = resource["Type"]
        if attribute.startswith("/cdk/exports/"):  # CDK's Custom::CrossRegionExportReader: the producer's value
            return self._dynamic("{{resolve:ssm:" + attribute + "}}")
        if attribute == "Arn":
            ref = self.ref(stack, logical_id)
            if ref.startswith("arn:"):
                return ref
            if type_ == "AWS::SQS::Queue":
                ref = ref.rsplit("/", 1)[1]
            return self._arn_of(stack, logical_id, type_, ref)
        if attribute in ("GroupId", "Id", "FileSystemId", "RoleId", "LaunchTemplateId"):
            return self.ref(stack, logical_id)
        if attribute == "IpAddress":
            h = bytes.fromhex(_digest(stack, logical_id, length=6))
            return f"10.{h[0]}.{h[1]}.{max(h[2], 4)}"
        if attribute in ("DNSName", "DnsName"):
            env = self.stacks[stack]
            return f"{self.ref(stack, logical_id)}.fsx.{env.region}.amazonaws.com"
        if attribute == "LatestVersionNumber" or attribute == "DefaultVersionNumber":
            return "1"
        if attribute == "Value" and type_ == "AWS::SSM::Parameter":
            return self.resolve(stack, resource["Properties"]["Value"])
        return f"{self.ref(stack, logical_id)}.{attribute}"

    # -- internals -------------------------------------------------------------------------------------------------

    def _resource(self, stack: str, logical_id: str) -> Mapping[str, Any]:
        try:
            resource: Mapping[str, Any] = self.stacks[stack].template["Resources"][logical_id]
        except KeyError:
            raise ResolveError(f"{stack}: no resource {logical_id}") from None
        return resource

    def _arn_of(self, stack: str, logical_id: str, type_: str, physical_id: str) -> str:
        env = self.stacks[stack]
        if type_ == "AWS::S3::Bucket":
            return f"arn:{self.partition}:s3:::{physical_id}"
        if type_ == "AWS::SNS::Topic":
            return f"arn:{self.partition}:sns:{env.region}:{env.account}:{physical_id}"
        if type_ == "AWS::SecretsManager::Secret":
            suffix = _digest(stack, logical_id, length=6)
            return f"arn:{self.partition}:secretsmanager:{env.region}:{env.account}:secret:{physical_id}-{suffix}"
        service, pattern = _ARN_SERVICE.get(
            type_, (type_.split("::")[1].lower(), type_.split("::")[2].lower() + "/{id}")
        )
        if type_ == "AWS::SSM::Parameter":
            physical_id = physical_id.lstrip("/")
        region = "" if service in _GLOBAL else env.region
        return f"arn:{self.partition}:{service}:{region}:{env.account}:{pattern.format(id=physical_id)}"

    def _pseudo(self, stack: str, name: str) -> Any:
        env = self.stacks[stack]
        values = {
            "AWS::Partition": self.partition,
            "AWS::Region": env.region,
            "AWS::AccountId": env.account,
            "AWS::URLSuffix": "amazonaws.com",
            "AWS::StackName": stack,
            "AWS::StackId": f"arn:{self.partition}:cloudformation:{env.region}:{env.account}:stack/{stack}/"
            f"{_uuid(stack)}",
            "AWS::NotificationARNs": [],
            "AWS::NoValue": NO_VALUE,
        }
        if name not in values:
            raise ResolveError(f"{stack}: unknown pseudo parameter {name}")
        return values[name]

    def _reference(self, stack: str, name: str) -> Any:
        """`Ref` of a pseudo parameter, a template parameter (its default) or a resource."""
        if name.startswith("AWS::"):
            return self._pseudo(stack, name)
        parameters = self.stacks[stack].template.get("Parameters", {})
        if name in parameters:
            return parameters[name].get("Default", f"<parameter {name}>")
        return self.ref(stack, name)

    def _condition(self, stack: str, name: str) -> bool:
        return bool(self._resolve(stack, self.stacks[stack].template["Conditions"][name]))

    def _dynamic(self, text: str) -> str:
        def replace(match: re.Match[str]) -> str:
            key = match.group(1)
            if key not in self._cross_region:
                raise ResolveError(f"no CrossRegionExportWriter writes {key}")
            producer, value = self._cross_region[key]
            return str(self._resolve(producer, value))

        return _DYNAMIC.sub(replace, text)

    def _sub(self, stack: str, args: Any) -> str:
        text, variables = (args, {}) if isinstance(args, str) else (args[0], args[1])
        local = {k: self._resolve(stack, v) for k, v in variables.items()}

        def replace(match: re.Match[str]) -> str:
            name = match.group(1)
            if name.startswith("!"):
                return "${" + name[1:] + "}"
            if name in local:
                return str(local[name])
            if "." in name and not name.startswith("AWS::"):
                logical_id, attribute = name.split(".", 1)
                return str(self.get_att(stack, logical_id, attribute))
            return str(self._reference(stack, name))

        return _SUB_VAR.sub(replace, text)

    def _resolve(self, stack: str, value: Any) -> Any:
        if isinstance(value, str):
            return self._dynamic(value) if "{{resolve:ssm:/cdk/exports/" in value else value
        if isinstance(value, list):
            items = [self._resolve(stack, v) for v in value]
            return [v for v in items if v is not NO_VALUE]
        if not isinstance(value, dict):
            return value
        if len(value) == 1:
            ((key, args),) = value.items()
            if key == "Ref":
                return self._reference(stack, args)
            if key == "Fn::GetAtt":
                logical_id, attribute = args if isinstance(args, list) else args.split(".", 1)
                return self.get_att(stack, logical_id, self._resolve(stack, attribute))
            if key == "Fn::Join":
                separator, items = args
                return separator.join(str(v) for v in self._resolve(stack, items))
            if key == "Fn::Sub":
                return self._sub(stack, args)
            if key == "Fn::Select":
                index, items = self._resolve(stack, args)
                return items[int(index)]
            if key == "Fn::Split":
                separator, text = self._resolve(stack, args)
                return str(text).split(separator)
            if key == "Fn::GetAZs":
                region = self._resolve(stack, args) or self.stacks[stack].region
                return [f"{region}{z}" for z in "abc"]
            if key == "Fn::Base64":
                return self._resolve(stack, args)
            if key == "Fn::If":
                name, yes, no = args
                return self._resolve(stack, yes if self._condition(stack, name) else no)
            if key == "Fn::Equals":
                left, right = self._resolve(stack, args)
                return left == right
            if key == "Fn::Not":
                return not self._resolve(stack, args[0])
            if key == "Fn::And":
                return all(self._resolve(stack, args))
            if key == "Fn::Or":
                return any(self._resolve(stack, args))
            if key == "Condition":
                return self._condition(stack, args)
            if key == "Fn::ImportValue":
                name = str(self._resolve(stack, args))
                if name not in self._exports:
                    raise ResolveError(f"{stack}: no stack exports {name}")
                producer, output = self._exports[name]
                return self._resolve(producer, output)
            if key.startswith("Fn::"):
                raise ResolveError(f"{stack}: {key} is not supported")
        resolved = {k: self._resolve(stack, v) for k, v in value.items()}
        return {k: v for k, v in resolved.items() if v is not NO_VALUE}


def _uuid(stack: str) -> str:
    h = _digest("stack-id", stack, length=32)
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"
