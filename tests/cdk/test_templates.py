"""aws_cdk.assertions on the synthesized templates: IMDSv2, encryption, deletion protection, IAM conditions,
security group rules, and the deconfigure resource's place in the deletion order."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from aws_cdk.assertions import Match, Template

from slurm_plugin.controller_state import CONTROLLER_STATE_MOUNT
from stacks.storage import EFS_FILE_SYSTEM_POLICY
from tests.cdk.conftest import Assembly

pytestmark = pytest.mark.cdk

TemplateOf = Callable[[str, str], Template]
CUSTOM_AMI = "ami-0123456789abcdef0"


@pytest.fixture(scope="session")
def template(assemblies: dict[str, Assembly]) -> TemplateOf:
    """`template(config, stack)` → assertions Template (cached)."""
    cache: dict[tuple[str, str], Template] = {}

    def get(config: str, stack: str) -> Template:
        if (config, stack) not in cache:
            cache[(config, stack)] = Template.from_json(assemblies[config].template_json(stack))
        return cache[(config, stack)]

    return get


def _resources(assembly: Assembly, resource_type: str) -> dict[str, dict[str, Any]]:
    found: dict[str, dict[str, Any]] = {}
    for stack in assembly.templates:
        for logical_id, resource in assembly.template_json(stack)["Resources"].items():
            if resource["Type"] == resource_type:
                found[f"{stack}/{logical_id}"] = resource
    return found


def test_every_launch_template_requires_imdsv2_with_metadata_tags_and_encrypted_root(
    assemblies: dict[str, Assembly],
) -> None:
    for name, assembly in assemblies.items():
        templates = _resources(assembly, "AWS::EC2::LaunchTemplate")
        assert templates, name
        for where, resource in templates.items():
            data = resource["Properties"]["LaunchTemplateData"]
            assert data["MetadataOptions"]["HttpTokens"] == "required", where
            assert data["MetadataOptions"]["InstanceMetadataTags"] == "enabled", where
            assert all(m["Ebs"]["Encrypted"] is True for m in data["BlockDeviceMappings"]), where
            # the cluster's image, resolved at launch; or a pool's own AMI (site-customized.yaml's cpu-c7i)
            assert data["ImageId"].startswith("resolve:ssm:/elastic-slurm/") or data["ImageId"] == CUSTOM_AMI, where


def test_one_launch_template_per_pool_and_per_controller(template: TemplateOf) -> None:
    # multi-az-gpu: 4 pools, 2 controllers
    cluster = template("multi-az-gpu", "es-gpu-cluster")
    cluster.resource_count_is("AWS::EC2::LaunchTemplate", 6)
    cluster.resource_count_is("AWS::EC2::Instance", 2)
    cluster.resource_count_is("AWS::EC2::PlacementGroup", 1)
    cluster.has_resource_properties("AWS::EC2::LaunchTemplate", {"LaunchTemplateName": "gpu-gpu-p5"})


def test_two_controllers_sit_in_different_availability_zones(assemblies: dict[str, Assembly]) -> None:
    controllers = _resources(assemblies["multi-az-gpu"], "AWS::EC2::Instance").values()
    subnets = [json.dumps(c["Properties"]["SubnetId"]) for c in controllers]
    assert len(set(subnets)) == 2


def test_efs_is_encrypted_moves_to_infrequent_access_and_is_backed_up(template: TemplateOf) -> None:
    storage = template("minimal", "es-minimal-storage")
    storage.has_resource_properties(
        "AWS::EFS::FileSystem",
        {"Encrypted": True, "LifecyclePolicies": Match.array_with([{"TransitionToIA": "AFTER_30_DAYS"}])},
    )
    storage.resource_count_is("AWS::Backup::BackupPlan", 1)
    storage.resource_count_is("AWS::Backup::BackupSelection", 1)


def test_efs_without_backup_gets_no_plan_and_rounds_lifecycle_down(template: TemplateOf) -> None:
    storage = template("imported-network-all-storage", "es-edge-storage")
    storage.resource_count_is("AWS::Backup::BackupPlan", 0)
    storage.has_resource_properties(
        "AWS::EFS::FileSystem", {"LifecyclePolicies": Match.array_with([{"TransitionToIA": "AFTER_30_DAYS"}])}
    )


def test_the_controllers_own_efs_is_encrypted_elastic_retained_tls_only_and_one_mount_target_per_az(
    assemblies: dict[str, Assembly],
) -> None:
    """Slurm's state (slurm_plugin/controller_state.py) in every config: an EFS of its own with the users' EFS policy,
    named for the cluster, retained, behind the ControllerState group only; listed in the controllers' mount list."""
    for name, assembly in assemblies.items():
        for stack in (s for s in assembly.templates if s.endswith("-storage")):
            resources = assembly.template_json(stack)["Resources"]
            (lid,) = [k for k, r in resources.items() if r["Type"] == "AWS::EFS::FileSystem" and "ControllerState" in k]
            fs = resources[lid]
            props = fs["Properties"]
            assert (fs["DeletionPolicy"], props["Encrypted"], props["ThroughputMode"]) == ("Retain", True, "elastic")
            assert props["FileSystemPolicy"] == EFS_FILE_SYSTEM_POLICY and "LifecyclePolicies" not in props
            cluster = stack.removeprefix("es-").removesuffix("-storage")
            assert {"Key": "Name", "Value": f"{cluster}-controller-state"} in props["FileSystemTags"], name
            targets = [r for r in resources.values() if r["Type"] == "AWS::EFS::MountTarget"]
            own = [t for t in targets if t["Properties"]["FileSystemId"] == {"Ref": lid}]
            assert own and len({json.dumps(t["Properties"]["SubnetId"]) for t in own}) == len(own), name
            assert all("ControllerState" in json.dumps(t["Properties"]["SecurityGroups"]) for t in own), name
            parameters = [r["Properties"] for r in resources.values() if r["Type"] == "AWS::SSM::Parameter"]
            mounts = next(p for p in parameters if p["Name"] == f"/elastic-slurm/{cluster}/mounts-controller")
            assert CONTROLLER_STATE_MOUNT in json.dumps(mounts["Value"]), name
            shared = next(p for p in parameters if p["Name"] == f"/elastic-slurm/{cluster}/mounts")
            assert CONTROLLER_STATE_MOUNT not in json.dumps(shared["Value"]), name


