"""What a first `cdk deploy` needs (issue 13), asserted on the synthesized templates and the rendered slurm.conf:
srun ports from one setting, all traffic between members, federation munge key and peering, teardown order, no
fixed names on retained resources, a cheap minimal example, the config option, Node 22 and the feature flags."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from aws_cdk.assertions import Match, Template

from cluster_config import load
from elastic_slurm.commands.synth_cmd import CDK_CLI, synth_env
from slurm_plugin.render.base import SRUN_PORT_RANGE, BaseSettings, render_base_conf
from stacks.iam_policies import ArnScope, RegionTarget, fleet_statements
from stacks.node_policies import ControllerResources, controller_statements, node_statements
from tests.cdk.conftest import REPO_ROOT, Assembly, offline_env

pytestmark = pytest.mark.cdk

EXAMPLES = REPO_ROOT / "cluster_config" / "examples"
COMPUTE_GROUP = {"Fn::GetAtt": [Match.string_like_regexp("^Compute"), "GroupId"]}


@pytest.fixture(scope="module")
def template(assemblies: dict[str, Assembly]) -> Callable[[str, str], Template]:
    """`template(config, stack)` → assertions Template."""
    return lambda config, stack: Template.from_json(assemblies[config].template_json(stack))


def _of_type(assembly: Assembly, stack: str, resource_type: str) -> dict[str, dict[str, Any]]:
    resources = assembly.template_json(stack)["Resources"]
    return {k: r for k, r in resources.items() if r["Type"] == resource_type}


def test_slurm_conf_sets_the_srun_port_range_the_peered_groups_open(template: Callable[[str, str], Template]) -> None:
    settings = BaseSettings(controller_hosts=("ctl",), slurmdbd_host="ctl")
    conf = render_base_conf(load(EXAMPLES / "minimal.yaml"), "minimal", settings)
    low, high = SRUN_PORT_RANGE
    assert f"SrunPortRange={low}-{high}" in conf.splitlines()
    template("remote-region", "es-burst-network").has_resource_properties(
        "AWS::EC2::SecurityGroup",
        {
            "SecurityGroupIngress": Match.array_with(
                [Match.object_like({"CidrIp": "100.65.0.0/16", "FromPort": low, "ToPort": high})]
            )
        },
    )


def test_compute_nodes_reach_each_other_on_every_port_and_protocol(template: Callable[[str, str], Template]) -> None:
    """MPI/NCCL/EFA between the nodes of a job (every other flow: tests/contracts/test_network_flows.py)."""
    for config, stack in [("minimal", "es-minimal-network"), ("multi-az-gpu", "es-gpu-network")]:
        template(config, stack).has_resource_properties(
            "AWS::EC2::SecurityGroupIngress",
            {"IpProtocol": "-1", "GroupId": COMPUTE_GROUP, "SourceSecurityGroupId": COMPUTE_GROUP},
        )


def test_federation_members_authenticate_with_the_host_clusters_munge_key(assemblies: dict[str, Assembly]) -> None:
    fed = assemblies["federation"]
    (east_key,) = _of_type(fed, "es-east-cluster", "AWS::SecretsManager::Secret").values()
    assert east_key["Properties"]["Name"] == "elastic-slurm/east/munge-key"
    assert east_key["Properties"]["ReplicaRegions"] == [{"Region": "us-west-2"}]
    assert _of_type(fed, "es-west-cluster", "AWS::SecretsManager::Secret") == {}
    west = json.dumps(fed.template_json("es-west-cluster"))
    assert "ES_MUNGE_SECRET='elastic-slurm/east/munge-key'" in west or "elastic-slurm/east/munge-key" in west
    assert "elastic-slurm/west/munge-key" not in west
    assert "es-east-cluster" in fed.manifest()["artifacts"]["es-west-cluster"]["dependencies"]


def _federation_cidrs() -> tuple[str, str]:
    """The VPC ranges of the federation example's east and west clusters."""
    clusters = yaml.safe_load((EXAMPLES / "federation.yaml").read_text())["clusters"]
    return clusters[0]["network"]["vpc_cidr"], clusters[1]["network"]["vpc_cidr"]


