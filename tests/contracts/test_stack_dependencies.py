"""Contract: every runtime reach across stacks has a stack dependency behind it.

What CloudFormation cannot see is a boot reading something another stack made: a name in a node's boot environment
(an SSM parameter, a secret, a log group), the AMI parameter Image Builder writes (a launch template's
`resolve:ssm:` image), a controller found by its Name tag (the slurmdbd host, assets/bootstrap/
elastic-slurm-controller-hosts), and the routes between two VPCs that this reach travels. Each such read is derived
from the synthesized templates (user data, launch templates, routes, exports) and the config; its writer is the
stack whose template creates that name in that region. The reading instance must boot after the writer is deployed:

- a launch template an instance or auto scaling group of its own stack uses boots while that stack deploys: the
  writer is that stack or one of its (transitive) dependencies in manifest.json;
- a pool's launch template is launched later by the cluster's controller (the power-save plugin), so the writer may
  also be the controller's stack or one of its dependencies.

Negative cases: manifests with the dependency that covers a reach removed (a federation member's cluster stack
without the peering stacks; a remote region without the images stack) are reported.
"""

from __future__ import annotations

import ipaddress
import json
import os
import re
import shlex
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import pytest

from cluster_config import load
from tests.cdk.conftest import Assembly

NAME_PREFIXES = ("/elastic-slurm/", "elastic-slurm/")  # stacks/naming.py: every name a boot reads by name
ENV_LINE = re.compile(r"^echo '([A-Z_][A-Z0-9_]*)=(.*)' >> /etc/elastic-slurm/env$", re.MULTILINE)
ENV_HEREDOC = re.compile(r"^cat >> /etc/elastic-slurm/env <<'(\w+)'\n(.*?)\n\1$", re.MULTILINE | re.DOTALL)
TOKEN = "\x00"  # a CloudFormation token inside user data: a value of the same stack or an import


@dataclass
class Stack:
    """One stack of an assembly: region, template, direct stack dependencies."""

    name: str
    region: str
    template: dict[str, Any]
    depends_on: set[str] = field(default_factory=set)

    def resources(self, kind: str) -> Iterator[tuple[str, dict[str, Any]]]:
        """(logical id, properties) of every resource of `kind`."""
        for logical_id, resource in self.template.get("Resources", {}).items():
            if resource["Type"] == kind:
                yield logical_id, resource.get("Properties", {})


@dataclass(frozen=True)
class Reach:
    """`reader` (a stack's launch template) needs `writer`'s stack deployed first, because of `what`."""

    reader: str
    template: str
    what: str
    writer: str | None  # None: no stack of the assembly makes it


def stacks_of(assembly: Assembly) -> dict[str, Stack]:
    """Every stack of a synthesized assembly with its direct dependencies on other stacks."""
    artifacts = assembly.manifest()["artifacts"]
    names = {n for n, a in artifacts.items() if a["type"] == "aws:cloudformation:stack"}
    return {
        name: Stack(
            name,
            artifacts[name]["environment"].rsplit("/", 1)[1],
            assembly.template_json(name),
            {d for d in artifacts[name].get("dependencies", []) if d in names},
        )
        for name in names
    }


def deployed_before(stacks: Mapping[str, Stack], name: str) -> set[str]:
    """Every stack `name` depends on, transitively."""
    seen: set[str] = set()
    todo = list(stacks[name].depends_on)
    while todo:
        current = todo.pop()
        if current not in seen:
            seen.add(current)
            todo.extend(stacks[current].depends_on)
    return seen


def user_data_text(value: Any) -> str:
    """The user data script with every CloudFormation token replaced by TOKEN."""
    if isinstance(value, str):
        return value
    if isinstance(value, dict) and set(value) == {"Fn::Base64"}:
        return user_data_text(value["Fn::Base64"])
    if isinstance(value, dict) and set(value) == {"Fn::Join"}:
        separator, parts = value["Fn::Join"]
        return str(separator).join(user_data_text(p) for p in parts)
    return TOKEN


def boot_env(launch_template: dict[str, Any]) -> dict[str, str]:
    """The /etc/elastic-slurm/env a launch template's user data writes (stacks/user_data.py env_file): `KEY='value'`
    lines of a here-document, or `echo 'KEY=value' >> /etc/elastic-slurm/env` lines."""
    data = launch_template.get("LaunchTemplateData", {})
    text = user_data_text(data.get("UserData", ""))
    env = dict(ENV_LINE.findall(text))
    for _, block in ENV_HEREDOC.findall(text):
        for line in block.splitlines():
            key, _, value = line.partition("=")
            env[key] = "".join(shlex.split(value))
    return env