def test_every_fsx_kind_is_created_with_the_s3_link_for_persistent_lustre(template: TemplateOf) -> None:
    storage = template("imported-network-all-storage", "es-edge-storage")
    for kind in ("LUSTRE", "ONTAP", "OPENZFS"):
        storage.has_resource_properties("AWS::FSx::FileSystem", {"FileSystemType": kind})
    storage.resource_count_is("AWS::FSx::DataRepositoryAssociation", 1)
    storage.has_resource_properties("AWS::SSM::Parameter", {"Name": "/elastic-slurm/edge/mounts"})


def test_aurora_accounting_is_encrypted_protected_and_snapshotted_on_delete(template: TemplateOf) -> None:
    accounting = template("multi-az-gpu", "es-gpu-accounting")
    accounting.has_resource_properties(
        "AWS::RDS::DBCluster",
        {"StorageEncrypted": True, "DeletionProtection": True, "ServerlessV2ScalingConfiguration": Match.any_value()},
    )
    accounting.has_resource("AWS::RDS::DBCluster", {"DeletionPolicy": "Snapshot", "UpdateReplacePolicy": "Snapshot"})
    accounting.resource_count_is("AWS::SecretsManager::Secret", 1)


def test_mariadb_accounting_is_encrypted_protected_and_snapshotted_on_delete(template: TemplateOf) -> None:
    accounting = template("federation", "es-east-accounting")
    accounting.has_resource_properties(
        "AWS::RDS::DBInstance",
        {
            "Engine": "mariadb",
            "StorageEncrypted": True,
            "DeletionProtection": True,
            "PubliclyAccessible": False,
            "StorageType": "gp3",
        },
    )
    accounting.has_resource("AWS::RDS::DBInstance", {"DeletionPolicy": "Snapshot"})


def test_database_port_is_open_only_to_the_controllers(template: TemplateOf) -> None:
    """slurmdbd on the controllers is the database's only client (issue 30 #9): its one ingress names their group."""
    accounting = template("federation", "es-east-accounting")
    accounting.resource_count_is("AWS::EC2::SecurityGroupIngress", 1)
    accounting.has_resource_properties(
        "AWS::EC2::SecurityGroupIngress",
        {
            "FromPort": 3306,
            "ToPort": 3306,
            "SourceSecurityGroupId": {"Fn::ImportValue": Match.string_like_regexp("Controllers")},
        },
    )


