"""Build the instance cache from AWS: DescribeInstanceTypes and spot prices per region, on-demand prices if reachable.

The conversions from API shapes (`type_info_from_api`, `latest_spot_prices`, `on_demand_price`) are pure; `build_cache`
does the calls through clients made by a factory, so tests point it at moto server. One paginated DescribeInstanceTypes,
one paginated DescribeInstanceTypeOfferings (by AZ) and one paginated DescribeSpotPriceHistory per region, each filtered
to the types the config uses. On-demand prices come
from the Price List API, which is optional: when it cannot be reached (offline, moto) they stay null and render falls
back to a vCPU-based weight.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from typing import Any

from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError

from cluster_config import ElasticSlurmConfig, pool_azs, region_of_az
from slurm_plugin.instance_cache import CacheError, GpuInfo, InstanceCache, InstanceTypeInfo, Prices
from slurm_plugin.powersave.ec2 import RETRY_CONFIG  # EC2 retries are configured in one place

LOG = logging.getLogger(__name__)
SPOT_PRODUCT = "Linux/UNIX (Amazon VPC)"
PRICING_REGION = "us-east-1"
# DescribeInstanceTypes accepts at most 100 names in InstanceTypes.
MAX_TYPES_PER_CALL = 100

# The Price List API is optional: one quick try, no retries (offline it would otherwise stall the refresh).
PRICING_CONFIG = Config(retries={"mode": "standard", "total_max_attempts": 1}, connect_timeout=3, read_timeout=10)

ClientFactory = Callable[[str, str], Any]
"""(service, region) → boto3 client."""


def client_factory(endpoint_url: str | None = None) -> ClientFactory:
    """A factory of boto3 clients with the retry config, all pointed at `endpoint_url` when given (moto server)."""
    import boto3

    def make(service: str, region: str) -> Any:
        config = PRICING_CONFIG if service == "pricing" else RETRY_CONFIG
        return boto3.client(  # type: ignore[call-overload]  # service is a runtime string
            service, region_name=region, endpoint_url=endpoint_url, config=config
        )

    return make


def types_by_region(config: ElasticSlurmConfig) -> dict[str, set[str]]:
    """The instance types each region may launch, over every pool of every cluster of the file."""
    wanted: dict[str, set[str]] = {}
    for cluster in config.clusters:
        for partition in cluster.partitions:
            for pool in partition.pools:
                for region in dict.fromkeys(region_of_az(az) for az in pool_azs(cluster, pool)):
                    wanted.setdefault(region, set()).update(pool.instance_types)
    return wanted


def type_info_from_api(item: dict[str, Any]) -> InstanceTypeInfo:
    """One DescribeInstanceTypes `InstanceTypes[]` element → InstanceTypeInfo (prices empty)."""
    arches = item.get("ProcessorInfo", {}).get("SupportedArchitectures", [])
    architecture = "arm64" if "arm64" in arches else "x86_64" if "x86_64" in arches or not arches else arches[0]
    gpus = None
    gpu_list = item.get("GpuInfo", {}).get("Gpus", [])
    if gpu_list:
        first = gpu_list[0]
        gpus = GpuInfo(
            count=sum(int(g.get("Count", 0)) for g in gpu_list),
            manufacturer=str(first.get("Manufacturer", "unknown")),
            name=str(first.get("Name", "unknown")),
        )
    return InstanceTypeInfo(
        vcpus=int(item["VCpuInfo"]["DefaultVCpus"]),
        cores=_optional_int(item["VCpuInfo"].get("DefaultCores")),
        threads_per_core=_optional_int(item["VCpuInfo"].get("DefaultThreadsPerCore")),
        memory_mib=int(item["MemoryInfo"]["SizeInMiB"]),
        architecture=architecture,
        gpus=gpus,
        efa=bool(item.get("NetworkInfo", {}).get("EfaSupported", False)),
    )


def _optional_int(value: Any) -> int | None:
    return int(value) if value is not None else None


def latest_spot_prices(history: Iterable[dict[str, Any]]) -> dict[str, dict[str, float]]:
    """DescribeSpotPriceHistory entries → type → AZ → the most recent price."""
    latest: dict[tuple[str, str], tuple[str, float]] = {}
    for entry in history:
        key = (str(entry["InstanceType"]), str(entry["AvailabilityZone"]))
        stamp = str(entry.get("Timestamp", ""))
        if key not in latest or stamp > latest[key][0]:
            latest[key] = (stamp, float(entry["SpotPrice"]))
    prices: dict[str, dict[str, float]] = {}
    for (itype, az), (_, price) in sorted(latest.items()):
        prices.setdefault(itype, {})[az] = price
    return prices


def on_demand_price(price_list: Iterable[str]) -> float | None:
    """The hourly USD price from Price List API `GetProducts` PriceList entries (JSON strings), or None."""
    for product in price_list:
        terms = json.loads(product).get("terms", {}).get("OnDemand", {})
        for term in terms.values():
            for dimension in term.get("priceDimensions", {}).values():
                usd = dimension.get("pricePerUnit", {}).get("USD")
                if usd is not None and float(usd) > 0:
                    return float(usd)
    return None


def build_cache(
    wanted: dict[str, set[str]], client: ClientFactory, now: datetime | None = None, with_on_demand: bool = True
) -> InstanceCache:
    """Query every region of `wanted` and return the cache; CacheError (one line) on an AWS error or unknown type."""
    regions: dict[str, dict[str, InstanceTypeInfo]] = {}
    pricing: Any = client("pricing", PRICING_REGION) if with_on_demand else None
    for region in sorted(wanted):
        types = sorted(wanted[region])
        ec2 = client("ec2", region)
        try:
            infos = _describe_types(ec2, types)
            zones = _az_offerings(ec2, types)
            spot = latest_spot_prices(_spot_history(ec2, types))
        except (ClientError, BotoCoreError) as exc:
            raise CacheError(f"{region}: {_one_line(exc)}") from None
        unknown = [t for t in types if t not in infos]
        if unknown:
            raise CacheError(f"{region} does not offer {', '.join(unknown)}")
        entries: dict[str, InstanceTypeInfo] = {}
        for itype in types:
            od: float | None = None
            if pricing is not None:
                od, ok = _on_demand(pricing, region, itype)
                if not ok:
                    pricing = None  # unreachable: do not try again for every type
            prices = Prices(on_demand=od, spot=spot.get(itype, {}))
            entries[itype] = infos[itype].model_copy(
                update={"prices": prices, "availability_zones": zones.get(itype, [])}
            )
        regions[region] = entries
        LOG.info("instance cache: %s: %d type(s), %d with spot prices", region, len(entries), len(spot))
    return InstanceCache(generated_at=now or datetime.now(UTC), regions=regions)


def _describe_types(ec2: Any, types: list[str]) -> dict[str, InstanceTypeInfo]:
    infos: dict[str, InstanceTypeInfo] = {}
    paginator = ec2.get_paginator("describe_instance_types")
    for start in range(0, len(types), MAX_TYPES_PER_CALL):
        for page in paginator.paginate(InstanceTypes=types[start : start + MAX_TYPES_PER_CALL]):
            for item in page.get("InstanceTypes", []):
                infos[item["InstanceType"]] = type_info_from_api(item)
    return infos


def _az_offerings(ec2: Any, types: list[str]) -> dict[str, list[str]]:
    """Type -> the region's AZs where EC2 offers it (a type offered in none is left out)."""
    zones: dict[str, set[str]] = {}
    paginator = ec2.get_paginator("describe_instance_type_offerings")
    for start in range(0, len(types), MAX_TYPES_PER_CALL):
        chunk = types[start : start + MAX_TYPES_PER_CALL]
        pages = paginator.paginate(
            LocationType="availability-zone", Filters=[{"Name": "instance-type", "Values": chunk}]
        )
        for page in pages:
            for offering in page.get("InstanceTypeOfferings", []):
                zones.setdefault(str(offering["InstanceType"]), set()).add(str(offering["Location"]))
    return {itype: sorted(azs) for itype, azs in zones.items()}


