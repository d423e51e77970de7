"""Pools launching into a capacity reservation: the config rules (one type, one AZ, On-Demand) with their exact
error lines, and the reservation reaching the plugin's manifest and the controller's launch permissions."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from cluster_config import ConfigInvalid, parse
from slurm_plugin.render.manifest import placeholder_infra, pool_manifest
from stacks.iam_policies import ArnScope, RegionTarget, fleet_statements

POOL: dict[str, Any] = {
    "name": "p5",
    "instance_types": ["p5.48xlarge"],
    "availability_zones": ["us-east-1a"],
    "max_nodes": 4,
    "gpu": {},
    "capacity_reservation": {"id": "cr-0123456789abcdef0", "capacity_block": True},
}


def config(**pool_changes: Any) -> Any:
    pool = {**copy.deepcopy(POOL), **pool_changes}
    pool = {key: value for key, value in pool.items() if value is not None}  # None: leave the key out
    cluster = {
        "name": "ml",
        "region": "us-east-1",
        "network": {"mode": "create", "availability_zones": ["us-east-1a", "us-east-1b"]},
        "storage": {"efs": {}},
        "partitions": [{"name": "gpu", "pools": [pool]}],
    }
    return parse({"clusters": [cluster]}, "ml.yaml")


def test_the_reservation_reaches_the_plugins_manifest() -> None:
    cluster = config().cluster("ml")
    pool = pool_manifest(cluster, "gpu", cluster.partitions[0].pools[0], placeholder_infra(cluster))
    assert (pool.capacity_reservation_id, pool.capacity_block) == ("cr-0123456789abcdef0", True)


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        (
            {"instance_types": ["p5.48xlarge", "p4d.24xlarge"]},
            "a capacity reservation holds one instance type; the pool lists 2",
        ),
        ({"availability_zones": None}, "a capacity reservation is in one availability zone; the pool may use 2"),
        ({"purchase_option": "spot"}, "capacity reservations are On-Demand capacity; purchase_option is 'spot'"),
    ],
)
def test_a_reservation_needs_one_type_one_az_and_on_demand(changes: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigInvalid) as caught:
        config(**changes)
    assert [str(e) for e in caught.value.errors] == [
        f"clusters[0].partitions[0].pools[0].capacity_reservation: {message}"
    ]


def test_a_bad_reservation_id_is_refused() -> None:
    with pytest.raises(ConfigInvalid) as caught:
        config(capacity_reservation={"id": "reservation-1"})
    (error,) = caught.value.errors
    assert str(error).startswith("clusters[0].partitions[0].pools[0].capacity_reservation.id: ")


def test_the_controller_may_launch_into_the_regions_capacity_reservations() -> None:
    scope = ArnScope("aws", "123456789012", "us-east-1")
    targets = [RegionTarget("us-east-1", "vpc-1", ["lt-1"], "arn:aws:iam::123456789012:role/compute")]
    reserved = "arn:aws:ec2:us-east-1:*:capacity-reservation/*"  # any account's: shared reservations too
    launching = [s for s in fleet_statements(scope, "ml", targets) if reserved in s["Resource"]]
    assert sorted(a for s in launching for a in s["Action"]) == ["ec2:CreateFleet", "ec2:RunInstances"]
