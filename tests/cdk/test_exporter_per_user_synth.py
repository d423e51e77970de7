"""`clusters[].controller.exporter_per_user_series` reaches the controllers' env file as ES_EXPORTER_PER_USER_SERIES
(stacks/cluster.py), which the metrics exporter reads (slurm_plugin/exporter/main.py). The default ("0") of every
synthesized config is checked by tests/security/test_exporter_privacy.py; here a cluster that turns it on, synthesized
in process, and its update rule."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import aws_cdk as cdk
import pytest
import yaml
from aws_cdk.assertions import Template

from cluster_config import ConfigInvalid, load
from cluster_config.config_paths import parse_pattern
from cluster_config.update_policy import Policy, rule_for
from slurm_plugin.exporter.main import PER_USER_ENV
from stacks.app_builder import add_stacks
from stacks.project import cdk_context
from stacks.user_data import env_values_in
from tests.synth import REPO_ROOT
from tests.unit.test_render import small_config


def _joined(value: Any) -> str:
    """A CloudFormation string as text: Fn::Join's literal parts, each token a placeholder without quotes."""
    if isinstance(value, str):
        return value
    if isinstance(value, dict) and "Fn::Base64" in value:
        return _joined(value["Fn::Base64"])
    if isinstance(value, dict) and "Fn::Join" in value:
        separator, parts = value["Fn::Join"]
        return str(separator).join(_joined(part) for part in parts)
    return "TOKEN"


def _controller_envs(tmp_path: Path, controller: dict[str, Any]) -> list[dict[str, str]]:
    data = yaml.safe_load((REPO_ROOT / "cluster_config" / "examples" / "minimal.yaml").read_text(encoding="utf-8"))
    data["accounting"] = {"mode": "none"}
    data["clusters"][0]["controller"] = controller
    path = tmp_path / "exporter.yaml"
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    app = cdk.App(context=cdk_context())
    stacks = add_stacks(app, load(path), path)
    resources = Template.from_stack(stacks["minimal"].cluster).to_json()["Resources"]
    return [
        env_values_in(_joined(r["Properties"]["LaunchTemplateData"]["UserData"]))
        for logical_id, r in resources.items()
        if r["Type"] == "AWS::EC2::LaunchTemplate" and logical_id.startswith("ControllerLt")
    ]


def test_the_controllers_serve_per_user_series_when_the_config_asks(tmp_path: Path) -> None:
    envs = _controller_envs(tmp_path, {"exporter_per_user_series": True, "count": 2})
    assert len(envs) == 2
    assert [env[PER_USER_ENV] for env in envs] == ["1", "1"]
    assert {env["ES_ROLE"] for env in envs} == {"controller"}


def test_the_field_is_off_by_default_and_changing_it_replaces_the_controllers() -> None:
    path = REPO_ROOT / "cluster_config" / "examples" / "minimal.yaml"
    assert load(path).clusters[0].controller.exporter_per_user_series is False
    rule = rule_for(parse_pattern("clusters[0].controller.exporter_per_user_series"))
    assert rule.policy == Policy.REPLACE_CONTROLLERS and PER_USER_ENV in rule.reason


@pytest.mark.parametrize("value", ["1", "yes", 1, None, "true\nES_X=1", [True]])
def test_the_field_takes_a_boolean_only(value: Any) -> None:
    with pytest.raises(ConfigInvalid) as info:
        small_config(controller={"exporter_per_user_series": value})
    [error] = info.value.errors
    # a control character is refused for its whole section, the message naming the field (model_base.StrictModel)
    named = f"{error.path}.{error.message.split(':', 1)[0]}" if error.path == "clusters[0].controller" else error.path
    assert named == "clusters[0].controller.exporter_per_user_series", error