def test_controller_terminates_only_instances_tagged_for_its_cluster(template: TemplateOf) -> None:
    cluster = template("multi-az-gpu", "es-gpu-cluster")
    cluster.has_resource_properties(
        "AWS::IAM::Policy",
        {
            "Roles": [{"Ref": Match.string_like_regexp("ControllerRole")}],
            "PolicyDocument": {
                "Statement": Match.array_with(
                    [  # in template order: launch rules come first
                        Match.object_like(
                            {
                                "Action": "ec2:RunInstances",
                                "Condition": Match.object_like(
                                    {"StringEquals": Match.object_like({"aws:RequestTag/elastic-slurm:cluster": "gpu"})}
                                ),
                                "Resource": "arn:aws:ec2:us-east-1:123456789012:instance/*",  # the request tag on instances only
                            }
                        ),
                        Match.object_like(
                            {
                                "Action": "ec2:CreateFleet",
                                "Condition": Match.object_like(
                                    {"StringEquals": Match.object_like({"aws:RequestTag/elastic-slurm:cluster": "gpu"})}
                                ),
                                "Resource": "arn:aws:ec2:us-east-1:123456789012:instance/*",
                            }
                        ),
                        Match.object_like(
                            {
                                "Action": "ec2:TerminateInstances",
                                "Condition": {"StringEquals": {"aws:ResourceTag/elastic-slurm:cluster": "gpu"}},
                            }
                        ),
                    ]
                )
            },
        },
    )


def test_controller_launches_only_from_this_clusters_launch_templates(assemblies: dict[str, Assembly]) -> None:
    policies = _resources(assemblies["multi-az-gpu"], "AWS::IAM::Policy")
    controller = next(p for k, p in policies.items() if "ControllerRole" in k)
    statements = controller["Properties"]["PolicyDocument"]["Statement"]
    launch = [s for s in statements if "ec2:RunInstances" in s["Action"]]
    unconditioned = [s for s in launch if "Condition" not in s]

    def resources(statement: dict[str, Any]) -> list[Any]:  # CDK writes a single resource as a plain value
        value = statement["Resource"]
        return value if isinstance(value, list) else [value]

    for statement in unconditioned:
        for resource in resources(statement):
            text = json.dumps(resource)
            assert ":instance/" not in text, f"instances are launched only with the cluster request tag: {text}"
            assert resource != "*", text
    template_refs = [json.dumps(r) for s in unconditioned for r in resources(s) if "launch-template/" in json.dumps(r)]
    assert len(template_refs) == 4  # one per pool, never a wildcard
    assert all('{"Ref": "Lt' in r for r in template_refs)


def test_no_security_group_allows_ingress_from_anywhere(assemblies: dict[str, Assembly]) -> None:
    for assembly in assemblies.values():
        rules = [
            rule
            for sg in _resources(assembly, "AWS::EC2::SecurityGroup").values()
            for rule in sg["Properties"].get("SecurityGroupIngress", [])
        ]
        rules += [r["Properties"] for r in _resources(assembly, "AWS::EC2::SecurityGroupIngress").values()]
        for rule in rules:
            assert rule.get("CidrIp") != "0.0.0.0/0", rule
            assert rule.get("CidrIpv6") != "::/0", rule


def test_ssh_is_open_only_to_the_configured_cidrs(assemblies: dict[str, Assembly]) -> None:
    edge = _resources(assemblies["imported-network-all-storage"], "AWS::EC2::SecurityGroup")
    ssh = next(sg for k, sg in edge.items() if "/Ssh" in k)
    assert sorted(r["CidrIp"] for r in ssh["Properties"]["SecurityGroupIngress"]) == [
        "198.51.100.7/32",
        "203.0.113.0/24",
    ]
    assert {r["FromPort"] for r in ssh["Properties"]["SecurityGroupIngress"]} == {22}
    minimal = _resources(assemblies["minimal"], "AWS::EC2::SecurityGroup")
    assert "SecurityGroupIngress" not in next(sg for k, sg in minimal.items() if "/Ssh" in k)["Properties"]


def test_all_traffic_is_open_only_between_compute_nodes(assemblies: dict[str, Assembly]) -> None:
    """No CIDR reaches a host group inline, and the only all-traffic rule is the compute group's own (MPI, EFA):
    every other flow is a port rule the network contract checks (tests/contracts/test_network_flows.py)."""
    resources = assemblies["minimal"].template_json("es-minimal-network")["Resources"]
    groups = {k for k, r in resources.items() if r["Type"] == "AWS::EC2::SecurityGroup"}
    assert all("SecurityGroupIngress" not in resources[g]["Properties"] for g in groups)
    all_traffic = [
        (r["Properties"]["GroupId"]["Fn::GetAtt"][0], r["Properties"]["SourceSecurityGroupId"]["Fn::GetAtt"][0])
        for r in resources.values()
        if r["Type"] == "AWS::EC2::SecurityGroupIngress" and r["Properties"]["IpProtocol"] == "-1"
    ]
    (compute,) = [g for g in groups if g.startswith("Compute")]
    assert all_traffic == [(compute, compute)]


