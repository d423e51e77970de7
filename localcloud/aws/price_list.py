"""Prices of the emulated AWS: a small on-demand table, spot prices derived from it per AZ, and the Price List API.

moto has no Price List API and answers DescribeSpotPriceHistory with one constant price (0.00001) in every AZ, so the
instance cache of a local cloud (slurm_plugin/instance_cache_aws.py, unchanged) would price every job at ~0. Here:
- `ON_DEMAND`: public us-east-1 Linux shared-tenancy on-demand USD/hour of the types the example and test configs use
  (a type not listed has no product, as AWS answers for an unknown type); other regions are a few percent dearer;
- `spot_price(type, az)`: on-demand x a factor by the AZ's letter (0.30 ... 0.40), so spot prices differ per AZ and stay
  below on-demand; deterministic, so tests can compute the expected value;
- `answer(action, body)`: `AWSPriceListService.GetProducts` (JSON 1.1 protocol) over products for every listed type and
  region in Linux and Windows, Shared and Dedicated tenancy and three capacity statuses (an allocated capacity
  reservation is priced 0, as on AWS), with TERM_MATCH/EQUALS/CONTAINS/ANY_OF/NONE_OF filters and MaxResults/NextToken
  pagination. Only the AmazonEC2 service code has products. localcloud/aws/spot_history.py answers the spot side.
"""

from __future__ import annotations

import functools
import hashlib
import json
import re
from typing import Any

PUBLICATION_DATE = "2025-06-01T00:00:00Z"
# USD/hour, Linux, shared tenancy, us-east-1 (public prices, rounded as AWS lists them); vCPUs for the Windows licence
ON_DEMAND: dict[str, tuple[float, int]] = {
    "c5.large": (0.085, 2),
    "c6g.xlarge": (0.136, 4),
    "c6g.4xlarge": (0.544, 16),
    "c6i.large": (0.085, 2),
    "c6i.xlarge": (0.17, 4),
    "c6i.2xlarge": (0.34, 8),
    "c7g.large": (0.0725, 2),
    "c7g.xlarge": (0.145, 4),
    "c7g.4xlarge": (0.58, 16),
    "c7i.large": (0.08925, 2),
    "c7i.xlarge": (0.1785, 4),
    "c7i.2xlarge": (0.357, 8),
    "g5.xlarge": (1.006, 4),
    "g5.12xlarge": (5.672, 48),
    "g5.24xlarge": (8.144, 96),
    "g6.xlarge": (0.8048, 4),
    "m5.large": (0.096, 2),
    "m7i.large": (0.1008, 2),
    "m7i.xlarge": (0.2016, 4),
    "m7i.2xlarge": (0.4032, 8),
    "p5.48xlarge": (55.04, 192),
    "t4g.micro": (0.0084, 2),
}
# region → (Price List location name, usage type prefix, price factor over us-east-1)
REGIONS: dict[str, tuple[str, str, float]] = {
    "us-east-1": ("US East (N. Virginia)", "", 1.0),
    "us-east-2": ("US East (Ohio)", "USE2-", 1.0),
    "us-west-1": ("US West (N. California)", "USW1-", 1.08),
    "us-west-2": ("US West (Oregon)", "USW2-", 1.0),
    "ca-central-1": ("Canada (Central)", "CAN1-", 1.04),
    "eu-west-1": ("EU (Ireland)", "EU-", 1.06),
    "eu-central-1": ("EU (Frankfurt)", "EUC1-", 1.08),
    "ap-northeast-1": ("Asia Pacific (Tokyo)", "APN1-", 1.08),
}
# spot price / on-demand price by the AZ's letter (a, b, c, ...): below on-demand, different in each AZ
SPOT_FACTORS = (0.30, 0.34, 0.38, 0.32, 0.36, 0.40)
WINDOWS_USD_PER_VCPU_HOUR = 0.046
DEDICATED_FACTOR = 1.1
# (tenancy, capacity status) → usage type; an allocated capacity reservation's hours are priced 0
USAGE_TYPES = {
    ("Shared", "Used"): "BoxUsage",
    ("Shared", "UnusedCapacityReservation"): "UnusedBox",
    ("Shared", "AllocatedCapacityReservation"): "Reservation",
    ("Dedicated", "Used"): "DedicatedUsage",
    ("Dedicated", "UnusedCapacityReservation"): "UnusedDed",
    ("Dedicated", "AllocatedCapacityReservation"): "DedicatedRes",
}
MAX_RESULTS = 100
_AZ = re.compile(r"^([a-z]{2}(?:-gov)?-[a-z]+-\d)(?:-[a-z]+-\d)?([a-z])$")

Answer = tuple[str, list[tuple[str, str]], bytes]


def on_demand_price(instance_type: str, region: str) -> float | None:
    """Linux shared-tenancy on-demand USD/hour in `region`, or None for a type or region the table does not list."""
    if instance_type not in ON_DEMAND or region not in REGIONS:
        return None
    return round(ON_DEMAND[instance_type][0] * REGIONS[region][2], 6)


def spot_price(instance_type: str, az: str) -> float | None:
    """The Linux spot USD/hour of a type in an AZ (on-demand x the AZ's factor), or None when it has no price."""
    match = _AZ.match(az)
    if match is None:
        return None
    on_demand = on_demand_price(instance_type, match[1])
    if on_demand is None:
        return None
    return round(on_demand * SPOT_FACTORS[(ord(match[2]) - ord("a")) % len(SPOT_FACTORS)], 6)


