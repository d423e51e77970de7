"""The idle cost estimate prices the VPC flow logs a created VPC writes even with no job running
(cluster_config/idle_cost.py: CloudWatch Logs' vended-log delivery price at the documented idle-traffic assumption)."""

from __future__ import annotations

from pathlib import Path

import pytest

from cluster_config import load
from cluster_config.idle_cost import (
    FLOW_LOG_INGEST_GB,
    FLOW_LOG_RECORD_BYTES,
    FLOW_LOG_RECORDS_PER_INSTANCE_HOUR,
    HOURS_PER_MONTH,
    LOGS_STORAGE_GB_MONTH,
    always_on_instances,
    idle_cost,
)
from cluster_config.model import NewNetwork

EXAMPLES = Path(__file__).resolve().parents[2] / "cluster_config" / "examples"
CONFIGS = Path(__file__).resolve().parents[1] / "cdk" / "configs"


def _flow_log_items(path: Path) -> dict[str, float]:
    estimate = idle_cost(load(path), lambda _region, _itype: 0.1)
    return {what: usd for what, usd in estimate.items if "VPC flow logs" in what}


def _per_instance_month() -> float:
    gb = FLOW_LOG_RECORDS_PER_INSTANCE_HOUR * HOURS_PER_MONTH * FLOW_LOG_RECORD_BYTES / 1e9
    return gb * (FLOW_LOG_INGEST_GB + LOGS_STORAGE_GB_MONTH)


def test_a_created_vpc_prices_its_flow_logs_by_the_always_on_instances() -> None:
    (what, usd), *more = _flow_log_items(EXAMPLES / "minimal.yaml").items()
    assert not more
    assert what.startswith("minimal: VPC flow logs") and "1 always-on instance(s)" in what
    assert usd == pytest.approx(_per_instance_month())
    assert 0.01 < usd < 5  # cents to dollars a month per idle instance, not the NAT gateway's tens of dollars


def test_flow_logs_grow_with_always_on_nodes_and_login_nodes() -> None:
    config = load(EXAMPLES / "multi-az-gpu.yaml")
    [cluster] = config.clusters
    instances = always_on_instances(cluster)
    pools = sum(p.min_nodes for part in cluster.partitions for p in part.pools)
    assert instances == cluster.controller.count + sum(login.count for login in cluster.login_nodes) + pools
    assert pools > 0  # the example keeps always-on nodes: more flows than the controllers alone
    [usd] = _flow_log_items(EXAMPLES / "multi-az-gpu.yaml").values()
    assert usd == pytest.approx(instances * _per_instance_month())


def test_an_imported_network_has_no_flow_logs_of_ours() -> None:
    assert _flow_log_items(CONFIGS / "imported-network-all-storage.yaml") == {}


def test_every_created_home_vpc_of_a_federation_has_its_line() -> None:
    config = load(EXAMPLES / "federation.yaml")
    names = {c.name for c in config.clusters if isinstance(c.network, NewNetwork)}
    assert len(names) == 2
    items = _flow_log_items(EXAMPLES / "federation.yaml")
    assert {what.split(":")[0] for what in items} == names
