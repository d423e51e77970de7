"""Contract: every mount a node performs fits the file system's policy and the mounting role's statements, and nothing
retained by a stack delete keeps the cluster's subnets or security groups in use.

Both sides come from the synthesized assemblies (intrinsics resolved by cfn_resolve.py): the mounts are what the
nodes' own user data makes of the mounts parameter it names (its mount loop is executed on the parameter's value,
with /etc/fstab redirected and `mount` stubbed: the fstab lines are what the node would mount); the mounting roles
are the roles of the instance profiles in the launch templates, with their inline policies; a role needs
`ClientMount` and `ClientWrite`, and `ClientRootAccess` when its boot runs elastic-slurm-config-apply (root creates
and chowns Slurm's directories on the share). EFS authorizes a mount with IAM only with efs-utils' `iam` option;
without it the client is anonymous (https://docs.aws.amazon.com/efs/latest/ug/iam-access-control-nfs-efs.html):
both cases go through the real IAM evaluator (tests/aws/iam_eval.py) with the file system policy as the resource
policy (no policy: EFS's default, which allows every client).
"""

from __future__ import annotations

import copy
import json
import re
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from localcloud.aws.iam_requests import AuthzRequest
from slurm_plugin.controller_state import CONTROLLER_STATE_MOUNT
from stacks.user_data import MOUNT_RETRY_SECONDS, MOUNT_TRIES, boot_commands
from tests.aws.iam_eval import ANONYMOUS, evaluate
from tests.cdk.conftest import Assembly
from tests.contracts.cfn_resolve import ResolveError, Resolver, Stack

MOUNT = "elasticfilesystem:ClientMount"
WRITE = "elasticfilesystem:ClientWrite"
ROOT = "elasticfilesystem:ClientRootAccess"
# EFS's policy when none is set: every client, anonymous or not, may do everything through a mount target
DEFAULT_EFS_POLICY = {
    "Version": "2012-10-17",
    "Statement": [{"Effect": "Allow", "Principal": {"AWS": "*"}, "Action": [MOUNT, WRITE, ROOT]}],
}
ROOT_ON_SHARE = "elastic-slurm-config-apply"  # the boot step that creates and chowns directories on the share as root
_MOUNT_LOOP_START = re.compile(r"^jq .*/etc/elastic-slurm/mounts\.json \|$")


@dataclass(frozen=True)
class FstabLine:
    """One line the nodes' mount loop writes to /etc/fstab."""

    device: str
    mount_point: str
    fs_type: str
    options: tuple[str, ...]

    def option(self, name: str) -> str | None:
        """The value of `name=value`, or None."""
        return next((o.split("=", 1)[1] for o in self.options if o.startswith(f"{name}=")), None)


@dataclass
class MountingRole:
    """A role nodes run as, what its launch templates' user data mounts and whether root writes the share."""

    stack: str
    name: str
    arn: str
    policies: dict[str, Any]
    mounts_parameters: set[str] = field(default_factory=set)
    user_data: list[str] = field(default_factory=list)

    @property
    def needs_root(self) -> bool:
        return any(ROOT_ON_SHARE in text for text in self.user_data)

    @property
    def actions(self) -> list[str]:
        """Every node writes the share as root: the controller's boot (`needs_root`), and sites' prologs, health checks
        and custom actions on compute and login nodes (stacks/node_policies.file_system_statements)."""
        return [MOUNT, WRITE, ROOT]


@dataclass(frozen=True)
class EfsFileSystem:
    stack: str
    region: str
    arn: str
    policy: dict[str, Any]
    denies_anonymous: bool


def assembly_resolver(assembly: Assembly) -> Resolver:
    assert assembly.returncode == 0, assembly.output[-3000:]
    return Resolver.from_assembly(assembly.outdir)