def _spot_history(ec2: Any, types: list[str]) -> list[dict[str, Any]]:
    history: list[dict[str, Any]] = []
    paginator = ec2.get_paginator("describe_spot_price_history")
    pages = paginator.paginate(InstanceTypes=types, ProductDescriptions=[SPOT_PRODUCT], StartTime=datetime.now(UTC))
    for page in pages:
        history.extend(page.get("SpotPriceHistory", []))
    return history


def _on_demand(pricing: Any, region: str, itype: str) -> tuple[float | None, bool]:
    """(price, reachable): the Linux shared-tenancy on-demand price; reachable=False when the API failed."""
    filters = {
        "instanceType": itype,
        "regionCode": region,
        "operatingSystem": "Linux",
        "tenancy": "Shared",
        "preInstalledSw": "NA",
        "capacitystatus": "Used",
    }
    try:
        reply = pricing.get_products(
            ServiceCode="AmazonEC2",
            Filters=[{"Type": "TERM_MATCH", "Field": k, "Value": v} for k, v in filters.items()],
            MaxResults=10,
        )
        return on_demand_price(reply.get("PriceList", [])), True
    except (ClientError, BotoCoreError, ValueError, KeyError) as exc:
        LOG.warning("instance cache: on-demand prices unavailable (%s); stored as null", _one_line(exc))
        return None, False


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return text if len(text) <= 200 else text[:197] + "..."
