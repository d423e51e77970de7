"""Issue 13, items 4-6, on the synthesized templates and the rendered boot scripts: a config edit replaces no
controller and no launch template (the config reaches the controllers through a parameter), stack creation waits for
every controller's healthy signal, root volumes are the base OS's root device, and every node keeps IMDSv2 with hop
limit 1, blocks the metadata service for job users and mounts its file systems from /etc/fstab."""

from __future__ import annotations

import json
import subprocess
from typing import Any

import pytest
import yaml

from stacks import user_data
from stacks.naming import config_url_parameter
from stacks.user_data import boot_commands
from tests.cdk.conftest import REPO_ROOT, Assembly, synth_once

pytestmark = pytest.mark.cdk

EXAMPLES = REPO_ROOT / "cluster_config" / "examples"


def _of_type(assembly: Assembly, stack: str, resource_type: str) -> dict[str, dict[str, Any]]:
    resources = assembly.template_json(stack)["Resources"]
    return {k: r for k, r in resources.items() if r["Type"] == resource_type}


def _config_url(assembly: Assembly, stack: str, cluster: str) -> Any:
    parameters = _of_type(assembly, stack, "AWS::SSM::Parameter").values()
    (url,) = [p["Properties"]["Value"] for p in parameters if p["Properties"]["Name"] == config_url_parameter(cluster)]
    return url


@pytest.fixture(scope="module")
def edited_minimal(tmp_path_factory: pytest.TempPathFactory) -> Assembly:
    """minimal.yaml with its pool's max_nodes raised from 16 to 40, a second pool, a QOS and a new cost-center tag,
    synthesized by the real CLI."""
    base = tmp_path_factory.mktemp("edited")
    data = yaml.safe_load((EXAMPLES / "minimal.yaml").read_text())
    (pool,) = data["clusters"][0]["partitions"][0]["pools"]
    assert pool["max_nodes"] == 16
    pool["max_nodes"] = 40
    data["clusters"][0]["partitions"][0]["pools"].append(
        {"name": "m7i", "instance_types": ["m7i.large"], "max_nodes": 4}
    )
    data["qos"] = [{"name": "short"}]
    data["clusters"][0]["tags"] = {"cost-center": "hpc-42"}
    config = base / "minimal.yaml"
    config.write_text(yaml.safe_dump(data))
    result = synth_once(config, base / "out")
    return Assembly(config, base / "out", result.returncode, result.stdout + result.stderr)


def test_editing_pools_qos_and_tags_replaces_no_controller_and_no_launch_template(
    assemblies: dict[str, Assembly], edited_minimal: Assembly
) -> None:
    assert edited_minimal.returncode == 0, edited_minimal.output[-2000:]
    before, after = assemblies["minimal"], edited_minimal
    stack = "es-minimal-cluster"
    # the edit reached the deployment: a new config object, named by the parameter the controllers read
    assert _config_url(before, stack, "minimal") != _config_url(after, stack, "minimal")
    compared = 0
    old_templates = _of_type(before, stack, "AWS::EC2::LaunchTemplate")
    new_templates = _of_type(after, stack, "AWS::EC2::LaunchTemplate")
    assert len(new_templates) == len(old_templates) + 1  # the new pool's
    for logical_id, template in old_templates.items():
        assert new_templates[logical_id] == template, f"{logical_id} changes: a new version (controller replaced)"
        compared += 1
    (controller_id, controller), (new_id, new_controller) = (
        next(iter(_of_type(before, stack, "AWS::EC2::Instance").items())),
        next(iter(_of_type(after, stack, "AWS::EC2::Instance").items())),
    )
    assert controller_id == new_id
    assert controller["Properties"]["LaunchTemplate"] == new_controller["Properties"]["LaunchTemplate"]
    assert controller["Properties"]["SubnetId"] == new_controller["Properties"]["SubnetId"]
    # the new tag reaches the controller as an instance tag (updated in place), not through its launch template
    assert {"Key": "cost-center", "Value": "hpc-42"} in new_controller["Properties"]["Tags"]
    assert compared == 2  # the controller's launch template and the first pool's


@pytest.mark.parametrize(
    ("config", "stack", "controllers"), [("minimal", "es-minimal-cluster", 1), ("multi-az-gpu", "es-gpu-cluster", 2)]
)
def test_stack_creation_waits_for_each_controllers_healthy_signal(
    assemblies: dict[str, Assembly], config: str, stack: str, controllers: int
) -> None:
    assembly = assemblies[config]
    instances = _of_type(assembly, stack, "AWS::EC2::Instance")
    handles = _of_type(assembly, stack, "AWS::CloudFormation::WaitConditionHandle")
    conditions = _of_type(assembly, stack, "AWS::CloudFormation::WaitCondition")
    assert len(instances) == len(handles) == len(conditions) == controllers
    templates = _of_type(assembly, stack, "AWS::EC2::LaunchTemplate")
    for index in range(controllers):
        (condition,) = [c for k, c in conditions.items() if k.startswith(f"Controller{index}Ready")]
        (handle_id,) = [k for k in handles if k.startswith(f"Controller{index}ReadyHandle")]
        (instance_id,) = [k for k in instances if k.startswith(f"Controller{index}")]
        assert condition["Properties"]["Count"] == 1 and condition["Properties"]["Handle"] == {"Ref": handle_id}
        assert 600 < int(condition["Properties"]["Timeout"]) <= 3600
        assert instance_id in condition["DependsOn"]
        # the controller's launch template writes its own handle's URL (what it signals SUCCESS or FAILURE to)
        template_id = instances[instance_id]["Properties"]["LaunchTemplate"]["LaunchTemplateId"]["Ref"]
        user_data = json.dumps(templates[template_id]["Properties"]["LaunchTemplateData"]["UserData"])
        assert f'"Ref": "{handle_id}"' in user_data
        assert sum(h in user_data for h in handles) == 1


