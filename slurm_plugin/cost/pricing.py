"""The hourly price and size of the instance behind a node, from the instance cache (USD per hour, pure).

- spot: the type's spot price in the instance's AZ; without one, the cheapest spot price the cache has for the type
  in that region, then its on-demand price — both marked estimated;
- on-demand (and capacity blocks): the type's on-demand price;
- no launch record for the node (the event log rotated or was lost): the on-demand price of its pool's first
  instance type in the pool's first region, marked estimated;
- no price at all in the cache: unpriced (`usd_per_hour` None; the report counts it as $0 and says so).
"""

from __future__ import annotations

from dataclasses import dataclass

from slurm_plugin.cost.ledger import Tenancy
from slurm_plugin.instance_cache import InstanceCache, InstanceTypeInfo
from slurm_plugin.manifest import Manifest


@dataclass(frozen=True)
class NodePrice:
    """What one node of a job cost per hour, and why."""

    node: str
    instance_id: str  # "" without a launch record
    instance_type: str
    region: str
    az: str
    market: str
    usd_per_hour: float | None  # None: unpriced
    vcpus: int | None  # None: the type is not in the cache
    estimated: bool
    basis: str  # one phrase: which price was used


def price_node(node: str, tenancy: Tenancy | None, manifest: Manifest, cache: InstanceCache) -> NodePrice:
    """The price of `node` while `tenancy` ran it (None: no launch record)."""
    if tenancy is None:
        return _pool_fallback(node, manifest, cache)
    info = _info(cache, tenancy.instance_type, [tenancy.region, *cache.regions])
    in_region = cache.regions.get(tenancy.region, {}).get(tenancy.instance_type)
    usd, estimated, basis = _market_price(tenancy, in_region)
    return NodePrice(
        node=node,
        instance_id=tenancy.instance_id,
        instance_type=tenancy.instance_type,
        region=tenancy.region,
        az=tenancy.az,
        market=tenancy.market,
        usd_per_hour=usd,
        vcpus=info.vcpus if info is not None else None,
        estimated=estimated,
        basis=basis,
    )


def _market_price(tenancy: Tenancy, info: InstanceTypeInfo | None) -> tuple[float | None, bool, str]:
    """(USD/hour, estimated, basis) of the tenancy's market."""
    where = f"{tenancy.instance_type} in {tenancy.region}"
    if info is None:
        return None, False, f"unpriced: {where} is not in the instance cache"
    prices = info.prices
    if tenancy.market == "spot":
        if tenancy.az in prices.spot:
            return prices.spot[tenancy.az], False, f"spot price in {tenancy.az}"
        if prices.spot_min is not None:
            return prices.spot_min, True, f"cheapest spot price of {where} (none for {tenancy.az or 'its AZ'})"
        if prices.on_demand is not None:
            return prices.on_demand, True, f"on-demand price of {where} (no spot price)"
        return None, False, f"unpriced: no price for {where} in the instance cache"
    if prices.on_demand is not None:
        return prices.on_demand, False, "on-demand price"
    return None, False, f"unpriced: no on-demand price for {where} in the instance cache"


def _pool_fallback(node: str, manifest: Manifest, cache: InstanceCache) -> NodePrice:
    """No launch record: the on-demand price of the node's pool's first instance type."""
    pool = manifest.pool_of_node(node)
    if pool is None:
        return NodePrice(node, "", "", "", "", "", None, None, False, "unpriced: not a node of this cluster's pools")
    itype = pool.instance_types[0]
    region = pool.locations[0].region if pool.locations else manifest.home_region
    info = _info(cache, itype, [region, *cache.regions])
    usd = info.prices.on_demand if info is not None else None
    basis = f"no launch record: on-demand price of pool {pool.key}'s first type {itype}"
    if usd is None:
        basis = f"unpriced: no launch record and no on-demand price for {itype} in {region}"
    return NodePrice(
        node=node,
        instance_id="",
        instance_type=itype,
        region=region,
        az="",
        market="on-demand",
        usd_per_hour=usd,
        vcpus=info.vcpus if info is not None else None,
        estimated=usd is not None,
        basis=basis,
    )


def _info(cache: InstanceCache, instance_type: str, regions: list[str]) -> InstanceTypeInfo | None:
    """The type's entry from the first of `regions` that has it."""
    for region in regions:
        info = cache.regions.get(region, {}).get(instance_type)
        if info is not None:
            return info
    return None
