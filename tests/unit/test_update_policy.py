"""The update-policy table (cluster_config/update_policy.py) names every field of the config model, once, and the
most specific rule wins; the model walk sees optional and union sections, list items and mapping keys."""

from __future__ import annotations

from typing import Annotated, Literal

import pytest
from pydantic import BaseModel, Field

from cluster_config.config_paths import expand_braces, format_path, generalize, model_paths, parse_pattern
from cluster_config.model import ElasticSlurmConfig, Pool
from cluster_config.update_policy import MISSING_RULE, RULES, Policy, compiled, rule_for, stale_patterns, unpoliced


def _policy(pattern: str) -> Policy:
    return rule_for(parse_pattern(pattern)).policy


def test_every_field_of_the_model_has_an_explicit_update_policy() -> None:
    missing = unpoliced()
    assert not missing, (
        "no update policy for: " + ", ".join(missing) + " — decide one in cluster_config/update_policy.py RULES "
        "(what does the field feed: the config object, a launch template, a resource property?)"
    )


def test_a_new_field_without_a_policy_is_named() -> None:
    class Extended(ElasticSlurmConfig):
        brand_new: int = 0

    assert unpoliced(Extended) == ["brand_new"]


def test_no_rule_names_a_field_that_does_not_exist() -> None:
    assert stale_patterns() == []


def test_no_pattern_is_given_twice() -> None:
    patterns = [c.pattern for c in compiled()]
    assert len(patterns) == len(set(patterns)), sorted(p for p in patterns if patterns.count(p) > 1)


def test_every_rule_explains_itself_in_one_line() -> None:
    for rule in RULES:
        assert rule.reason and "\n" not in rule.reason, rule.pattern
    for policy in Policy:
        assert policy.label and policy.meaning and "\n" not in policy.meaning


def test_the_most_specific_pattern_wins() -> None:
    first = ("clusters", 0, "partitions", 0, "pools", 2, "instance_types", 0)
    second = ("clusters", 0, "partitions", 0, "pools", 2, "instance_types", 1)
    assert rule_for(first).policy is Policy.DRAIN_AND_REPLACE
    assert rule_for(second).policy is Policy.RECONFIGURE


def test_a_path_no_rule_names_is_not_allowed() -> None:
    assert rule_for(("clusters", 0, "no_such_field")) is MISSING_RULE
    assert MISSING_RULE.policy is Policy.NOT_ALLOWED


@pytest.mark.parametrize(
    ("pattern", "policy"),
    [
        ("clusters[].partitions[].pools[].max_nodes", Policy.RECONFIGURE),
        ("clusters[].partitions[].pools[]", Policy.RECONFIGURE),
        ("qos[]", Policy.RECONFIGURE),
        ("licenses[].clusters.<key>", Policy.RECONFIGURE),
        ("clusters[].partitions[].pools[].placement_group", Policy.DRAIN_AND_REPLACE),
        ("clusters[].partitions[].pools[].gpu", Policy.DRAIN_AND_REPLACE),
        ("clusters[].partitions[].pools[].gpu.health_check", Policy.RECONFIGURE),
        ("clusters[].controller.instance_type", Policy.REPLACE_CONTROLLERS),
        ("accounting.endpoint", Policy.REPLACE_CONTROLLERS),
        ("tags.<key>", Policy.NONE),
        ("clusters[].tags.<key>", Policy.NONE),
        ("clusters[].network.interface_endpoints", Policy.NONE),
        ("clusters[].name", Policy.NOT_ALLOWED),
        ("clusters[].region", Policy.NOT_ALLOWED),
        ("clusters[].network", Policy.NOT_ALLOWED),
        ("clusters[].network.vpc_cidr", Policy.NOT_ALLOWED),
        ("clusters[].network.subnets[].cidr", Policy.NOT_ALLOWED),
        ("accounting.mode", Policy.NOT_ALLOWED),
        ("clusters[]", Policy.NOT_ALLOWED),
    ],
)
def test_decisions(pattern: str, policy: Policy) -> None:
    assert _policy(pattern) is policy


def test_policies_are_ordered_by_disruption() -> None:
    assert list(Policy) == sorted(Policy)
    assert max(Policy.RECONFIGURE, Policy.NOT_ALLOWED, Policy.NONE) is Policy.NOT_ALLOWED
    assert Policy.DRAIN_AND_REPLACE.label == "drain-and-replace a pool"


class _Leaf(BaseModel):
    size: int = 1


class _A(BaseModel):
    kind: Literal["a"]
    a: str = ""


class _B(BaseModel):
    kind: Literal["b"]
    b: list[str] = []


class _Root(BaseModel):
    optional: _Leaf | None = None
    either: Annotated[_A | _B, Field(discriminator="kind")]
    items: list[_Leaf] = []
    groups: dict[str, list[str]] = {}
    maybe_list: list[int] | None = None
    scalar: float | None = None


def test_the_walk_covers_sections_unions_list_items_and_keys() -> None:
    assert [format_path(p) for p in model_paths(_Root)] == [
        "optional",
        "optional.size",
        "either",
        "either.kind",
        "either.a",
        "either.b[]",
        "items[]",
        "items[].size",
        "groups.<key>[]",
        "maybe_list[]",
        "scalar",
    ]


def test_pool_paths_include_list_items_of_scalars() -> None:
    paths = {format_path(p) for p in model_paths(Pool)}
    assert {"instance_types[]", "gpu", "gpu.health_check", "max_nodes"} <= paths


def test_patterns_parse_print_and_generalize() -> None:
    assert expand_braces("a.{b,c[]}.d") == ["a.b.d", "a.c[].d"]
    pattern = parse_pattern("clusters[].partitions[].pools[].instance_types[0]")
    assert format_path(pattern) == "clusters[].partitions[].pools[].instance_types[0]"
    assert format_path(generalize(pattern)) == "clusters[].partitions[].pools[].instance_types[]"
    assert parse_pattern("tags.<key>") == ("tags", "<key>")
    with pytest.raises(ValueError, match="bad path pattern"):
        parse_pattern("clusters[x]")