def mount_loop(user_data: str) -> str:
    """The user data's lines that turn mounts.json into /etc/fstab lines and mounts (from the `jq … |` to `done`)."""
    lines = user_data.splitlines()
    start = next((i for i, line in enumerate(lines) if _MOUNT_LOOP_START.match(line)), None)
    assert start is not None, "the user data has no mount loop reading /etc/elastic-slurm/mounts.json"
    end = next(i for i in range(start, len(lines)) if lines[i] == "done")  # the loop's own (inner ones are indented)
    return "\n".join(lines[start : end + 1])


def fstab_lines(loop: str, mounts_json: str, workdir: Path) -> list[FstabLine]:
    """Run the nodes' own mount loop on a mounts parameter value: the fstab lines it writes (mounting stubbed)."""
    (workdir / "mounts.json").write_text(mounts_json, encoding="utf-8")
    fstab = workdir / "fstab"
    fstab.write_text("", encoding="utf-8")
    script = loop.replace("/etc/elastic-slurm/mounts.json", str(workdir / "mounts.json")).replace(
        "/etc/fstab", str(fstab)
    )
    stubs = "set -euo pipefail\nmkdir() { :; }\nmountpoint() { return 1; }\nmount() { :; }\n"
    subprocess.run(["bash", "-c", stubs + script], check=True, capture_output=True, text=True, timeout=60)
    result = []
    for line in fstab.read_text(encoding="utf-8").splitlines():
        device, mount_point, fs_type, options, *_ = line.split()
        result.append(FstabLine(device, mount_point, fs_type, tuple(options.split(","))))
    return result


def test_a_mount_that_fails_at_first_is_tried_again_and_one_that_keeps_failing_fails_the_boot(tmp_path: Path) -> None:
    """EFS resolves a new mount target's name up to 90 s after creating it: the nodes' own mount loop tries each
    mount MOUNT_TRIES times, MOUNT_RETRY_SECONDS apart (sleep stubbed), then fails the boot (set -e, pipefail)."""
    loop = mount_loop("\n".join(boot_commands("compute", {"ES_CLUSTER": "c"})))
    (tmp_path / "mounts.json").write_text(
        '[{"source": "fs-1", "mount_point": "/shared", "type": "efs", "options": "tls"}]'
    )
    script = loop.replace("/etc/elastic-slurm/mounts.json", str(tmp_path / "mounts.json")).replace(
        "/etc/fstab", str(tmp_path / "fstab")
    )
    (tmp_path / "fstab").write_text("")

    def run(failures: int) -> tuple[int, int, str]:
        tries = tmp_path / "tries"
        tries.write_text("")
        stubs = (f"set -euo pipefail\nmkdir() {{ :; }}\nmountpoint() {{ return 1; }}\nsleep() {{ :; }}\n"
                 f"mount() {{ echo x >> {tries}; [ $(wc -l < {tries}) -gt {failures} ]; }}\n")  # fmt: skip
        done = subprocess.run(["bash", "-c", stubs + script], capture_output=True, text=True, timeout=60)
        return done.returncode, len(tries.read_text().splitlines()), done.stderr

    assert run(failures=3) == (0, 4, "")  # mounted at the fourth try
    code, tried, stderr = run(failures=MOUNT_TRIES)
    assert code != 0 and tried == MOUNT_TRIES and "cannot mount /shared" in stderr
    assert MOUNT_TRIES * MOUNT_RETRY_SECONDS >= 90 + MOUNT_RETRY_SECONDS  # EFS's documented delay, with a try after


