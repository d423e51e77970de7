"""Custom actions: the user-data values and IAM statement the stacks derive from the config, and the node script
(assets/bootstrap/elastic-slurm-custom-actions) run for real with local scripts and a stand-in `aws s3 cp`."""

from __future__ import annotations

import base64
import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from cluster_config import ConfigInvalid, parse
from cluster_config.model import CustomActions
from stacks.iam_policies import ArnScope
from stacks.node_policies import custom_action_objects, node_statements
from stacks.user_data import actions_values, boot_commands, pool_values

SCRIPT = Path(__file__).resolve().parents[2] / "assets" / "bootstrap" / "elastic-slurm-custom-actions"
BIN = "/opt/elastic-slurm/bin"


def config_with(pool_actions: dict[str, Any], controller_actions: dict[str, Any] | None = None) -> Any:
    pool = {"name": "c7i", "instance_types": ["c7i.large"], "max_nodes": 2, "custom_actions": pool_actions}
    cluster = {
        "name": "acts",
        "region": "us-east-1",
        "network": {"mode": "create", "availability_zones": ["us-east-1a"]},
        "storage": {"efs": {}},
        "controller": {"custom_actions": controller_actions or {}},
        "partitions": [{"name": "cpu", "pools": [pool]}],
    }
    return parse({"clusters": [cluster]}, "acts.yaml").cluster("acts")


def run_actions(tmp_path: Path, phase: str, actions: dict[str, Any]) -> subprocess.CompletedProcess[str]:
    """The node script with a stand-in `aws` that copies s3://bucket/key from tmp_path/s3/bucket/key."""
    fake = tmp_path / "bin"
    fake.mkdir(exist_ok=True)
    (fake / "aws").write_text(
        '#!/bin/bash\n[ "$1 $2 $3" = "s3 cp --only-show-errors" ] || exit 9\n'
        f'src="{tmp_path}/s3/${{4#s3://}}"; [ -f "$src" ] || {{ echo "404 $4" >&2; exit 1; }}; cp "$src" "$5"\n'
    )
    (fake / "aws").chmod(0o755)
    value = actions_values(CustomActions.model_validate(actions)).get("ES_ACTIONS", "")
    env = {**os.environ, "PATH": f"{fake}:{os.environ['PATH']}", "ES_ACTIONS": value}
    return subprocess.run(
        ["bash", str(SCRIPT), phase], env=env, capture_output=True, text=True, timeout=30, check=False
    )


def script(tmp_path: Path, name: str, body: str) -> str:
    path = tmp_path / name
    path.write_text(f"#!/bin/bash\n{body}\n")
    path.chmod(0o755)
    return str(path)


def test_actions_run_in_order_with_their_arguments_and_s3_scripts_are_downloaded(tmp_path: Path) -> None:
    (tmp_path / "s3" / "my-bucket").mkdir(parents=True)
    (tmp_path / "s3" / "my-bucket" / "second.sh").write_text('#!/bin/bash\necho "second got $*"\n')
    first = script(tmp_path, "first.sh", 'echo "first got $1|$2"')
    actions = {
        "on_node_start": [
            {"script": first, "args": ["a b", "c"]},
            {"script": "s3://my-bucket/second.sh", "args": ["x"]},
        ],
        "on_node_configured": [{"script": script(tmp_path, "later.sh", "echo later")}],
    }
    result = run_actions(tmp_path, "on_node_start", actions)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert "first got a b|c" in lines and "second got x" in lines
    assert lines.index("first got a b|c") < lines.index("second got x")
    assert "later" not in lines  # the other phase's actions do not run
    assert "elastic-slurm: custom action 2/2 of on_node_start (s3://my-bucket/second.sh): done" in lines


def test_a_failing_action_stops_the_phase_with_a_line_naming_it(tmp_path: Path) -> None:
    failing = script(tmp_path, "bad.sh", "echo trying; exit 3")
    never = script(tmp_path, "never.sh", f"touch {tmp_path}/ran")
    result = run_actions(
        tmp_path, "on_node_configured", {"on_node_configured": [{"script": failing}, {"script": never}]}
    )
    assert result.returncode == 1
    assert f"elastic-slurm: custom action 1/2 of on_node_configured ({failing}) failed with exit 3" in result.stderr
    assert not (tmp_path / "ran").exists()