def writers(stacks: Mapping[str, Stack]) -> dict[tuple[str, str], str]:
    """(region, name) → the stack whose template creates it: SSM parameters, the AMI parameters of Image Builder
    distributions, secrets and their replicas, log groups, instances by Name tag, CDK cross-region exports."""
    made: dict[tuple[str, str], str] = {}
    for stack in stacks.values():
        for _, props in stack.resources("AWS::SSM::Parameter"):
            if isinstance(props.get("Name"), str):
                made[(stack.region, props["Name"])] = stack.name
        for _, props in stack.resources("AWS::ImageBuilder::DistributionConfiguration"):
            for distribution in props["Distributions"]:
                for parameter in distribution.get("SsmParameterConfigurations", []):
                    made[(distribution["Region"], parameter["ParameterName"])] = stack.name
        for _, props in stack.resources("AWS::SecretsManager::Secret"):
            if isinstance(props.get("Name"), str):
                for region in [stack.region, *(r["Region"] for r in props.get("ReplicaRegions", []))]:
                    made[(region, props["Name"])] = stack.name
        for _, props in stack.resources("AWS::Logs::LogGroup"):
            if isinstance(props.get("LogGroupName"), str):
                made[(stack.region, props["LogGroupName"])] = stack.name
        for _, props in stack.resources("AWS::EC2::Instance"):
            for tag in props.get("Tags", []):
                if tag["Key"] == "Name" and isinstance(tag["Value"], str):
                    made[(stack.region, f"instance {tag['Value']}")] = stack.name
        for _, props in stack.resources("Custom::CrossRegionExportWriter"):
            for name in props["WriterProps"]["exports"]:
                made[(props["WriterProps"]["region"], name)] = stack.name
    return made


def _launched_at_deploy(stack: Stack, logical_id: str) -> bool:
    """Whether an instance or auto scaling group of the same stack uses this launch template."""
    kinds = ("AWS::EC2::Instance", "AWS::AutoScaling::AutoScalingGroup")
    users = [json.dumps(props) for kind in kinds for _, props in stack.resources(kind)]
    return any(json.dumps({"Ref": logical_id}) in text for text in users)


def _controller_stacks(stacks: Mapping[str, Stack]) -> dict[str, str]:
    """Cluster name → the stack whose instances run its controllers (ES_ROLE=controller)."""
    found = {}
    for stack in stacks.values():
        for _, props in stack.resources("AWS::EC2::LaunchTemplate"):
            env = boot_env(props)
            if env.get("ES_ROLE") == "controller":
                found[env["ES_CLUSTER"]] = stack.name
    return found


def reaches(stacks: Mapping[str, Stack], config_path: Any) -> list[Reach]:
    """Every cross-stack read of every launch template's boot, with the stack that makes what it reads."""
    made = writers(stacks)
    config = load(config_path)
    slurmdbd = config.accounting_host if config.accounting.mode != "none" else None
    dbd_region = config.cluster(slurmdbd).region if slurmdbd else ""
    found: list[Reach] = []
    for stack in stacks.values():
        for logical_id, props in stack.resources("AWS::EC2::LaunchTemplate"):
            env = boot_env(props)
            if not env:
                continue
            # the boot's AWS calls go to ES_REGION (stacks/user_data.py exports AWS_DEFAULT_REGION), logs too
            region = env["ES_REGION"]
            names = [v for v in env.values() if TOKEN not in v and v.startswith(NAME_PREFIXES)]
            reads = [(region, name, f"{name} in {region}") for name in names]
            image = props["LaunchTemplateData"].get("ImageId", "")
            if isinstance(image, str) and image.startswith("resolve:ssm:"):  # EC2 resolves it at launch, here
                name = image.removeprefix("resolve:ssm:")
                reads.append((stack.region, name, f"AMI parameter {name} in {stack.region}"))
            if env.get("ES_ROLE") == "controller" and slurmdbd and env["ES_CLUSTER"] != slurmdbd:
                host = f"instance {slurmdbd}-controller-0"
                reads.append((dbd_region, host, f"the slurmdbd host ({host} in {dbd_region})"))
            for where, name, what in reads:
                found.append(Reach(stack.name, logical_id, what, made.get((where, name))))
        for reader, writer in _imports(stack, stacks):
            found.append(Reach(stack.name, reader, "a CloudFormation import", writer))
    found += _route_reaches(stacks, slurmdbd)
    return found