def mounting_roles(resolver: Resolver) -> list[MountingRole]:
    """Every role a launch template's instance profile gives its nodes, with what their user data mounts."""
    roles: dict[str, MountingRole] = {}
    for stack in resolver.stacks:
        profiles = {
            resolver.get_att(stack, lid, "Arn"): resolver.resolve(stack, p["Properties"]["Roles"])
            for lid, p in resolver.resources(stack, "AWS::IAM::InstanceProfile").items()
        }
        role_ids = {resolver.ref(stack, lid): lid for lid in resolver.resources(stack, "AWS::IAM::Role")}
        for template in resolver.resources(stack, "AWS::EC2::LaunchTemplate").values():
            data = resolver.resolve(stack, template["Properties"]["LaunchTemplateData"])
            profile = data.get("IamInstanceProfile", {}).get("Arn")
            if profile is None:
                continue
            user_data = str(data.get("UserData", ""))
            parameter = re.search(r"ES_MOUNTS_PARAMETER='?(/[^'\s]+)", user_data)  # in /etc/elastic-slurm/env
            for role_name in profiles[profile]:
                role = roles.get(f"{stack}/{role_name}")
                if role is None:
                    role = MountingRole(
                        stack,
                        role_name,
                        resolver.get_att(stack, role_ids[role_name], "Arn"),
                        role_policies(resolver, stack, role_ids[role_name], role_name),
                    )
                    roles[f"{stack}/{role_name}"] = role
                role.user_data.append(user_data)
                if parameter:
                    role.mounts_parameters.add(parameter.group(1))
    return list(roles.values())


def role_policies(resolver: Resolver, stack: str, role_id: str, role_name: str) -> dict[str, Any]:
    """The role's inline policies and the AWS::IAM::Policy resources attached to it (AWS managed policies grant no
    EFS client action and are left out)."""
    role = resolver.resolve(stack, resolver.resources(stack, "AWS::IAM::Role")[role_id]["Properties"])
    result = {f"inline-{p['PolicyName']}": p["PolicyDocument"] for p in role.get("Policies", [])}
    for kind in ("AWS::IAM::Policy", "AWS::IAM::ManagedPolicy"):  # CDK's overflow policies are managed ones
        for lid, policy in resolver.resources(stack, kind).items():
            props = resolver.resolve(stack, policy["Properties"])
            if role_name in props.get("Roles", []):
                result[lid] = props["PolicyDocument"]
    return result


def mounts_parameters(resolver: Resolver) -> dict[str, str]:
    """SSM parameter name → value, for every parameter of every stack (the mounts lists among them)."""
    result = {}
    for stack in resolver.stacks:
        for parameter in resolver.resources(stack, "AWS::SSM::Parameter").values():
            props = resolver.resolve(stack, parameter["Properties"])
            result[props["Name"]] = props["Value"]
    return result


def efs_file_systems(resolver: Resolver) -> dict[str, EfsFileSystem]:
    """File system id → its ARN, region and policy (EFS's default when the template sets none)."""
    result = {}
    for stack, env in resolver.stacks.items():
        for lid, resource in resolver.resources(stack, "AWS::EFS::FileSystem").items():
            policy = resolver.resolve(stack, resource["Properties"].get("FileSystemPolicy")) or DEFAULT_EFS_POLICY
            arn = resolver.get_att(stack, lid, "Arn")
            probe = AuthzRequest(MOUNT, arn, {"elasticfilesystem:AccessedViaMountTarget": "true"}, "anonymous probe")
            (anonymous,) = evaluate({}, [probe], env.account, resource_policy=policy, principal=ANONYMOUS)
            result[resolver.ref(stack, lid)] = EfsFileSystem(stack, env.region, arn, policy, anonymous != "Allowed")
    return result


def efs_mounts(resolver: Resolver, workdir: Path) -> Iterator[tuple[MountingRole, FstabLine, EfsFileSystem]]:
    """Every (role, EFS fstab line, file system) the nodes of the assembly mount."""
    parameters = mounts_parameters(resolver)
    file_systems = efs_file_systems(resolver)
    for role in mounting_roles(resolver):
        assert role.mounts_parameters, f"{role.name}: its user data names no mounts parameter"
        loop = mount_loop(role.user_data[0])
        for name in sorted(role.mounts_parameters):
            assert name in parameters, f"{role.name} mounts from {name}, which no stack creates"
            for line in fstab_lines(loop, parameters[name], workdir):
                if line.fs_type == "efs":
                    file_system_id = line.device.removesuffix(":/")
                    assert file_system_id in file_systems, f"{role.name} mounts {line.device}: no such file system"
                    yield role, line, file_systems[file_system_id]


