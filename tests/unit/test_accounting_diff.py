"""The pure sacctmgr diff: desired state from the config, and the commands that reach it (in a safe order)."""

from __future__ import annotations

from typing import Any

import pytest

from cluster_config import ElasticSlurmConfig, parse
from slurm_plugin.accounting.diff import (
    MANAGED_MARK,
    Account,
    AccountingState,
    Resource,
    SlurmVersion,
    desired_state,
    diff,
)
from slurm_plugin.accounting.sacctmgr import SacctmgrError, parse_version

V22 = SlurmVersion(22, 5)
V23 = SlurmVersion(23, 2)


_CIDRS = {"east": "127.16.0.0/16", "west": "127.17.0.0/16"}


def cluster(name: str) -> dict[str, Any]:
    # federation members are peered: disjoint VPCs
    cidr = _CIDRS.get(name, "127.18.0.0/16")
    return {
        "name": name,
        "region": "us-east-1",
        "storage": {"efs": {}},
        "network": {"mode": "create", "vpc_cidr": cidr, "availability_zones": ["us-east-1a"]},
        "partitions": [{"name": "p", "pools": [{"name": "c", "instance_types": ["c7i.large"], "max_nodes": 1}]}],
    }


def make_config(**extra: Any) -> ElasticSlurmConfig:
    """east and west sharing accounting, so members of one federation (one munge key, peered VPCs)."""
    data: dict[str, Any] = {
        "clusters": [cluster("east"), cluster("west")],
        "accounting": {"mode": "create"},
        "federation": {"name": "eda", "clusters": ["east", "west"]},
    }
    data.update(extra)
    return parse(data)


# an on-prem cluster: in the accounting database, never a federation member
CAMPUS = {"name": "campus", "burst_to": ["east"], "controller_cidrs": ["127.20.0.5/32"]}


FULL = make_config(
    licenses=[
        {
            "name": "vcs",
            "count": 50,
            "server_type": "flexlm",
            "server": "27000@lic1",
            "clusters": {"east": 60, "west": 40},
        },
        {"name": "matlab", "count": 10},
    ],
    federation={"name": "eda", "clusters": ["east", "west"], "cluster_features": {"east": ["aws", "onprem"]}},
    accounts=[
        {"name": "chip", "description": "Chip Design", "users": ["alice", "bob"]},
        {"name": "ml", "users": ["bob"]},
    ],
    qos=[{"name": "interactive", "priority": 100, "preempt": ["normal"], "preempt_mode": "requeue"}],
)


def argvs(current: AccountingState, desired: AccountingState, version: SlurmVersion = V22) -> list[str]:
    return [" ".join(change.argv) for change in diff(current, desired, version)]


def test_empty_database_gets_everything_in_dependency_order() -> None:
    commands = argvs(AccountingState(), desired_state(FULL))
    kinds = [" ".join(c.split()[:2]) for c in commands]
    assert kinds.index("add cluster") < kinds.index("add qos") < kinds.index("add account") < kinds.index("add user")
    assert kinds.index("add user") < kinds.index("add resource") < kinds.index("add federation")
    assert "add federation eda clusters=east,west" in commands


def test_desired_state_already_in_place_produces_no_changes() -> None:
    desired = desired_state(FULL)
    assert argvs(desired, desired) == []


def test_licenses_become_remote_licenses_named_after_the_server_host() -> None:
    resources = desired_state(FULL).resources
    assert resources["vcs@lic1"].allowed == {"east": 60, "west": 40}
    assert resources["vcs@lic1"].server_type == "flexlm"
    assert resources["matlab@slurmdb"].server_type == ""


def test_license_without_shares_is_split_evenly_between_clusters() -> None:
    assert desired_state(FULL).resources["matlab@slurmdb"].allowed == {"east": 50, "west": 50}


def test_new_license_with_different_shares_is_added_in_one_command_per_share() -> None:
    commands = [c for c in argvs(AccountingState(), desired_state(FULL)) if "vcs" in c]
    assert commands[0].startswith("add resource name=vcs server=lic1 type=license count=50")
    assert "servertype=flexlm" in commands[0]
    assert f"description={MANAGED_MARK}" in commands[0]
    assert commands[0].endswith("cluster=west percentallowed=40")
    assert commands[1] == "add resource name=vcs server=lic1 cluster=east percentallowed=60"


def test_moving_shares_between_clusters_shrinks_before_it_grows() -> None:
    desired = desired_state(FULL)
    vcs = desired.resources["vcs@lic1"].model_copy(update={"allowed": {"east": 40, "west": 60}})
    current = desired.model_copy(update={"resources": {**desired.resources, "vcs@lic1": vcs}})
    commands = argvs(current, desired)
    assert commands == [
        "modify resource where name=vcs server=lic1 cluster=west set percentallowed=40",
        "modify resource where name=vcs server=lic1 cluster=east set percentallowed=60",
    ]


def test_cluster_dropped_from_a_license_loses_its_share() -> None:
    desired = desired_state(FULL)
    vcs = desired.resources["vcs@lic1"].model_copy(update={"allowed": {"east": 60, "west": 40, "old": 0}})
    current = desired.model_copy(update={"resources": {**desired.resources, "vcs@lic1": vcs}})
    assert argvs(current, desired) == ["delete resource where name=vcs server=lic1 cluster=old"]


def test_synced_license_count_is_left_to_the_license_sync() -> None:
    desired = desired_state(FULL)
    synced = desired.resources["vcs@lic1"].model_copy(update={"count": 38})
    current = desired.model_copy(update={"resources": {**desired.resources, "vcs@lic1": synced}})
    assert argvs(current, desired) == []


