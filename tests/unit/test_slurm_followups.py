"""Two follow-ups of issue 31: keys of one meaning replace each other (a site's PropagateResourceLimits drops the
product's PropagateResourceLimitsExcept=MEMLOCK line, cluster_config/slurm_settings.py EXCLUSIVE), and the update
table says where `preemption.grace_time` lands with `type: qos` (cluster_config/update_policy.py)."""

from __future__ import annotations

import pytest

from cluster_config.config_paths import parse_pattern
from cluster_config.slurm_settings import drop_replaced, overridden
from cluster_config.update_policy import Policy, rule_for
from tests.unit.test_render import render_small

PRODUCT = ["PropagateResourceLimitsExcept=MEMLOCK", "LaunchParameters=use_interactive_step"]


@pytest.mark.parametrize("key", ["PropagateResourceLimits", "propagateresourcelimits", "PropagateResourceLimitsExcept"])
def test_a_sites_propagation_key_replaces_the_products_line(key: str) -> None:
    assert drop_replaced(PRODUCT, {key: "NONE"}) == ["LaunchParameters=use_interactive_step"]
    assert overridden("PropagateResourceLimitsExcept", {key: "NONE"})
    assert overridden("PropagateResourceLimits", {key: "NONE"})


def test_other_keys_keep_the_products_line() -> None:
    assert drop_replaced(PRODUCT, {"SchedulerParameters": "bf_continue"}) == PRODUCT
    assert not overridden("PropagateResourceLimitsExcept", {"DefMemPerNode": 1024})


def test_the_rendered_slurm_conf_has_one_propagation_line_either_way() -> None:
    for settings, expected in (
        ({}, ["PropagateResourceLimitsExcept=MEMLOCK"]),
        ({"PropagateResourceLimits": "NONE"}, ["PropagateResourceLimits=NONE"]),
        ({"propagateresourcelimitsexcept": "NPROC"}, ["propagateresourcelimitsexcept=NPROC"]),
    ):
        lines = render_small(slurm_settings=settings).slurm_conf.splitlines()
        assert [line for line in lines if line.lower().startswith("propagateresourcelimits")] == expected


def test_grace_time_rule_names_the_qos_path() -> None:
    rule = rule_for(parse_pattern("clusters[0].preemption.grace_time"))
    assert rule.policy == Policy.RECONFIGURE
    assert (
        "with type qos: the preempted QOS's GraceTime, set by slurm-accounting-apply at the reconfigure" in rule.reason
    )
    assert rule_for(parse_pattern("clusters[0].preemption.type")).reason == "rendered into slurm.conf"