def test_new_vpc_has_endpoints_flow_logs_and_a_single_nat(template: TemplateOf) -> None:
    network = template("multi-az-gpu", "es-gpu-network")
    network.resource_count_is("AWS::EC2::NatGateway", 1)
    network.resource_count_is("AWS::EC2::FlowLog", 1)
    network.resource_count_is("AWS::EC2::VPCEndpoint", 8)  # S3 gateway + 7 interface endpoints
    network.has_resource_properties("AWS::EC2::Subnet", {"CidrBlock": Match.string_like_regexp("/20$")})


def test_deconfigure_is_deleted_before_every_other_cluster_resource_but_the_controllers(
    assemblies: dict[str, Assembly],
) -> None:
    assembly = assemblies["multi-az-gpu"]
    resources = assembly.template_json("es-gpu-cluster")["Resources"]
    (deconfigure,) = [r for r in resources.values() if r["Type"] == "Custom::ElasticSlurmDeconfigure"]
    depends = set(deconfigure["DependsOn"])
    must_outlive = {
        k
        for k, r in resources.items()
        if r["Type"]
        in ("AWS::EC2::LaunchTemplate", "AWS::EC2::Instance", "AWS::EC2::PlacementGroup", "AWS::IAM::InstanceProfile")
    }
    launch_templates_of_pools = {k for k in must_outlive if k.startswith("Lt")}
    assert launch_templates_of_pools <= depends
    controllers = {k for k in must_outlive if resources[k]["Type"] == "AWS::EC2::Instance"}
    assert not controllers & depends  # controllers go first: nothing relaunches what deconfigure terminates
    assert deconfigure["Properties"]["ServiceTimeout"] == "1200"
    dependencies = set(assembly.manifest()["artifacts"]["es-gpu-cluster"]["dependencies"])
    assert {"es-gpu-storage", "es-gpu-accounting", "es-gpu-images", "es-gpu-network"} <= dependencies


def test_ec2_events_reach_the_cluster_manager_queue(template: TemplateOf) -> None:
    cluster = template("minimal", "es-minimal-cluster")
    cluster.resource_count_is("AWS::Events::Rule", 4)
    cluster.has_resource_properties(
        "AWS::Events::Rule",
        {"EventPattern": {"source": ["aws.ec2"], "detail-type": ["EC2 Spot Instance Interruption Warning"]}},
    )
    cluster.has_resource_properties(
        "AWS::SQS::Queue", {"SqsManagedSseEnabled": True, "RedrivePolicy": Match.any_value()}
    )
    cluster.has_resource_properties("AWS::SNS::Topic", {"KmsMasterKeyId": Match.any_value()})


def test_deployed_infra_parameter_names_every_pool_launch_template(assemblies: dict[str, Assembly]) -> None:
    parameters = _resources(assemblies["multi-az-gpu"], "AWS::SSM::Parameter")
    (infra,) = [p for p in parameters.values() if p["Properties"]["Name"] == "/elastic-slurm/gpu/deployed-infra"]
    value = json.dumps(infra["Properties"]["Value"])
    for key in ("cpu-spot@us-east-1", "cpu-od@us-east-1", "gpu-g5@us-east-1", "gpu-p5@us-east-1"):
        assert key in value
    assert "placement_groups" in value and "gpu-p5" in value


def test_images_publish_ami_ids_to_ssm_on_the_configured_schedule(template: TemplateOf) -> None:
    images = template("multi-az-gpu", "es-gpu-images")
    images.resource_count_is("AWS::ImageBuilder::ImageRecipe", 2)  # x86_64 and x86_64-gpu
    images.has_resource_properties(
        "AWS::ImageBuilder::DistributionConfiguration",
        {
            "Distributions": [
                Match.object_like(
                    {
                        "SsmParameterConfigurations": [
                            {"ParameterName": "/elastic-slurm/gpu/ami/x86_64-gpu", "DataType": "aws:ec2:image"}
                        ]
                    }
                )
            ]
        },
    )
    images.has_resource_properties(
        "AWS::ImageBuilder::ImagePipeline", {"Schedule": {"ScheduleExpression": "cron(0 4 ? * SUN *)"}}
    )
    edge = template("imported-network-all-storage", "es-edge-images")
    edge.has_resource_properties("AWS::ImageBuilder::ImagePipeline", {"Schedule": Match.absent()})
    edge.resource_count_is("AWS::ImageBuilder::ImageRecipe", 2)  # arm64 (controller + pool), x86_64-gpu


