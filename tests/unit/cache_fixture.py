"""The test instance cache, built with the production converters from real DescribeInstanceTypes shapes.

fixtures/ec2_instance_types.json holds trimmed DescribeInstanceTypes items for every type the example configs use,
a spot price history (us-east-1 and us-west-2 AZs) and on-demand list prices.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

from slurm_plugin.instance_cache import InstanceCache, InstanceTypeInfo, Prices
from slurm_plugin.instance_cache_aws import latest_spot_prices, type_info_from_api

FIXTURE = Path(__file__).parent / "fixtures" / "ec2_instance_types.json"
REGIONS = ("us-east-1", "us-west-2")
GENERATED_AT = datetime(2026, 11, 20, 10, 0, tzinfo=UTC)


def fixture_cache(on_demand: bool = True, spot: bool = True) -> InstanceCache:
    """Every fixture type in both regions, with on-demand and/or spot prices (or neither: the offline case)."""
    data = json.loads(FIXTURE.read_text(encoding="utf-8"))
    spot_prices = latest_spot_prices(data["SpotPriceHistory"]) if spot else {}
    regions: dict[str, dict[str, InstanceTypeInfo]] = {}
    for region in REGIONS:
        entries = {}
        for item in data["InstanceTypes"]:
            itype = item["InstanceType"]
            in_region = {az: p for az, p in spot_prices.get(itype, {}).items() if az.startswith(region)}
            prices = Prices(on_demand=data["OnDemandUsd"][itype] if on_demand else None, spot=in_region)
            entries[itype] = type_info_from_api(item).model_copy(update={"prices": prices})
        regions[region] = entries
    return InstanceCache(generated_at=GENERATED_AT, regions=regions)


def write_fixture_cache(path: Path, **kwargs: bool) -> Path:
    """Write `fixture_cache(**kwargs)` as a cache file and return its path."""
    path.write_text(fixture_cache(**kwargs).model_dump_json(indent=1), encoding="utf-8")
    return path
