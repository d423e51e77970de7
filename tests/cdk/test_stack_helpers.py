"""Pure helpers of the stacks: boot scripts, image flavors, parent images, EFS lifecycle steps, AWSTOE components."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from cluster_config import load
from stacks import user_data
from stacks.images import needed_flavors, parent_image
from stacks.storage import efs_lifecycle
from stacks.user_data import boot_commands

REPO_ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = REPO_ROOT / "cluster_config" / "examples"


def test_controller_boot_renders_from_deployed_infra_and_starts_slurmctld() -> None:
    lines = boot_commands("controller", {"ES_CLUSTER": "c1", "ES_REGION": "us-east-1"})
    script = "\n".join(lines)
    assert "ES_ROLE='controller'" in lines
    apply = (REPO_ROOT / "assets" / "bootstrap" / "elastic-slurm-config-apply").read_text()
    assert '--infra "$stage/infra.json"' in apply and f"{user_data.BIN}/elastic-slurm-config-apply" in script
    # slurmctld starts after slurmdbd answered and the accounting objects were applied; the boot waits for it to answer
    order = ["es_wait 600 slurmdbd", "slurm-accounting-apply", "systemctl enable --now slurmctld", "scontrol ping"]
    positions = [script.index(step) for step in order]
    assert positions == sorted(positions)
    assert lines[-1].startswith('echo "elastic-slurm boot: controller')
    assert "/etc/munge/munge.key" in script


def test_compute_boot_hands_over_to_the_node_bootstrap() -> None:
    lines = boot_commands("compute", {"ES_CLUSTER": "c1", "ES_POOL": "cpu-c7i"})
    assert lines[-1] == "exec /opt/elastic-slurm/bin/elastic-slurm-node-bootstrap"
    assert "slurmctld" not in "\n".join(lines)


def test_boot_values_with_quotes_are_rejected() -> None:
    with pytest.raises(ValueError, match="ES_X"):
        boot_commands("compute", {"ES_X": "it's"})
    with pytest.raises(ValueError, match="role"):
        boot_commands("bastion", {})


def test_login_boot_starts_sackd_configless_and_no_slurm_daemon() -> None:
    lines = boot_commands("login", {"ES_CLUSTER": "c1", "ES_LOGIN_POOL": "users"})
    assert "systemctl enable --now sackd" in lines
    assert lines[-1].startswith('echo "elastic-slurm boot: login node')
    script = "\n".join(lines)
    assert "node-bootstrap" not in script and "enable --now slurmctld" not in script


def test_gpu_and_graviton_pools_get_their_own_image_flavors() -> None:
    gpu = load(EXAMPLES / "multi-az-gpu.yaml").clusters[0]
    assert needed_flavors(gpu) == [("x86_64", False), ("x86_64", True)]
    west = load(EXAMPLES / "federation.yaml").cluster("west")
    assert needed_flavors(west) == [("arm64", False), ("x86_64", False)]  # c7g pool, c7i.xlarge controller


def test_parent_images_come_from_public_parameters_or_the_operators_rocky_parameter() -> None:
    assert parent_image("al2023", "arm64") == "ssm:/aws/service/ami-amazon-linux-latest/al2023-ami-kernel-default-arm64"
    assert parent_image("rocky9", "x86_64") == "ssm:/elastic-slurm/base-ami/rocky9-x86_64"
    assert parent_image("debian13", "arm64") == "ssm:/aws/service/debian/release/13/latest/arm64"
    assert "red-hat-enterprise-linux-9-x86" in parent_image("rhel9", "x86_64")


@pytest.mark.parametrize(
    ("days", "policy"), [(None, None), (1, "AFTER_1_DAY"), (45, "AFTER_30_DAYS"), (400, "AFTER_365_DAYS")]
)
def test_efs_lifecycle_rounds_down_to_an_allowed_step(days: int | None, policy: str | None) -> None:
    result = efs_lifecycle(days)
    assert (result.name if result is not None else None) == policy


@pytest.mark.parametrize("component", sorted((REPO_ROOT / "assets" / "imagebuilder").glob("*.yaml")))
def test_image_builder_components_are_awstoe_documents_with_build_and_validate(component: Path) -> None:
    document = yaml.safe_load(component.read_text(encoding="utf-8"))
    assert document["schemaVersion"] == 1.0
    assert [p["name"] for p in document["phases"]] == ["build", "validate"]
    assert len(component.read_text(encoding="utf-8")) < 16_000  # inline component data limit
    declared = {next(iter(p)) for p in document.get("parameters", [])}
    text = component.read_text(encoding="utf-8")
    for name in declared:
        assert "{{ " + name + " }}" in text, f"{component.name}: parameter {name} unused"


def test_build_app_creates_every_clusters_stacks_and_one_shared_accounting_stack() -> None:
    from stacks.app_builder import build_app

    app = build_app(EXAMPLES / "federation.yaml")
    names = sorted(child.node.id for child in app.node.children)
    expected = [f"es-{c}-{part}" for c in ("east", "west") for part in ("cluster", "images", "network", "storage")]
    federation = ["es-west-federation-east", "es-east-federation-west"]  # peering + routes between the members
    assert names == sorted([*expected, "es-east-accounting", *federation])