def mount_problems(resolver: Resolver, workdir: Path) -> tuple[list[str], int]:
    """What AWS would refuse of the assembly's EFS mounts (one line each), and how many mounts were checked."""
    problems: list[str] = []
    checked = 0
    for role, line, fs in efs_mounts(resolver, workdir):
        checked += 1
        where = f"{role.name} mounting {line.device} at {line.mount_point} ({','.join(line.options)})"
        if fs.denies_anonymous and "iam" not in line.options:
            problems.append(f"{where}: the file system policy refuses anonymous clients but the options lack `iam`")
        region = line.option("region")
        if region is not None and region != fs.region:
            problems.append(
                f"{where}: region={region}, but the file system (and its IAM authorization) is in {fs.region}"
            )
        context = {
            "elasticfilesystem:AccessedViaMountTarget": "true",
            "aws:SecureTransport": "true" if "tls" in line.options else "false",
        }
        requests = [AuthzRequest(action, fs.arn, context, where) for action in role.actions]
        iam_client = "iam" in line.options
        account = resolver.stacks[fs.stack].account
        results = evaluate(
            role.policies if iam_client else {},
            requests,
            account,
            resource_policy=fs.policy,
            principal=role.arn if iam_client else ANONYMOUS,
        )
        problems += [
            f"{where}: {r.action} {result}" for r, result in zip(requests, results, strict=True) if result != "Allowed"
        ]
    return problems, checked


def retained_in_network(resolver: Resolver) -> list[str]:
    """Resources kept by a stack delete (DeletionPolicy Retain) whose properties name a subnet or security group of
    the cluster: a retained file system's network interfaces would stay there, and the network stack's delete fail."""
    problems = []
    for stack in resolver.stacks:
        for lid, resource in resolver.resources(stack).items():
            if resource.get("DeletionPolicy") != "Retain":
                continue
            text = json.dumps(resolver.resolve(stack, resource.get("Properties", {})))
            used = sorted(set(re.findall(r"\b(?:subnet|sg)-[0-9a-f]{8,17}\b", text)))
            if used:
                problems.append(f"{stack}/{lid} ({resource['Type']}) is retained but uses {', '.join(used)}")
    return problems


# -- the contracts over every synthesized config ------------------------------------------------------------------


def test_every_efs_mount_is_allowed_by_the_file_system_policy_and_the_mounting_role(
    assemblies: dict[str, Assembly], tmp_path: Path
) -> None:
    checked = {}
    for name, assembly in assemblies.items():
        problems, checked[name] = mount_problems(assembly_resolver(assembly), tmp_path)
        assert problems == [], f"{name}:\n" + "\n".join(problems)
    with_efs = {n for n, a in assemblies.items() if "efs:" in a.config.read_text(encoding="utf-8")}
    assert with_efs and all(checked[n] >= 2 for n in with_efs), checked  # controller and compute at least


def test_efs_mounts_carry_iam_and_tls_where_the_policy_refuses_anonymous_clients(
    assemblies: dict[str, Assembly], tmp_path: Path
) -> None:
    seen = 0
    for name, assembly in assemblies.items():
        for role, line, fs in efs_mounts(assembly_resolver(assembly), tmp_path):
            seen += 1
            assert fs.denies_anonymous, f"{name}: {fs.arn} allows anonymous clients"
            assert {"tls", "iam"} <= set(line.options), f"{name}: {role.name} mounts {line.device} with {line.options}"
    assert seen > 0


