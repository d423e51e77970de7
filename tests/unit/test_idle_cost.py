"""Idle monthly cost estimate (`elastic-slurm validate --cache`) and the deploy checks validate shares with synth."""

from __future__ import annotations

import ipaddress
from pathlib import Path

import pytest
import yaml

from cluster_config import ConfigInvalid, load
from cluster_config.idle_cost import HOURS_PER_MONTH, idle_cost
from cluster_config.loader import parse_yaml
from elastic_slurm.cli import main
from tests.unit.cache_fixture import fixture_cache, write_fixture_cache

EXAMPLES = Path(__file__).resolve().parents[2] / "cluster_config" / "examples"
CACHE = fixture_cache()


def on_demand(region: str, instance_type: str) -> float | None:
    info = CACHE.regions.get(region, {}).get(instance_type)
    return info.prices.on_demand if info is not None else None


def test_minimal_example_idles_at_a_controller_a_nat_gateway_and_the_smallest_database() -> None:
    estimate = idle_cost(load(EXAMPLES / "minimal.yaml"), on_demand)
    what = [item for item, _ in estimate.items]
    assert not estimate.unpriced
    assert not any("interface endpoints" in item for item in what)
    assert any("NAT gateway" in item for item in what)
    controller = on_demand("us-east-1", "c7i.large")
    assert controller is not None
    assert dict(estimate.items)["minimal: 1 controller(s) c7i.large"] == pytest.approx(controller * HOURS_PER_MONTH)
    assert dict(estimate.items)["accounting: RDS MariaDB db.t4g.micro"] == pytest.approx(0.016 * HOURS_PER_MONTH)
    assert estimate.total < 150  # the old minimal example idled at about $265/month


def test_always_on_nodes_fsx_and_aurora_floor_are_priced() -> None:
    estimate = idle_cost(load(EXAMPLES / "multi-az-gpu.yaml"), on_demand)
    items = dict(estimate.items)
    node = on_demand("us-east-1", "c7i.2xlarge")
    assert node is not None
    assert items["gpu: 2 always-on cpu-od node(s) c7i.2xlarge"] == pytest.approx(2 * node * HOURS_PER_MONTH)
    assert items["gpu: FSx for Lustre 1200 GiB"] == pytest.approx(168.0)
    assert items["accounting: Aurora Serverless v2 at its 0.5 ACU floor"] == pytest.approx(43.8)
    assert items["gpu: 7 interface endpoints x 3 AZs"] == pytest.approx(7 * 3 * 0.01 * HOURS_PER_MONTH)


def test_instance_types_missing_from_the_cache_are_listed_not_guessed() -> None:
    estimate = idle_cost(load(EXAMPLES / "minimal.yaml"), lambda _region, _itype: None)
    assert estimate.unpriced == ["minimal: 1 controller(s) c7i.large"]
    assert not any("controller(s)" in item for item, _ in estimate.items)


def test_validate_with_a_cache_prints_the_priced_total(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cache = write_fixture_cache(tmp_path / "cache.json")
    assert main(["validate", "--cache", str(cache), str(EXAMPLES / "minimal.yaml")]) == 0
    out = capsys.readouterr().out
    total = idle_cost(load(EXAMPLES / "minimal.yaml"), on_demand).total
    assert f"  estimated idle cost: ${total:,.0f}/month" in out
    assert "not priced" not in out


def test_validate_with_an_unreadable_cache_is_one_line_naming_the_option(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["validate", "--cache", str(tmp_path / "nope.json"), str(EXAMPLES / "minimal.yaml")])
    err = capsys.readouterr().err
    assert code != 0
    assert err.count("\n") == 1 and "--cache" in err and "Traceback" not in err


SSH_OPEN = """
clusters:
  - name: c1
    region: us-east-1
    network: {mode: create, availability_zones: [us-east-1a]}
    storage: {efs: {}}
    ssh_allowed_cidrs: [203.0.113.0/24, 0.0.0.0/0]
    partitions: [{name: cpu, pools: [{name: p, instance_types: [c7i.large], max_nodes: 2}]}]
accounting: {mode: none}
"""


def test_ssh_from_the_whole_internet_fails_validate_not_only_synth() -> None:
    with pytest.raises(ConfigInvalid) as info:
        parse_yaml(SSH_OPEN)
    paths = [error.path for error in info.value.errors]
    assert paths == [
        "clusters[0].ssh_allowed_cidrs[1]"
    ]  # ::/0: the whole IPv6 internet, refused even with ssh_allow_public_cidrs
    assert "whole internet" in str(info.value.errors[0])


def test_federation_members_with_overlapping_vpcs_are_rejected() -> None:
    data = yaml.safe_load((EXAMPLES / "federation.yaml").read_text(encoding="utf-8"))
    east = ipaddress.ip_network(data["clusters"][0]["network"]["vpc_cidr"])
    data["clusters"][1]["network"]["vpc_cidr"] = str(next(east.subnets(prefixlen_diff=1)))  # inside east's range
    text = yaml.safe_dump(data)
    with pytest.raises(ConfigInvalid) as info:
        parse_yaml(text)
    assert [str(e) for e in info.value.errors] == [
        "clusters[1].network: overlaps the network of federation member 'east'; federation members are joined by "
        "VPC peering, which needs disjoint address ranges"
    ]