def _imports(stack: Stack, stacks: Mapping[str, Stack]) -> Iterator[tuple[str, str | None]]:
    """(logical id, exporting stack) of every Fn::ImportValue in the stack (CDK's same-region references)."""
    exporters = {
        output["Export"]["Name"]: other.name
        for other in stacks.values()
        for output in other.template.get("Outputs", {}).values()
        if isinstance(output.get("Export", {}).get("Name"), str)
    }
    for logical_id, resource in stack.template.get("Resources", {}).items():
        for name in re.findall(r'"Fn::ImportValue": "([^"]+)"', json.dumps(resource)):
            yield logical_id, exporters.get(name)


def _subnet_export(stacks: Mapping[str, Stack], value: Any) -> tuple[Stack, str] | None:
    """(network stack, subnet logical id) of an imported subnet id; None for a literal (imported network) subnet."""
    if not isinstance(value, dict) or "Fn::ImportValue" not in value:
        return None
    stack, _ = value["Fn::ImportValue"].split(":", 1)
    network = stacks[stack]
    for output in network.template.get("Outputs", {}).values():
        if output.get("Export", {}).get("Name") == value["Fn::ImportValue"]:
            return network, output["Value"]["Ref"]
    return None


def _vpc_cidr(network: Stack) -> ipaddress.IPv4Network:
    [(_, vpc)] = list(network.resources("AWS::EC2::VPC"))
    return ipaddress.ip_network(vpc["CidrBlock"])


def _routes_to(stacks: Mapping[str, Stack], network: Stack, subnet: str, cidr: ipaddress.IPv4Network) -> set[str]:
    """The stacks holding a peering route from `subnet`'s route table (in `network`) towards `cidr`."""
    tables = {
        a["RouteTableId"]["Ref"]
        for _, a in network.resources("AWS::EC2::SubnetRouteTableAssociation")
        if a["SubnetId"] == {"Ref": subnet}
    }
    refs = [{"Ref": t} for t in tables] + [
        {"Fn::ImportValue": o["Export"]["Name"]}
        for o in network.template.get("Outputs", {}).values()
        if o.get("Value") in [{"Ref": t} for t in tables] and "Export" in o
    ]
    holders = set()
    for stack in stacks.values():
        for _, route in stack.resources("AWS::EC2::Route"):
            destination = route.get("DestinationCidrBlock")
            if not (route.get("VpcPeeringConnectionId") and isinstance(destination, str)):
                continue
            if route["RouteTableId"] in refs and cidr.subnet_of(ipaddress.ip_network(destination)):  # type: ignore[arg-type]
                holders.add(stack.name)
    return holders


def _controller_subnet(stack: Stack, index: int = 0) -> Any:
    for _, props in stack.resources("AWS::EC2::Instance"):
        if any(t["Key"] == "Name" and str(t["Value"]).endswith(f"-controller-{index}") for t in props.get("Tags", [])):
            return props.get("SubnetId")
    return None


def _route_reaches(stacks: Mapping[str, Stack], slurmdbd: str | None) -> list[Reach]:
    """A controller of another VPC reaches slurmdbd on the host's controller 0: routes both ways (a TCP answer needs
    the way back). Imported networks' route tables are the operator's (docs/deploy.md): not checked here."""
    if slurmdbd is None:
        return []
    controllers = _controller_stacks(stacks)
    host = _subnet_export(stacks, _controller_subnet(stacks[controllers[slurmdbd]]))
    found = []
    for cluster, name in controllers.items():
        member = _subnet_export(stacks, _controller_subnet(stacks[name]))
        if cluster == slurmdbd or host is None or member is None or member[0].name == host[0].name:
            continue
        for (network, subnet), towards in ((member, host[0]), (host, member[0])):
            cidr = _vpc_cidr(towards)
            what = f"routes from {network.name} to {cidr} (slurmdbd of {slurmdbd})"
            holders = _routes_to(stacks, network, subnet, cidr)
            found += [Reach(name, "Controller0", what, h) for h in holders] or [Reach(name, "Controller0", what, None)]
    return found


