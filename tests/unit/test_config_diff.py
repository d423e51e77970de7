"""The config diff (cluster_config/config_diff.py): changed leaves with their policies, named items matched by name,
sections set or switched as one change, and the worst policy."""

from __future__ import annotations

import copy
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from cluster_config import parse
from cluster_config.config_diff import Change, diff, show, worst
from cluster_config.config_paths import format_path
from cluster_config.update_policy import Policy

MINIMAL = yaml.safe_load((Path(__file__).resolve().parents[2] / "cluster_config/examples/minimal.yaml").read_text())
Edit = Callable[[dict[str, Any]], object]


def _changes(edit: Edit, base: dict[str, Any] | None = None) -> list[Change]:
    old = copy.deepcopy(base or MINIMAL)
    new = copy.deepcopy(old)
    edit(new)
    return diff(parse(old), parse(new))


def _texts(edit: Edit, base: dict[str, Any] | None = None) -> list[str]:
    return [c.text() for c in _changes(edit, base)]


def _pools(data: dict[str, Any]) -> list[dict[str, Any]]:
    pools: list[dict[str, Any]] = data["clusters"][0]["partitions"][0]["pools"]
    return pools


def test_identical_configs_have_no_changes() -> None:
    assert _changes(lambda data: None) == []
    assert worst([]) is None


def test_a_changed_leaf_is_one_line_with_its_policy() -> None:
    def edit(data: dict[str, Any]) -> None:
        _pools(data)[0]["max_nodes"] = 20

    assert _texts(edit) == ["clusters[0].partitions[0].pools[0].max_nodes: 16 -> 20  (reconfigure)"]


def test_inserting_a_pool_reports_only_that_pool() -> None:
    def edit(data: dict[str, Any]) -> None:
        _pools(data).insert(0, {"name": "m7i", "instance_types": ["m7i.large"], "max_nodes": 4})
        _pools(data)[1]["max_nodes"] = 20

    assert _texts(edit) == [
        "clusters[0].partitions[0].pools[0]: added pool 'm7i'  (reconfigure)",
        "clusters[0].partitions[0].pools[1].max_nodes: 16 -> 20  (reconfigure)",
    ]


def test_a_removed_pool_is_named_where_it_was() -> None:
    two = copy.deepcopy(MINIMAL)
    _pools(two).append({"name": "m7i", "instance_types": ["m7i.large"], "max_nodes": 4})
    assert _texts(lambda data: _pools(data).pop(0), two) == [
        "clusters[0].partitions[0].pools[0]: removed pool 'c7i'  (reconfigure)"
    ]


def test_reordering_named_items_is_no_change() -> None:
    two = copy.deepcopy(MINIMAL)
    _pools(two).append({"name": "m7i", "instance_types": ["m7i.large"], "max_nodes": 4})
    assert _texts(lambda data: _pools(data).reverse(), two) == []


def test_renaming_a_cluster_is_not_allowed() -> None:
    def edit(data: dict[str, Any]) -> None:
        data["clusters"][0]["name"] = "renamed"
        data["accounting"]["host_cluster"] = "renamed"

    changes = _changes(edit)
    assert [c.text() for c in changes] == [
        "clusters[0]: removed cluster 'minimal'  (not allowed)",
        "clusters[0]: added cluster 'renamed'  (not allowed)",
        "accounting.host_cluster: minimal -> renamed  (not allowed)",
    ]
    assert worst(changes) is Policy.NOT_ALLOWED


def test_reordering_clusters_moves_the_default_accounting_host() -> None:
    two = copy.deepcopy(MINIMAL)
    second = copy.deepcopy(two["clusters"][0])
    second["name"] = "second"
    second["network"]["vpc_cidr"] = "100.66.0.0/16"
    two["clusters"].append(second)
    two["federation"] = {"name": "both", "clusters": ["minimal", "second"]}  # sharing slurmdbd: one munge key
    assert _texts(lambda data: data["clusters"].reverse(), two) == [
        "accounting.host_cluster: minimal -> second  (not allowed)"
    ]
    # naming the same host explicitly changes nothing
    assert _texts(lambda data: data["accounting"].update(host_cluster="minimal"), two) == []


def test_the_first_instance_type_is_in_the_launch_template() -> None:
    def edit(data: dict[str, Any]) -> None:
        _pools(data)[0]["instance_types"] = ["c7i.xlarge", "c7i.large"]

    assert _texts(edit) == [
        "clusters[0].partitions[0].pools[0].instance_types[0]: c7i.large -> c7i.xlarge  (drain-and-replace a pool)",
        "clusters[0].partitions[0].pools[0].instance_types[1]: (absent) -> c7i.large  (reconfigure)",
    ]