def test_remote_region_nodes_mount_the_home_efs_by_address_authorized_in_its_region(
    assemblies: dict[str, Assembly], tmp_path: Path
) -> None:
    resolver = assembly_resolver(assemblies["remote-region"])
    remote = [(role, line, fs) for role, line, fs in efs_mounts(resolver, tmp_path) if line.option("mounttargetip")]
    assert remote, "no remote-region EFS mount found"
    for role, line, fs in remote:
        assert resolver.stacks[role.stack].region != fs.region  # a node of the remote region
        assert line.option("region") == fs.region and "iam" in line.options
        assert not role.needs_root and ROOT in role.actions  # no config apply there, root access all the same


def test_nothing_retained_keeps_the_cluster_subnets_or_security_groups_in_use(
    assemblies: dict[str, Assembly],
) -> None:
    retained = 0
    for name, assembly in assemblies.items():
        resolver = assembly_resolver(assembly)
        assert retained_in_network(resolver) == [], name
        retained += sum(
            r.get("DeletionPolicy") == "Retain" for s in resolver.stacks for r in resolver.resources(s).values()
        )
    assert retained > 0  # the EFS file systems (home directories) and backup vaults are retained


# -- negative cases: broken variants of real templates the contracts must catch ------------------------------------


def _variant(resolver: Resolver, stack: str, edit: Any) -> Resolver:
    stacks = dict(resolver.stacks)
    template = copy.deepcopy(dict(stacks[stack].template))
    edit(template)
    stacks[stack] = Stack(stack, stacks[stack].account, stacks[stack].region, template)
    return Resolver(stacks, resolver.partition)


def _storage_stack(resolver: Resolver) -> str:
    (stack,) = [s for s in resolver.stacks if resolver.resources(s, "AWS::EFS::FileSystem")]
    return stack


@pytest.mark.parametrize("config", ["minimal", "remote-region"])
def test_a_mount_without_iam_is_reported(assemblies: dict[str, Assembly], tmp_path: Path, config: str) -> None:
    resolver = assembly_resolver(assemblies[config])
    assert mount_problems(resolver, tmp_path)[0] == []

    def drop_iam(template: dict[str, Any]) -> None:
        for resource in template["Resources"].values():
            if resource["Type"] == "AWS::SSM::Parameter":
                text = json.dumps(resource["Properties"]["Value"]).replace("tls,iam", "tls")
                resource["Properties"]["Value"] = json.loads(text)

    problems, _ = mount_problems(_variant(resolver, _storage_stack(resolver), drop_iam), tmp_path)
    assert any("lack `iam`" in p for p in problems)
    assert any(f"{MOUNT} ImplicitlyDenied" in p for p in problems)


@pytest.mark.parametrize(("config", "role_prefix"), [("remote-region", "ComputeRole"), ("minimal", "ComputeRole")])
def test_a_mounting_role_without_its_efs_statement_is_reported(
    assemblies: dict[str, Assembly], tmp_path: Path, config: str, role_prefix: str
) -> None:
    resolver = assembly_resolver(assemblies[config])
    stack = next(s for s in resolver.stacks if "region-" in s) if config == "remote-region" else None
    stack = stack or next(s for s in resolver.stacks if s.endswith("-cluster"))

    def drop_statement(template: dict[str, Any]) -> None:
        for lid, resource in template["Resources"].items():
            if resource["Type"] == "AWS::IAM::Policy" and lid.startswith(role_prefix):
                document = resource["Properties"]["PolicyDocument"]
                document["Statement"] = [s for s in document["Statement"] if s.get("Sid") != "MountSharedFileSystems"]

    problems, _ = mount_problems(_variant(resolver, stack, drop_statement), tmp_path)
    assert problems and all(role_prefix in p for p in problems)
    assert any(f"{MOUNT} ImplicitlyDenied" in p for p in problems)