def test_federation_vpcs_are_peered_with_routes_both_ways_and_slurm_ports_open(
    template: Callable[[str, str], Template],
) -> None:
    east, west = _federation_cidrs()  # from the example, not literals: tests name no private-range address
    peering = template("federation", "es-west-federation-east")
    peering.has_resource_properties("AWS::EC2::VPCPeeringConnection", {"PeerRegion": "us-east-1"})
    peering.resource_count_is("AWS::EC2::Route", 2)  # one per west compute subnet
    peering.has_resource_properties("AWS::EC2::Route", {"DestinationCidrBlock": east})
    routes = template("federation", "es-east-federation-west")
    routes.resource_count_is("AWS::EC2::Route", 2)
    routes.has_resource_properties("AWS::EC2::Route", {"DestinationCidrBlock": west})
    for stack, peer in [("es-east-network", west), ("es-west-network", east)]:
        for port in (6817, 6819):  # slurmctld <-> slurmctld, slurmctld -> slurmdbd on the host's controller
            template("federation", stack).has_resource_properties(
                "AWS::EC2::SecurityGroup",
                {"SecurityGroupIngress": Match.array_with([Match.object_like({"CidrIp": peer, "FromPort": port})])},
            )


def test_controllers_are_deleted_before_deconfigure_terminates_the_compute_nodes(
    assemblies: dict[str, Assembly],
) -> None:
    for name, stack in [("multi-az-gpu", "es-gpu-cluster"), ("minimal", "es-minimal-cluster")]:
        assembly = assemblies[name]
        (deconfigure_id,) = _of_type(assembly, stack, "Custom::ElasticSlurmDeconfigure")
        deconfigure = assembly.template_json(stack)["Resources"][deconfigure_id]
        controllers = _of_type(assembly, stack, "AWS::EC2::Instance")
        assert controllers
        for controller_id, controller in controllers.items():
            assert deconfigure_id in controller.get("DependsOn", []), controller_id
            assert controller_id not in deconfigure.get("DependsOn", [])


def test_retained_resources_carry_no_fixed_name_that_blocks_a_redeploy(assemblies: dict[str, Assembly]) -> None:
    checked = 0
    for assembly in assemblies.values():
        for stack in assembly.templates:
            for logical_id, resource in assembly.template_json(stack)["Resources"].items():
                if resource.get("DeletionPolicy") not in ("Retain", "RetainExceptOnCreate"):
                    continue
                names = {k: v for k, v in resource.get("Properties", {}).items() if k.endswith("Name")}
                for key, value in names.items():
                    checked += 1
                    assert "AWS::StackId" in json.dumps(value), f"{stack}/{logical_id}.{key} = {value}"
    assert checked  # the EFS backup vaults


def test_minimal_example_idles_without_interface_endpoints_behind_one_nat(
    template: Callable[[str, str], Template],
) -> None:
    network = template("minimal", "es-minimal-network")
    network.resource_count_is("AWS::EC2::NatGateway", 1)
    network.resource_count_is("AWS::EC2::VPCEndpoint", 1)
    network.has_resource_properties("AWS::EC2::VPCEndpoint", {"VpcEndpointType": "Gateway"})
    cluster = template("minimal", "es-minimal-cluster")
    cluster.resource_count_is("AWS::EC2::Instance", 1)
    cluster.has_resource_properties(
        "AWS::EC2::LaunchTemplate",
        {"LaunchTemplateData": Match.object_like({"InstanceType": "c7i.large", "Monitoring": {"Enabled": True}})},
    )


def test_cdk_without_a_config_names_the_option_in_one_line(tmp_path: Path) -> None:
    # as `npx cdk deploy` runs it: node_modules/.bin (Node 22) first on PATH
    env = synth_env(offline_env()) | {"CDK_CONTEXT_JSON": "{}", "CDK_OUTDIR": str(tmp_path)}
    result = subprocess.run(
        [sys.executable, "app.py"], cwd=REPO_ROOT, env=env, capture_output=True, text=True, check=False
    )
    assert result.returncode == 2
    (line,) = result.stderr.splitlines()
    assert "-c config=" in line and "Traceback" not in line
    assert not list(tmp_path.glob("*.template.json"))


def test_cdk_cli_and_jsii_run_on_node_22_lts() -> None:
    path = synth_env({"PATH": "/usr/bin"})["PATH"].split(os.pathsep)
    assert path[0] == str(CDK_CLI.parent)
    node = CDK_CLI.parent / "node"
    version = subprocess.run([str(node), "--version"], capture_output=True, text=True, check=True).stdout
    assert version.startswith("v22."), version


FLAG_REPORT = "aws-cdk-lib/feature-flag-report"  # the cloud assembly's artifact `cdk flags` reads
ALL_RECOMMENDED = "All feature flags are already set to their recommended values"


def cdk_flags(assembly_dir: Path) -> str:
    """`cdk flags` of a synthesized cloud assembly (`-a DIR`: the CLI reads the assembly's feature-flag report, the
    app is not run again); its output."""
    result = subprocess.run(
        [str(CDK_CLI), "flags", "--unstable=flags", "-a", str(assembly_dir)],
        cwd=assembly_dir,
        env=synth_env(offline_env()),
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-2000:]
    return output