def test_a_section_set_is_one_change() -> None:
    base = copy.deepcopy(MINIMAL)
    _pools(base)[0]["availability_zones"] = ["us-east-1a"]  # a capacity reservation is in one AZ

    def edit(data: dict[str, Any]) -> None:
        _pools(data)[0]["capacity_reservation"] = {"id": "cr-0123456789abcdef0"}

    (change,) = _changes(edit, base)
    assert format_path(change.path) == "clusters[0].partitions[0].pools[0].capacity_reservation"
    assert change.policy is Policy.RECONFIGURE
    assert change.text().endswith(': null -> {"id": "cr-0123456789abcdef0", "capacity_block": false}  (reconfigure)')


def test_switching_the_network_mode_is_one_not_allowed_change() -> None:
    def edit(data: dict[str, Any]) -> None:
        data["clusters"][0]["network"] = {
            "mode": "import",
            "vpc_id": "vpc-0123456789abcdef0",
            "subnets": [
                {"subnet_id": "subnet-0123456789abcdef0", "availability_zone": "us-east-1a", "cidr": "100.64.0.0/20"},
                {"subnet_id": "subnet-0123456789abcdef1", "availability_zone": "us-east-1b", "cidr": "100.64.16.0/20"},
            ],
        }

    (change,) = _changes(edit)
    assert (format_path(change.path), change.policy) == ("clusters[0].network", Policy.NOT_ALLOWED)


def test_tags_are_compared_key_by_key() -> None:
    def edit(data: dict[str, Any]) -> None:
        data["tags"] = {"owner": "hpc team"}
        data["clusters"][0]["tags"] = {"a.b": "1"}

    assert _texts(edit) == [
        'clusters[0].tags["a.b"]: (absent) -> 1  (none)',
        "tags.owner: (absent) -> hpc team  (none)",
    ]


def test_a_tag_edit_re_creates_placement_groups() -> None:
    grouped = copy.deepcopy(MINIMAL)
    _pools(grouped)[0]["placement_group"] = True
    _pools(grouped)[0]["availability_zones"] = ["us-east-1a"]
    changes = _changes(lambda data: data.update(tags={"owner": "x"}), grouped)
    assert [c.text() for c in changes] == [
        "tags.owner: (absent) -> x  (none)",
        "clusters[0].partitions[0].pools[0].placement_group: placement group re-created (tags changed)"
        "  (drain-and-replace a pool)",
    ]
    assert worst(changes) is Policy.DRAIN_AND_REPLACE


def test_storage_may_grow_but_not_shrink() -> None:
    ontap = copy.deepcopy(MINIMAL)
    ontap["clusters"][0]["storage"]["fsx_ontap"] = {"storage_capacity_gib": 2048}

    def grow(data: dict[str, Any]) -> None:
        data["clusters"][0]["storage"]["fsx_ontap"]["storage_capacity_gib"] = 4096

    def shrink(data: dict[str, Any]) -> None:
        data["clusters"][0]["storage"]["fsx_ontap"]["storage_capacity_gib"] = 1024

    (grown,) = _changes(grow, ontap)
    (shrunk,) = _changes(shrink, ontap)
    assert grown.policy is Policy.NONE
    assert shrunk.policy is Policy.NOT_ALLOWED and shrunk.reason.startswith("cannot shrink")


def test_named_items_of_shared_sections() -> None:
    with_qos = copy.deepcopy(MINIMAL)
    with_qos["qos"] = [{"name": "short", "priority": 1}]
    with_qos["licenses"] = [{"name": "matlab", "count": 10, "clusters": {"minimal": 50}}]

    def edit(data: dict[str, Any]) -> None:
        data["qos"].insert(0, {"name": "long"})
        data["qos"][1]["priority"] = 5
        data["licenses"][0]["clusters"]["minimal"] = 80

    assert _texts(edit, with_qos) == [
        "licenses[0].clusters.minimal: 50 -> 80  (reconfigure)",
        "qos[0]: added qos 'long'  (reconfigure)",
        "qos[1].priority: 1 -> 5  (reconfigure)",
    ]


def test_the_worst_policy_wins() -> None:
    def edit(data: dict[str, Any]) -> None:
        _pools(data)[0]["max_nodes"] = 20
        data["clusters"][0]["controller"] = {"instance_type": "c7i.xlarge"}

    changes = _changes(edit)
    assert [c.policy for c in changes] == [Policy.REPLACE_CONTROLLERS, Policy.RECONFIGURE]
    assert worst(changes) is Policy.REPLACE_CONTROLLERS


@pytest.mark.parametrize(
    ("value", "text"),
    [(16, "16"), ("c7i.large", "c7i.large"), (None, "null"), (True, "true"), ("true", '"true"'), ("", '""')],
)
def test_values_show_as_in_yaml(value: Any, text: str) -> None:
    assert show(value) == text