def test_a_controller_without_root_access_on_the_share_is_reported(
    assemblies: dict[str, Assembly], tmp_path: Path
) -> None:
    resolver = assembly_resolver(assemblies["minimal"])
    stack = next(s for s in resolver.stacks if s.endswith("-cluster"))

    def drop_root(template: dict[str, Any]) -> None:
        for lid, resource in template["Resources"].items():
            if resource["Type"] == "AWS::IAM::Policy" and lid.startswith("ControllerRole"):
                document = resource["Properties"]["PolicyDocument"]
                document["Statement"] = [s for s in document["Statement"] if s.get("Sid") != "RootOnSharedFileSystems"]

    problems, _ = mount_problems(_variant(resolver, stack, drop_root), tmp_path)
    assert problems and all("ControllerRole" in p and ROOT in p for p in problems)


def test_cdk_default_efs_policy_with_tls_only_mounts_is_reported(
    assemblies: dict[str, Assembly], tmp_path: Path
) -> None:
    # the shape every example had before: CDK's denyAnonymousAccess policy, mounts with `tls` only
    resolver = assembly_resolver(assemblies["minimal"])
    cdk_policy = {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Effect": "Allow",
                "Principal": {"AWS": "*"},
                "Action": [ROOT, WRITE],
                "Condition": {"Bool": {"elasticfilesystem:AccessedViaMountTarget": "true"}},
            }
        ],
    }

    def as_before(template: dict[str, Any]) -> None:
        for resource in template["Resources"].values():
            if resource["Type"] == "AWS::EFS::FileSystem":
                resource["Properties"]["FileSystemPolicy"] = cdk_policy
            if resource["Type"] == "AWS::SSM::Parameter":
                text = json.dumps(resource["Properties"]["Value"]).replace("tls,iam", "tls")
                resource["Properties"]["Value"] = json.loads(text)

    problems, checked = mount_problems(_variant(resolver, _storage_stack(resolver), as_before), tmp_path)
    assert checked >= 2 and len([p for p in problems if f"{MOUNT} ImplicitlyDenied" in p]) == checked


def test_a_retained_file_system_in_the_cluster_subnets_is_reported(assemblies: dict[str, Assembly]) -> None:
    resolver = assembly_resolver(assemblies["imported-network-all-storage"])
    stack = _storage_stack(resolver)
    lustre = [
        lid
        for lid, r in resolver.resources(stack, "AWS::FSx::FileSystem").items()
        if r["Properties"]["FileSystemType"] == "LUSTRE"
    ]
    assert len(lustre) == 1 and retained_in_network(resolver) == []

    def retain_lustre(template: dict[str, Any]) -> None:
        template["Resources"][lustre[0]]["DeletionPolicy"] = "Retain"

    problems = retained_in_network(_variant(resolver, stack, retain_lustre))
    assert len(problems) == 1 and lustre[0] in problems[0] and "subnet-" in problems[0] and "sg-" in problems[0]


# -- the resolver the contracts read templates with (tests/contracts/cfn_resolve.py) ------------------------------


def test_the_resolver_follows_intrinsics_and_cross_stack_references_to_one_stand_in() -> None:
    producer = {
        "Resources": {
            "Fs": {"Type": "AWS::EFS::FileSystem", "Properties": {}},
            "Writer": {
                "Type": "Custom::CrossRegionExportWriter",
                "Properties": {"WriterProps": {"exports": {"/cdk/exports/c/FsArn": {"Fn::GetAtt": ["Fs", "Arn"]}}}},
            },
        },
        "Outputs": {"Id": {"Value": {"Ref": "Fs"}, "Export": {"Name": {"Fn::Sub": "${AWS::StackName}:Id"}}}},
    }
    consumer = {
        "Resources": {
            "Reader": {"Type": "Custom::CrossRegionExportReader", "Properties": {}},
            "P": {
                "Type": "AWS::SSM::Parameter",
                "Properties": {
                    "Name": {"Fn::Join": ["/", ["", {"Fn::Select": [1, {"Fn::Split": [":", "a:b:c"]}]}]]},
                    "Value": {"Fn::Sub": ["${Id}@${AWS::Region}", {"Id": {"Fn::ImportValue": "p:Id"}}]},
                    "Arn": {"Fn::GetAtt": ["Reader", "/cdk/exports/c/FsArn"]},
                    "Dynamic": "{{resolve:ssm:/cdk/exports/c/FsArn}}",
                },
            },
        }
    }
    resolver = Resolver(
        {
            "p": Stack("p", "111122223333", "us-east-1", producer),
            "c": Stack("c", "111122223333", "us-west-2", consumer),
        }
    )
    props = resolver.resolve("c", consumer["Resources"]["P"]["Properties"])
    file_system_id = resolver.ref("p", "Fs")
    assert re.fullmatch(r"fs-[0-9a-f]{17}", file_system_id)
    assert props["Name"] == "/b" and props["Value"] == f"{file_system_id}@us-west-2"
    arn = f"arn:aws:elasticfilesystem:us-east-1:111122223333:file-system/{file_system_id}"
    assert props["Arn"] == props["Dynamic"] == arn
    with pytest.raises(ResolveError):
        resolver.resolve("c", {"Fn::ImportValue": "p:Missing"})


