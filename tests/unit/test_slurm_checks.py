"""cluster_config/slurm_checks.py through `parse` (what `validate` runs): a site's SlurmctldParameters, prolog timeouts,
the node count TreeWidth allows and the QOS grace time, each refused with one line naming its YAML path."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from cluster_config import ConfigInvalid, parse

POOL = {"name": "c7i", "instance_types": ["c7i.large"], "max_nodes": 4}
CLUSTER: dict[str, Any] = {
    "name": "small",
    "region": "us-east-1",
    "storage": {"efs": {}},
    "network": {"mode": "create", "availability_zones": ["us-east-1a"]},
    "partitions": [{"name": "cpu", "default": True, "pools": [POOL]}],
}


def config(**cluster_changes: Any) -> dict[str, Any]:
    cluster = copy.deepcopy(CLUSTER)
    cluster.update(cluster_changes)
    return {"clusters": [cluster]}


def problems(data: dict[str, Any]) -> list[str]:
    """The one-line errors of `data` (empty: valid)."""
    try:
        parse(data, "checks.yaml")
    except ConfigInvalid as exc:
        return [str(error) for error in exc.errors]
    return []


def test_site_slurmctld_parameters_are_accepted_beside_the_products() -> None:
    value = "conmgr_threads=4,enable_rpc_queue,power_save_interval=1,enable_configless"
    assert problems(config(slurm_settings={"SlurmctldParameters": value})) == []


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("enable_rpc_queue,power_save_interval=10", "'power_save_interval=10' conflicts with elastic-slurm's"),
        ("CLOUD_DNS", "'CLOUD_DNS' is not allowed: the plugin tells slurmctld each node's address"),
    ],
)
def test_a_slurmctld_parameter_against_the_plugin_is_one_line_naming_the_key(value: str, message: str) -> None:
    (error,) = problems(config(slurm_settings={"slurmctldparameters": value}))
    assert error.startswith("clusters[0].slurm_settings.slurmctldparameters: ") and message in error
    assert "\n" not in error


@pytest.mark.parametrize(
    ("settings", "expected"),
    [
        (
            {"PrologEpilogTimeout": 300},
            "PrologEpilogTimeout: 300 s must exceed clusters[].slurm.resume_timeout (600 s)",
        ),
        ({"PrologTimeout": 600}, "PrologTimeout: 600 s must exceed"),
        ({"PrologTimeout": "10min"}, "PrologTimeout: '10min' is not a number of seconds"),
        ({"PrologTimeout": True}, "PrologTimeout: 'yes' is not a number of seconds"),
        # PrologTimeout replaces PrologEpilogTimeout for prologs: the short epilog timeout is fine
        ({"PrologTimeout": 900, "PrologEpilogTimeout": 30}, None),
        ({"PrologEpilogTimeout": 601}, None),
        ({"EpilogTimeout": 30}, None),  # epilogs run after the job: nothing waits for a boot there
    ],
)
def test_prolog_timeouts_must_outlast_the_boot_the_prolog_waits_for(
    settings: dict[str, Any], expected: str | None
) -> None:
    found = problems(config(slurm_settings=settings))
    if expected is None:
        assert found == []
    else:
        (error,) = found
        assert error.startswith("clusters[0].slurm_settings.") and expected in error


def test_without_early_start_no_prolog_waits_for_a_boot() -> None:
    settings = {"PrologEpilogTimeout": 60}
    assert problems(config(slurm_settings=settings, slurm={"early_start": False})) == []


def test_a_longer_resume_timeout_makes_the_same_prolog_timeout_too_short() -> None:
    settings = {"PrologEpilogTimeout": 900}
    assert problems(config(slurm_settings=settings)) == []
    (error,) = problems(config(slurm_settings=settings, slurm={"resume_timeout": 1200}))
    assert "900 s must exceed clusters[].slurm.resume_timeout (1200 s)" in error


# an imported VPC with addresses for far more than 65533 nodes: only TreeWidth's limit is left to hit
BIG_NETWORK = {
    "mode": "import",
    "vpc_id": "vpc-0123456789abcdef0",
    "subnets": [
        {"subnet_id": f"subnet-0000000{i}", "availability_zone": "us-east-1a", "cidr": f"127.{i}.0.0/16"}
        for i in range(1, 3)
    ],
}


def test_node_count_stays_within_tree_width() -> None:
    pools = [{"name": f"p{i}", "instance_types": ["c7i.large"], "max_nodes": 10000} for i in range(7)]
    partitions = [{"name": "cpu", "default": True, "pools": pools}]
    (error,) = problems(config(partitions=partitions, network=BIG_NETWORK))
    assert error.startswith("clusters[0].partitions: 70000 nodes (the pools' max_nodes added up) exceed 65533")
    pools[0]["max_nodes"] = 5533  # 60000 + 5533 = 65533: the largest that fits
    assert problems(config(partitions=partitions, network=BIG_NETWORK)) == []


QOS = [{"name": "high", "preempt": ["normal"]}]


def two_clusters(first: dict[str, Any], second: dict[str, Any], **top: Any) -> dict[str, Any]:
    """east and west sharing slurmdbd (and so its QOS): federation members, in disjoint VPCs."""
    east = copy.deepcopy(CLUSTER) | {"name": "east", "preemption": first}
    west = copy.deepcopy(CLUSTER) | {"name": "west", "preemption": second}
    east["network"] = {"mode": "create", "vpc_cidr": "127.16.0.0/16", "availability_zones": ["us-east-1a"]}
    west["network"] = {"mode": "create", "vpc_cidr": "127.17.0.0/16", "availability_zones": ["us-east-1a"]}
    return {"clusters": [east, west], "federation": {"name": "fed", "clusters": ["east", "west"]}, **top}


def test_qos_grace_time_is_one_value_for_the_shared_qos() -> None:
    qos30 = {"type": "qos", "grace_time": 30}
    accounting = {"accounting": {"mode": "create"}, "qos": QOS}
    assert problems(two_clusters(qos30, qos30, **accounting)) == []
    # partition_priority keeps its grace time on its own partitions
    assert problems(two_clusters(qos30, {"type": "partition_priority", "grace_time": 5}, **accounting)) == []
    (error,) = problems(two_clusters(qos30, {"type": "qos", "grace_time": 60}, **accounting))
    assert error.startswith("clusters[1].preemption.grace_time: 60 differs from clusters[0]'s 30")


def test_qos_grace_time_needs_slurmdbd_and_a_preempted_qos() -> None:
    qos30 = {"type": "qos", "grace_time": 30}
    (error,) = problems(config(preemption=qos30))
    assert error.startswith("clusters[0].preemption.grace_time: with type qos the grace time is set on the QOS in")
    (error,) = problems(config(preemption=qos30) | {"accounting": {"mode": "create"}, "qos": [{"name": "high"}]})
    assert "no qos[] preempts another" in error
    # no grace time: nothing to carry
    assert problems(config(preemption={"type": "qos"})) == []


DIRECTORY = {
    "ldap_uri": ["ldaps://ldap.example.com"],
    "search_base": "dc=example,dc=com",
    "bind_dn": "cn=reader,dc=example,dc=com",
    "bind_password_secret_arn": "arn:aws:secretsmanager:us-east-1:111122223333:secret:ldap-AbCdEf",
    "pam_slurm_adopt": True,
}


def test_a_sites_prolog_flags_keep_contain_while_pam_slurm_adopt_is_on() -> None:
    """pam_slurm_adopt adopts SSH sessions into the job's extern step, which only PrologFlags=Contain creates; a
    site's PrologFlags replaces the rendered line, so it must keep the flag."""
    found = problems(config(directory=DIRECTORY, slurm_settings={"PrologFlags": "X11"}))
    assert found == [
        "clusters[0].slurm_settings.PrologFlags: must include Contain while directory.pam_slurm_adopt is on (the "
        "module adopts SSH sessions into the job's extern step, which only PrologFlags=Contain creates)"
    ]
    assert problems(config(directory=DIRECTORY, slurm_settings={"prologflags": "x11,Contain"})) == []
    assert (
        problems(config(directory={**DIRECTORY, "pam_slurm_adopt": False}, slurm_settings={"PrologFlags": "X11"})) == []
    )