@pytest.mark.parametrize(
    ("config", "device"),
    [("minimal", "/dev/xvda"), ("multi-az-gpu", "/dev/sda1"), ("imported-network-all-storage", "/dev/xvda")],
)
def test_launch_templates_size_the_root_device_of_the_base_os(
    assemblies: dict[str, Assembly], config: str, device: str
) -> None:
    assembly = assemblies[config]
    checked = 0
    for stack in assembly.templates:
        for template in _of_type(assembly, stack, "AWS::EC2::LaunchTemplate").values():
            mappings = template["Properties"]["LaunchTemplateData"]["BlockDeviceMappings"]
            assert [m["DeviceName"] for m in mappings] == [device]  # one volume: the root, no blank extra
            checked += 1
    assert checked


def test_every_node_keeps_imdsv2_with_hop_limit_one(assemblies: dict[str, Assembly]) -> None:
    checked = 0
    for assembly in assemblies.values():
        for stack in assembly.templates:
            if stack.endswith("-images"):
                continue  # Image Builder's build instances (hop limit 2 for its containers' tooling)
            for logical_id, template in _of_type(assembly, stack, "AWS::EC2::LaunchTemplate").items():
                options = template["Properties"]["LaunchTemplateData"]["MetadataOptions"]
                assert options["HttpTokens"] == "required", logical_id
                assert options["HttpPutResponseHopLimit"] == 1, logical_id
                checked += 1
    assert checked >= 10


@pytest.mark.parametrize("role", ["controller", "compute"])
def test_every_boot_blocks_the_metadata_service_for_job_users_before_anything_else(role: str) -> None:
    lines = boot_commands(role, {"ES_CLUSTER": "c1"})
    guard = lines.index("systemctl enable --now elastic-slurm-imds-guard.service")
    assert guard < min(i for i, line in enumerate(lines) if "munge" in line)  # before any secret or daemon


@pytest.mark.parametrize("role", ["controller", "compute"])
def test_shared_file_systems_are_mounted_from_fstab_with_netdev_and_nofail(role: str) -> None:
    script = "\n".join(boot_commands(role, {"ES_CLUSTER": "c1"}))
    assert f"jq -r '{user_data.FSTAB_JQ}'" in script and ">> /etc/fstab" in script
    assert 'mount "$mount_point"' in script  # mounted by its fstab entry, as a reboot would
    mounts = [{"type": "efs", "source": "fs-1", "mount_point": "/shared", "options": "tls,iam"}]
    lines = subprocess.run(
        ["jq", "-r", user_data.FSTAB_JQ], input=json.dumps(mounts), capture_output=True, text=True, check=True
    ).stdout.splitlines()
    assert lines == ["/shared\tfs-1:/ /shared efs tls,iam,_netdev,nofail 0 0"]


def test_remote_region_nodes_mount_the_home_efs_by_a_mount_target_address(assemblies: dict[str, Assembly]) -> None:
    assembly = assemblies["remote-region"]
    parameters = {
        p["Properties"]["Name"]: p["Properties"]["Value"]
        for p in _of_type(assembly, "es-burst-storage", "AWS::SSM::Parameter").values()
    }
    remote = json.dumps(parameters["/elastic-slurm/burst/mounts-remote"])
    assert "mounttargetip=" in remote and "IpAddress" in remote and "tls,iam,region=" in remote
    assert "mounttargetip" not in json.dumps(parameters["/elastic-slurm/burst/mounts"])
    remote_templates = _of_type(assembly, "es-burst-region-us-west-2", "AWS::EC2::LaunchTemplate").values()
    home_templates = _of_type(assembly, "es-burst-cluster", "AWS::EC2::LaunchTemplate").values()
    assert remote_templates and home_templates
    for template in remote_templates:
        user_data = json.dumps(template["Properties"]["LaunchTemplateData"]["UserData"])
        assert "ES_MOUNTS_PARAMETER='/elastic-slurm/burst/mounts-remote'" in user_data
    for template in home_templates:  # the home nodes mount by DNS name (their parameter is a reference here)
        assert "mounts-remote" not in json.dumps(template["Properties"]["LaunchTemplateData"]["UserData"])