# -- the controllers' own file system (slurm_plugin/controller_state.py) ------------------------------------------


def controller_state_access(resolver: Resolver, workdir: Path) -> tuple[set[str], set[str]]:
    """(the roles whose nodes mount the controllers' own file system, the roles IAM lets mount it): both come from
    the assembly — the mounts parameters the user data names, and each role's statements with the file system
    policy through the evaluator."""
    mounts = [
        (role, fs) for role, line, fs in efs_mounts(resolver, workdir) if line.mount_point == CONTROLLER_STATE_MOUNT
    ]
    own = {fs.arn: fs for _, fs in mounts}
    assert len(own) == 1, f"the controllers' own file system is mounted from {sorted(own)}"
    (fs,) = own.values()
    context = {"elasticfilesystem:AccessedViaMountTarget": "true", "aws:SecureTransport": "true"}
    allowed = set()
    for role in mounting_roles(resolver):
        request = AuthzRequest(MOUNT, fs.arn, context, role.name)
        account = resolver.stacks[fs.stack].account
        (result,) = evaluate(role.policies, [request], account, resource_policy=fs.policy, principal=role.arn)
        if result == "Allowed":
            allowed.add(role.name)
    return {role.name for role, _ in mounts}, allowed


def test_only_the_controllers_mount_their_own_file_system_and_only_their_role_may(
    assemblies: dict[str, Assembly], tmp_path: Path
) -> None:
    for name in ("minimal", "remote-region"):
        resolver = assembly_resolver(assemblies[name])
        mounting, allowed = controller_state_access(resolver, tmp_path)
        assert len(mounting) == 1 and "ControllerRole" in next(iter(mounting)), (name, mounting)
        assert allowed == mounting, (name, allowed)
        others = [r.name for r in mounting_roles(resolver) if r.name not in mounting]
        assert others, name  # compute (and remote compute) roles were looked at, and may not mount it


def test_a_compute_role_allowed_on_the_controllers_file_system_is_reported(
    assemblies: dict[str, Assembly], tmp_path: Path
) -> None:
    """Negative case: the compute role's mount statement naming every file system of the account (`*`)."""
    resolver = assembly_resolver(assemblies["minimal"])
    (stack,) = [s for s in resolver.stacks if s.endswith("-cluster")]

    def widen(template: dict[str, Any]) -> None:
        for lid, resource in template["Resources"].items():
            if resource["Type"] == "AWS::IAM::Policy" and lid.startswith("ComputeRole"):
                for statement in resource["Properties"]["PolicyDocument"]["Statement"]:
                    if MOUNT in statement["Action"]:
                        statement["Resource"] = "*"

    mounting, allowed = controller_state_access(_variant(resolver, stack, widen), tmp_path)
    assert any("ComputeRole" in role for role in allowed - mounting), allowed
