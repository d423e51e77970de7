"""Launches into a capacity reservation (issue 15): a pool with `capacity_reservation` launches with RunInstances
targeting that reservation — and, for a Capacity Block for ML, with market type capacity-block — against the emulated
EC2; pools without one send neither."""

from __future__ import annotations

import json
from pathlib import Path

from localcloud.aws.emulated_aws import EmulatedAws
from slurm_plugin.manifest import Manifest
from slurm_plugin.powersave.launcher import resume_nodes
from tests.aws.plugin_env import FakeSlurm, ec2_for, live_instances, rid

RESERVATION = "cr-0123456789abcdef0"


def _run_calls(aws: EmulatedAws, log: Path, manifest: Manifest, nodes: list[str]) -> list[dict[str, str]]:
    aws.log_requests(log)
    try:
        resume_nodes(manifest, nodes, [], ec2_for(aws), FakeSlurm(), rid("cr"))
    finally:
        aws.log_requests(None)
    entries = [json.loads(line) for line in log.read_text().splitlines()]
    return [e["params"] for e in entries if e["action"] == "RunInstances"]


def _reserved(manifest: Manifest, capacity_block: bool) -> Manifest:
    update = {"capacity_reservation_id": RESERVATION, "capacity_block": capacity_block}
    pools = [p.model_copy(update=update) if p.pool == "g5" else p for p in manifest.pools]
    return manifest.model_copy(update={"pools": pools})


def test_a_reserved_pool_launches_into_its_reservation(aws: EmulatedAws, manifest: Manifest, tmp_path: Path) -> None:
    calls = _run_calls(aws, tmp_path / "r.jsonl", _reserved(manifest, False), ["gpu-g5-1", "gpu-g5-2"])
    assert calls
    for call in calls:
        assert call["CapacityReservationSpecification.CapacityReservationTarget.CapacityReservationId"] == RESERVATION
        assert "InstanceMarketOptions.MarketType" not in call
    assert len(live_instances(aws, manifest.cluster)) == 2


def test_a_capacity_block_pool_launches_with_market_type_capacity_block(
    aws: EmulatedAws, manifest: Manifest, tmp_path: Path
) -> None:
    calls = _run_calls(aws, tmp_path / "b.jsonl", _reserved(manifest, True), ["gpu-g5-3"])
    assert calls
    for call in calls:
        assert call["CapacityReservationSpecification.CapacityReservationTarget.CapacityReservationId"] == RESERVATION
        assert call["InstanceMarketOptions.MarketType"] == "capacity-block"
    assert len(live_instances(aws, manifest.cluster)) == 1


def test_pools_without_a_reservation_target_none(aws: EmulatedAws, manifest: Manifest, tmp_path: Path) -> None:
    calls = _run_calls(aws, tmp_path / "n.jsonl", manifest, ["gpu-g5-4"])
    assert calls and not any(key.startswith("CapacityReservationSpecification") for call in calls for key in call)