def answer(action: str, body: bytes) -> Answer:
    """The Price List API's answer to one request (`action` from X-Amz-Target, `body` its JSON document)."""
    if action != "GetProducts":
        return _error("InvalidParameterException", f"the emulated Price List API does not implement {action}")
    try:
        request = json.loads(body or b"{}")
        filters = [(str(f["Type"]), str(f["Field"]), str(f["Value"])) for f in request.get("Filters", [])]
    except (ValueError, KeyError, TypeError):
        return _error("InvalidParameterException", "Filters must each have Type, Field and Value")
    size = int(request.get("MaxResults", MAX_RESULTS))
    if not 1 <= size <= MAX_RESULTS:
        return _error("InvalidParameterException", f"MaxResults must be between 1 and {MAX_RESULTS}")
    token = str(request.get("NextToken", "0"))
    if not token.isdigit():
        return _error("InvalidNextTokenException", "The next token is invalid")
    bad = [kind for kind, _, _ in filters if kind not in ("TERM_MATCH", "EQUALS", "CONTAINS", "ANY_OF", "NONE_OF")]
    if bad:
        return _error("InvalidParameterException", f"unknown filter type {bad[0]}")
    found = (
        [p for p in _products() if all(_matches(p["product"]["attributes"], f) for f in filters)]
        if request.get("ServiceCode") == "AmazonEC2"
        else []
    )
    start = int(token)
    reply: dict[str, Any] = {
        "FormatVersion": request.get("FormatVersion", "aws_v1"),
        "PriceList": [json.dumps(_with_terms(p)) for p in found[start : start + size]],
    }
    if start + size < len(found):
        reply["NextToken"] = str(start + size)
    return _json("200 OK", reply)


def _matches(attributes: dict[str, str], rule: tuple[str, str, str]) -> bool:
    kind, field, value = rule
    have = attributes.get(field)
    if kind == "NONE_OF":
        return have is None or have not in value.split(",")
    if have is None:
        return False
    if kind == "CONTAINS":
        return value in have
    if kind == "ANY_OF":
        return have in value.split(",")
    return have == value  # TERM_MATCH, EQUALS


@functools.cache
def _products() -> tuple[dict[str, Any], ...]:
    """Every product (without terms): the attributes AWS lists for an EC2 instance hour, and its hourly price."""
    products: list[dict[str, Any]] = []
    for region, (location, prefix, factor) in REGIONS.items():
        for itype, (usd, vcpus) in ON_DEMAND.items():
            for os_name in ("Linux", "Windows"):
                for (tenancy, capacity), usage in USAGE_TYPES.items():
                    price = usd + (WINDOWS_USD_PER_VCPU_HOUR * vcpus if os_name == "Windows" else 0.0)
                    price *= factor * (DEDICATED_FACTOR if tenancy == "Dedicated" else 1.0)
                    attributes = {
                        "servicecode": "AmazonEC2",
                        "servicename": "Amazon Elastic Compute Cloud",
                        "location": location,
                        "locationType": "AWS Region",
                        "regionCode": region,
                        "instanceType": itype,
                        "instanceFamily": itype.partition(".")[0],
                        "vcpu": str(vcpus),
                        "operatingSystem": os_name,
                        "tenancy": tenancy,
                        "preInstalledSw": "NA",
                        "licenseModel": "No License required",
                        "capacitystatus": capacity,
                        "marketoption": "OnDemand",
                        "usagetype": f"{prefix}{usage}:{itype}",
                        "operation": "RunInstances" if os_name == "Linux" else "RunInstances:0002",
                    }
                    sku = hashlib.sha1(json.dumps(attributes, sort_keys=True).encode()).hexdigest()[:16].upper()
                    products.append(
                        {
                            "product": {"productFamily": "Compute Instance", "attributes": attributes, "sku": sku},
                            "price": 0.0 if capacity == "AllocatedCapacityReservation" else round(price, 6),
                        }
                    )
    return tuple(sorted(products, key=lambda p: str(p["product"]["sku"])))


def _with_terms(item: dict[str, Any]) -> dict[str, Any]:
    """A product as GetProducts lists it: the product, its OnDemand term with one hourly price dimension."""
    product = item["product"]
    sku, attributes = product["sku"], product["attributes"]
    term = f"{sku}.JRTCKXETXF"
    usd = f"{item['price']:.10f}"
    return {
        "product": product,
        "serviceCode": "AmazonEC2",
        "terms": {
            "OnDemand": {
                term: {
                    "priceDimensions": {
                        f"{term}.6YS6EN2CT7": {
                            "unit": "Hrs",
                            "endRange": "Inf",
                            "description": f"${item['price']} per On Demand {attributes['operatingSystem']} "
                            f"{attributes['instanceType']} Instance Hour",
                            "appliesTo": [],
                            "rateCode": f"{term}.6YS6EN2CT7",
                            "beginRange": "0",
                            "pricePerUnit": {"USD": usd},
                        }
                    },
                    "sku": sku,
                    "effectiveDate": PUBLICATION_DATE,
                    "offerTermCode": "JRTCKXETXF",
                    "termAttributes": {},
                }
            }
        },
        "version": PUBLICATION_DATE.replace("-", "").replace(":", "").replace("T", "")[:14],
        "publicationDate": PUBLICATION_DATE,
    }


def _json(status: str, payload: Any) -> Answer:
    body = json.dumps(payload).encode()
    return status, [("Content-Type", "application/x-amz-json-1.1"), ("Content-Length", str(len(body)))], body


def _error(code: str, message: str) -> Answer:
    status, headers, body = _json("400 Bad Request", {"__type": code, "Message": message})
    return status, [*headers, ("x-amzn-ErrorType", code)], body