def test_static_license_count_follows_the_config() -> None:
    desired = desired_state(FULL)
    old = desired.resources["matlab@slurmdb"].model_copy(update={"count": 4})
    current = desired.model_copy(update={"resources": {**desired.resources, "matlab@slurmdb": old}})
    assert argvs(current, desired) == ["modify resource where name=matlab server=slurmdb set count=10"]


def test_license_removed_from_the_config_is_deleted_only_if_ours() -> None:
    desired = desired_state(FULL)
    ours = Resource(name="gone", server="lic1", count=1, description=MANAGED_MARK)
    theirs = Resource(name="manual", server="lic9", count=1, description="added by hand")
    current = desired.model_copy(update={"resources": {**desired.resources, ours.key: ours, theirs.key: theirs}})
    assert argvs(current, desired) == ["delete resource where name=gone server=lic1"]


def test_slurm_23_02_and_later_shares_are_percentages_named_allowed() -> None:
    # `allowed=` replaced `percentallowed=` but stays a percentage without Flags=Absolute: slurmctld 26.05 turned
    # allowed=50 of a 50-license resource into 25 licenses (tests/e2e/test_accounting_real.py runs it for real)
    commands = [c for c in argvs(AccountingState(), desired_state(FULL), V23) if "name=vcs" in c]
    assert commands[0].endswith("cluster=west allowed=40")
    assert commands[1].endswith("cluster=east allowed=60")


def test_cluster_features_are_managed_only_for_federation_members() -> None:
    features = desired_state(FULL).cluster_features
    assert features == {"east": ["aws", "onprem"], "west": []}
    with_site = desired_state(make_config(onprem_clusters=[CAMPUS])).cluster_features
    assert with_site == {"east": [], "west": [], "campus": None}


def test_features_set_by_hand_on_a_cluster_outside_the_federation_are_kept() -> None:
    desired = desired_state(make_config(onprem_clusters=[CAMPUS]))
    current = desired.model_copy(update={"cluster_features": {"east": [], "west": [], "campus": ["manual"]}})
    assert argvs(current, desired) == []


def test_federation_member_change_modifies_the_federation() -> None:
    desired = desired_state(FULL)
    current = desired.model_copy(update={"federations": {"eda": ["east"]}})
    assert argvs(current, desired) == ["modify federation where name=eda set clusters=east,west"]


def test_description_compared_like_sacctmgr_stores_it_lowercased() -> None:
    desired = desired_state(FULL)
    stored = Account(name="chip", description="chip design", organization="chip")
    current = desired.model_copy(update={"accounts": {**desired.accounts, "chip": stored}})
    assert argvs(current, desired) == []


def test_user_default_account_is_the_first_account_listing_them() -> None:
    desired = desired_state(FULL)
    assert desired.users == {"alice": "chip", "bob": "chip"}
    current = desired.model_copy(update={"users": {"alice": "chip", "bob": "ml"}})
    assert argvs(current, desired) == ["modify user where name=bob set defaultaccount=chip"]


def test_missing_user_association_is_added_on_the_missing_clusters_only() -> None:
    desired = desired_state(FULL)
    current = desired.model_copy(
        update={"associations": [a for a in desired.associations if a != ("west", "ml", "bob")]}
    )
    assert argvs(current, desired) == ["add user bob account=ml cluster=west defaultaccount=chip"]


def test_qos_preempt_list_can_be_cleared() -> None:
    desired = desired_state(make_config(qos=[{"name": "interactive", "priority": 100}]))
    current = desired.model_copy(
        update={"qos": {"interactive": desired.qos["interactive"].model_copy(update={"preempt": ("normal",)})}}
    )
    assert argvs(current, desired) == ["modify qos where name=interactive set preempt="]


def test_nothing_outside_the_config_is_ever_deleted() -> None:
    desired = desired_state(make_config())
    current = AccountingState(
        clusters=["east", "west", "legacy"],
        federations={"old": ["legacy"]},
        accounts={"x": Account(name="x", description="x", organization="x")},
        users={"carol": "x"},
    )
    assert not [c for c in argvs(current, desired) if c.startswith("delete")]


@pytest.mark.parametrize(
    ("text", "version"), [("slurm 22.05.8\n", V22), ("slurm 23.02.7", V23), ("slurm-wlm 24.05.4", SlurmVersion(24, 5))]
)
def test_version_is_read_from_sacctmgr_version(text: str, version: SlurmVersion) -> None:
    assert parse_version(text) == version


def test_unreadable_version_is_a_one_line_error() -> None:
    with pytest.raises(SacctmgrError, match="cannot read the Slurm version"):
        parse_version("sacctmgr: error: resolve_ctls_from_dns_srv")


def test_every_account_may_use_every_qos_of_the_config_and_grants_are_never_revoked() -> None:
    # AccountingStorageEnforce=qos: without the grant, `--qos=interactive` is "Invalid qos specification"
    config = make_config(accounts=[{"name": "eng", "users": ["alice"]}], qos=[{"name": "interactive", "preempt": []}])
    want = desired_state(config)
    assert want.account_qos == {"east/eng": ["interactive", "normal"], "west/eng": ["interactive", "normal"]}
    have = want.model_copy(update={"account_qos": {"east/eng": ["normal"], "west/eng": ["interactive", "normal", "x"]}})
    changes = [c.argv for c in diff(have, want, V23)]
    assert changes == [("modify", "account", "where", "name=eng", "cluster=east", "set", "qos+=interactive")]
    assert diff(want, want, V23) == []