def unmet(stacks: Mapping[str, Stack], config_path: Any) -> list[str]:
    """Every reach whose writer is missing or may deploy after the reading instance boots."""
    controllers = _controller_stacks(stacks)
    problems = []
    for reach in reaches(stacks, config_path):
        if reach.writer is None:
            problems.append(f"{reach.reader}/{reach.template}: no stack makes {reach.what}")
            continue
        ready = {reach.reader} | deployed_before(stacks, reach.reader)
        stack = stacks[reach.reader]
        props = stack.template["Resources"].get(reach.template, {})
        if props.get("Type") == "AWS::EC2::LaunchTemplate" and not _launched_at_deploy(stack, reach.template):
            cluster = boot_env(props["Properties"]).get("ES_CLUSTER", "")
            if cluster in controllers:  # launched by that cluster's controller, once its stack is deployed
                ready |= {controllers[cluster]} | deployed_before(stacks, controllers[cluster])
        if reach.writer not in ready:
            problems.append(f"{reach.reader}/{reach.template} reads {reach.what} of {reach.writer}: no dependency")
    return problems


def test_every_boot_reach_across_stacks_has_a_stack_dependency(assemblies: dict[str, Assembly]) -> None:
    checked = 0
    for name, assembly in sorted(assemblies.items()):
        assert assembly.returncode == 0, assembly.output[-2000:]
        stacks = stacks_of(assembly)
        found = reaches(stacks, assembly.config)
        across = [r for r in found if r.writer != r.reader]
        assert across, f"{name}: no reach across stacks found (is the user data still parsed?)"
        assert unmet(stacks, assembly.config) == [], name
        checked += len(across)
        print(f"{name}: {len(across)} reaches across stacks, each behind a dependency")
    assert checked > 0


def _needs(assemblies: dict[str, Assembly], stem: str) -> Assembly:
    if stem not in assemblies and os.environ.get("ES_SYNTH_ONLY"):
        pytest.skip(f"ES_SYNTH_ONLY leaves out {stem}")  # a developer's narrowed run only; `make test` has all
    return assemblies[stem]


def test_a_federation_member_reaches_slurmdbd_over_both_peering_stacks(assemblies: dict[str, Assembly]) -> None:
    assembly = _needs(assemblies, "federation")
    stacks = stacks_of(assembly)
    routes = {r.writer for r in reaches(stacks, assembly.config) if r.what.startswith("routes")}
    assert routes == {"es-west-federation-east", "es-east-federation-west"}
    assert routes <= deployed_before(stacks, "es-west-cluster")  # `cdk deploy es-west-cluster` deploys them first


def test_a_member_without_its_peering_dependencies_is_reported(assemblies: dict[str, Assembly]) -> None:
    assembly = _needs(assemblies, "federation")
    stacks = stacks_of(assembly)
    stacks["es-west-cluster"].depends_on -= {"es-west-federation-east", "es-east-federation-west"}
    problems = unmet(stacks, assembly.config)
    assert len(problems) == 2, problems  # the member's routes to the host, and the host's way back
    assert all(p.startswith("es-west-cluster/Controller0") and "slurmdbd of east" in p for p in problems)


def test_a_member_deployed_before_the_munge_key_owner_is_reported(assemblies: dict[str, Assembly]) -> None:
    assembly = _needs(assemblies, "federation")
    stacks = stacks_of(assembly)
    stacks["es-west-cluster"].depends_on.discard("es-east-cluster")
    problems = unmet(stacks, assembly.config)
    assert any("elastic-slurm/east/munge-key" in p for p in problems), problems
    assert any("instance east-controller-0" in p for p in problems), problems


def test_a_remote_region_deployed_before_its_ami_parameter_is_reported(assemblies: dict[str, Assembly]) -> None:
    assembly = _needs(assemblies, "remote-region")
    stacks = stacks_of(assembly)
    region = "es-burst-region-us-west-2"
    stacks[region].depends_on.discard("es-burst-images")
    stacks["es-burst-cluster"].depends_on.discard("es-burst-images")  # the controller's stack no longer covers it
    problems = unmet(stacks, assembly.config)
    assert any(p.startswith(f"{region}/") and "AMI parameter /elastic-slurm/burst/ami/" in p for p in problems), (
        problems
    )