def test_every_recommended_feature_flag_is_set(assemblies: dict[str, Assembly]) -> None:
    flags = assemblies["minimal"].manifest()["artifacts"][FLAG_REPORT]["properties"]["flags"]
    assert len(flags) > 50  # the report of every flag aws-cdk-lib knows, not an empty one
    assert ALL_RECOMMENDED in cdk_flags(assemblies["minimal"].outdir)


def test_a_flag_cdk_json_leaves_unset_at_a_non_recommended_default_is_reported(
    assemblies: dict[str, Assembly], tmp_path: Path
) -> None:
    """The negative case: the same assembly as if cdk.json did not set one flag whose default (unconfigured
    behaviour) is not the recommended value."""
    copy = tmp_path / "assembly"
    copy.mkdir()
    manifest = assemblies["minimal"].manifest()
    flags = manifest["artifacts"][FLAG_REPORT]["properties"]["flags"]
    name, flag = next(
        (n, f)
        for n, f in flags.items()
        if "userValue" in f and f.get("unconfiguredBehavesLike", {}).get("v2") != f["recommendedValue"]
    )
    del flag["userValue"]
    (copy / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")
    for template in assemblies["minimal"].outdir.glob("*.json"):
        if template.name != "manifest.json":
            (copy / template.name).symlink_to(template)
    output = cdk_flags(copy)
    assert ALL_RECOMMENDED not in output
    assert name in output


def test_remote_region_stack_deploys_after_the_images_it_resolves(assemblies: dict[str, Assembly]) -> None:
    dependencies = assemblies["remote-region"].manifest()["artifacts"]["es-burst-region-us-west-2"]["dependencies"]
    assert "es-burst-images" in dependencies


def test_controller_may_read_the_ami_parameter_of_every_region_it_launches_in(assemblies: dict[str, Assembly]) -> None:
    policies = _of_type(assemblies["remote-region"], "es-burst-cluster", "AWS::IAM::Policy")
    controller = next(p for k, p in policies.items() if k.startswith("ControllerRole"))
    (read,) = [
        s for s in controller["Properties"]["PolicyDocument"]["Statement"] if s.get("Sid") == "ReadClusterParameters"
    ]
    resources = json.dumps(read["Resource"])
    for region in ("us-east-1", "us-west-2"):
        assert f"ssm:{region}:123456789012:parameter/elastic-slurm/burst/*" in resources, resources


def test_remote_region_ec2_events_reach_the_home_regions_bus(template: Callable[[str, str], Template]) -> None:
    template("remote-region", "es-burst-region-us-west-2").has_resource_properties(
        "AWS::Events::Rule",
        {
            "EventPattern": {
                "source": ["aws.ec2"],
                "detail-type": Match.array_with(["EC2 Spot Instance Interruption Warning"]),
            },
            "Targets": [
                Match.object_like(
                    {"Arn": Match.string_like_regexp("^arn:aws:events:us-east-1:123456789012:event-bus/default$")}
                )
            ],
        },
    )


def test_node_role_policies_hold_exactly_the_statements_the_local_cloud_enforces(
    assemblies: dict[str, Assembly],
) -> None:
    # stacks/node_policies.py + iam_policies.py are the whole inline policy of each role: no CDK grant adds a
    # statement the local cloud's principals (localcloud/aws/cloud_iam.py) would not hold
    policies = _of_type(assemblies["federation"], "es-east-cluster", "AWS::IAM::Policy")

    def sids(prefix: str) -> list[str]:
        (policy,) = [p for key, p in policies.items() if key.startswith(prefix)]
        return sorted(s.get("Sid", "<no Sid>") for s in policy["Properties"]["PolicyDocument"]["Statement"])

    scope = ArnScope("aws", "123456789012", "us-east-1")
    node = node_statements(scope, "east", ["us-east-1"], "munge", ["efs"])
    controller_node = node
    assert "RootOnSharedFileSystems" in {s["Sid"] for s in node}  # root writes the share on every node
    controller = [
        *fleet_statements(scope, "east", [RegionTarget("us-east-1", "vpc", ["lt"], "role")]),
        *controller_node,
        *controller_statements(ControllerResources("object", "secret", "queue", "topic", "key", "parameter")),
    ]
    assert sids("ControllerRole") == sorted(s["Sid"] for s in controller)
    assert sids("ComputeRole") == sorted(s["Sid"] for s in node)