def test_remote_region_pools_get_launch_templates_peering_and_routes(template: TemplateOf) -> None:
    region = template("remote-region", "es-burst-region-us-west-2")
    region.resource_count_is("AWS::EC2::LaunchTemplate", 2)  # cpu-c7i spans both regions, cpu-far is remote only
    region.has_resource_properties("AWS::EC2::VPCPeeringConnection", {"PeerRegion": "us-east-1"})
    region.resource_count_is("AWS::EC2::Route", 2)  # one per remote compute subnet, to the home VPC
    region.has_resource_properties("AWS::EC2::Route", {"DestinationCidrBlock": "100.64.0.0/16"})
    home = template("remote-region", "es-burst-cluster")
    home.resource_count_is("AWS::EC2::LaunchTemplate", 2)  # cpu-c7i + the controller's
    home.has_resource_properties("AWS::EC2::Route", {"DestinationCidrBlock": "100.65.0.0/16"})
    home.has_resource_properties(
        "Custom::ElasticSlurmDeconfigure", {"Regions": ["us-east-1", "us-west-2"], "ClusterName": "burst"}
    )


def test_peered_regions_reach_each_others_slurm_ports_and_nothing_else_opens(template: TemplateOf) -> None:
    template("remote-region", "es-burst-network").has_resource_properties(
        "AWS::EC2::SecurityGroup",
        {"SecurityGroupIngress": Match.array_with([Match.object_like({"CidrIp": "100.65.0.0/16", "FromPort": 6817})])},
    )
    template("remote-region", "es-burst-network-us-west-2").has_resource_properties(
        "AWS::EC2::SecurityGroup",
        {"SecurityGroupIngress": Match.array_with([Match.object_like({"CidrIp": "100.64.0.0/16", "FromPort": 6818})])},
    )


def test_controller_may_launch_and_terminate_in_the_remote_region_too(assemblies: dict[str, Assembly]) -> None:
    assembly = assemblies["remote-region"]
    policies = _resources(assembly, "AWS::IAM::Policy")
    controller = next(p for k, p in policies.items() if "ControllerRole" in k)
    statements = controller["Properties"]["PolicyDocument"]["Statement"]
    (terminate,) = [s for s in statements if s["Action"] == "ec2:TerminateInstances"]
    assert "arn:aws:ec2:us-west-2:123456789012:instance/*" in terminate["Resource"]
    assert terminate["Condition"] == {"StringEquals": {"aws:ResourceTag/elastic-slurm:cluster": "burst"}}
    infra = json.dumps(assembly.template_json("es-burst-cluster"))
    for key in ("cpu-c7i@us-west-2", "cpu-far@us-west-2", "us-west-2b"):
        assert key in infra
    dependencies = set(assembly.manifest()["artifacts"]["es-burst-cluster"]["dependencies"])
    assert "es-burst-region-us-west-2" in dependencies  # deleted after the cluster stack's deconfigure ran


def test_images_are_distributed_to_every_region_of_the_cluster(template: TemplateOf) -> None:
    template("remote-region", "es-burst-images").has_resource_properties(
        "AWS::ImageBuilder::DistributionConfiguration",
        {"Distributions": [Match.object_like({"Region": "us-east-1"}), Match.object_like({"Region": "us-west-2"})]},
    )


def test_every_image_keeps_the_ssm_agent_the_nodes_are_managed_through(assemblies: dict[str, Assembly]) -> None:
    for name, assembly in assemblies.items():
        recipes = _resources(assembly, "AWS::ImageBuilder::ImageRecipe")
        assert recipes, name
        for where, recipe in recipes.items():
            agent = recipe["Properties"]["AdditionalInstanceConfiguration"]["SystemsManagerAgent"]
            assert agent == {"UninstallAfterBuild": False}, where


def test_an_onprem_cluster_reaches_slurmctld_and_slurmdbd_of_east_and_nothing_of_west(template: TemplateOf) -> None:
    # federation.yaml: campus bursts to east (the accounting host); the rules are on the members' security group
    east = template("federation", "es-east-network")
    for cidr in ("198.51.100.5/32", "203.0.113.0/24"):
        for port in (6817, 6819):
            east.has_resource_properties(
                "AWS::EC2::SecurityGroup",
                {"SecurityGroupIngress": Match.array_with([Match.object_like({"CidrIp": cidr, "FromPort": port})])},
            )
    west = json.dumps(template("federation", "es-west-network").to_json())
    assert "198.51.100.5/32" not in west and "203.0.113.0/24" not in west