@pytest.mark.parametrize(
    ("action", "message"),
    [
        ({"script": "s3://my-bucket/missing.sh"}, "(s3://my-bucket/missing.sh): download failed"),
        ({"script": "/nonexistent/setup.sh"}, "(/nonexistent/setup.sh): no executable file at /nonexistent/setup.sh"),
    ],
)
def test_a_missing_script_fails_the_phase(tmp_path: Path, action: dict[str, Any], message: str) -> None:
    result = run_actions(tmp_path, "on_node_start", {"on_node_start": [action]})
    assert result.returncode == 1
    assert f"elastic-slurm: custom action 1/1 of on_node_start {message}" in result.stderr


def test_no_actions_is_a_no_op(tmp_path: Path) -> None:
    result = run_actions(tmp_path, "on_node_start", {})
    assert (result.returncode, result.stdout, result.stderr) == (0, "", "")


def test_pool_values_carry_the_pool_key_and_its_actions_as_base64_json() -> None:
    cluster = config_with({"on_node_start": [{"script": "s3://my-bucket/a.sh", "args": ["1"]}]})
    pool = cluster.partitions[0].pools[0]
    values = pool_values("cpu", pool)
    assert values["ES_POOL"] == "cpu-c7i"
    decoded = json.loads(base64.b64decode(values["ES_ACTIONS"]))
    assert decoded == {"on_node_configured": [], "on_node_start": [{"args": ["1"], "script": "s3://my-bucket/a.sh"}]}
    assert pool_values("cpu", config_with({}).partitions[0].pools[0]) == {"ES_POOL": "cpu-c7i"}


def test_both_roles_run_each_phase_once_at_its_place_in_the_boot() -> None:
    for role, before in (("compute", f"exec {BIN}/elastic-slurm-node-bootstrap"), ("controller", "es_signal SUCCESS")):
        lines = boot_commands(role, {"ES_CLUSTER": "acts"})
        start = lines.index(f"{BIN}/elastic-slurm-custom-actions on_node_start")
        configured = lines.index(f"{BIN}/elastic-slurm-custom-actions on_node_configured")
        assert next(i for i, line in enumerate(lines) if "mountpoint -q" in line) < start < configured
        assert configured < next(i for i, line in enumerate(lines) if line.startswith(before))


def test_nodes_may_read_exactly_the_s3_scripts_of_the_config() -> None:
    cluster = config_with(
        {"on_node_start": [{"script": "s3://pool-bucket/a.sh"}, {"script": "/usr/local/bin/local.sh"}]},
        {"on_node_configured": [{"script": "s3://ctl-bucket/b.sh"}, {"script": "s3://pool-bucket/a.sh"}]},
    )
    scope = ArnScope("aws", "123456789012", "us-east-1")
    objects = custom_action_objects(scope, cluster)
    assert objects == ["arn:aws:s3:::ctl-bucket/b.sh", "arn:aws:s3:::pool-bucket/a.sh"]
    statements = node_statements(scope, "acts", ["us-east-1"], "arn:secret", action_objects=objects)
    (read,) = [s for s in statements if s["Sid"] == "ReadCustomActionScripts"]
    assert (read["Action"], read["Resource"]) == (["s3:GetObject"], objects)
    assert not [
        s for s in node_statements(scope, "acts", ["us-east-1"], "arn:secret") if s["Sid"] == "ReadCustomActionScripts"
    ]


def test_the_largest_actions_allowed_still_fit_ec2s_user_data_limit() -> None:
    from cluster_config.model_site import MAX_ENCODED_ACTIONS

    generous = {f"ES_VALUE_{i}": "x" * 150 for i in range(16)}  # the stacks write about 14 values of up to ~120
    for role in ("controller", "compute"):
        values = {**generous, "ES_ACTIONS": "A" * MAX_ENCODED_ACTIONS}
        text = "#!/bin/bash\n" + "\n".join(boot_commands(role, values, signal_url="https://" + "s" * 1200))
        assert len(text.encode()) < 16 * 1024, (role, len(text.encode()))


def test_too_many_actions_are_refused_with_their_size() -> None:
    many = [{"script": "s3://my-bucket/setup.sh", "args": ["x" * 200]} for _ in range(20)]
    with pytest.raises(ConfigInvalid) as caught:
        config_with({"on_node_start": many})
    (error,) = caught.value.errors
    assert error.path == "clusters[0].partitions[0].pools[0].custom_actions"
    assert "of the 16 KB EC2 user data (at most 4096): use fewer or shorter arguments" in error.message


def test_s3_keys_with_iam_wildcards_are_refused() -> None:
    with pytest.raises(ConfigInvalid) as caught:
        config_with({"on_node_start": [{"script": "s3://my-bucket/*.sh"}]})
    (error,) = caught.value.errors
    assert error.path == "clusters[0].partitions[0].pools[0].custom_actions.on_node_start[0].script"
