"""DescribeSpotPriceHistory for the emulated AWS: the price table's per-AZ spot prices in EC2's XML shape.

moto answers every type in every AZ with one constant price (0.00001) and ignores ProductDescriptions and the
AvailabilityZone parameter; this answer replaces it. Which types an AZ offers comes from moto's offerings data
(`Offer`: type, AZ name, AZ id); the price from localcloud/aws/price_list.py (`spot_price`), one price point per type, AZ
and product description ("Linux/UNIX" and "Linux/UNIX (Amazon VPC)"), in effect since the table's publication date.
A type the table does not price has no history, as a type EC2 does not sell on spot. Honoured: InstanceType.N,
ProductDescription.N, AvailabilityZone, AvailabilityZoneId, Filter.N (availability-zone, instance-type,
product-description, spot-price; `*`/`?` wildcards), EndTime, MaxResults (5-1000) and NextToken.
"""

from __future__ import annotations

import fnmatch
import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from xml.sax.saxutils import escape

from localcloud.aws.price_list import PUBLICATION_DATE, spot_price

PRODUCTS = ("Linux/UNIX", "Linux/UNIX (Amazon VPC)")
TIMESTAMP = PUBLICATION_DATE.replace("Z", ".000Z")
MAX_RESULTS = 1000
MIN_RESULTS = 5
FILTERS = {"availability-zone", "instance-type", "product-description", "spot-price"}

Answer = tuple[str, list[tuple[str, str]], bytes]


@dataclass(frozen=True)
class Offer:
    """An instance type EC2 offers in an AZ."""

    instance_type: str
    az: str
    az_id: str


@dataclass(frozen=True)
class Point:
    """One spot price history entry."""

    instance_type: str
    product: str
    price: str
    az: str
    az_id: str

    def field(self, name: str) -> str:
        """The value a Filter.N.Name matches against."""
        return {
            "availability-zone": self.az,
            "instance-type": self.instance_type,
            "product-description": self.product,
            "spot-price": self.price,
        }[name]


def describe_spot_price_history(params: dict[str, str], offers: Iterable[Offer]) -> Answer:
    """The answer to one DescribeSpotPriceHistory request (its query parameters) over a region's offers."""
    filters = _filters(params)
    unknown = sorted(set(filters) - FILTERS)
    if unknown:
        return _error("InvalidParameterValue", f"The filter '{unknown[0]}' is invalid")
    size = params.get("MaxResults", str(MAX_RESULTS))
    if not size.isdigit() or not MIN_RESULTS <= int(size) <= MAX_RESULTS:
        return _error("InvalidParameterValue", f"MaxResults must be between {MIN_RESULTS} and {MAX_RESULTS}")
    token = params.get("NextToken") or "0"
    if not token.isdigit():
        return _error("InvalidPaginationToken", f"Invalid pagination token: {token}")
    types = _listed(params, "InstanceType")
    products = _listed(params, "ProductDescription")
    points = [
        Point(offer.instance_type, product, f"{price:.6f}", offer.az, offer.az_id)
        for offer in offers
        if (not types or offer.instance_type in types)
        and params.get("AvailabilityZone", offer.az) == offer.az
        and params.get("AvailabilityZoneId", offer.az_id) == offer.az_id
        and (price := spot_price(offer.instance_type, offer.az)) is not None
        for product in PRODUCTS
        if not products or product in products
    ]
    if params.get("EndTime", TIMESTAMP) < TIMESTAMP[:19]:
        points = []  # the table's prices start at its publication date
    points = [p for p in points if all(_any_match(p.field(n), values) for n, values in filters.items())]
    points.sort(key=lambda p: (p.instance_type, p.az, p.product))
    start, end = int(token), int(token) + int(size)
    items = "".join(_item(p) for p in points[start:end])
    more = f"<nextToken>{end}</nextToken>" if end < len(points) else ""
    body = (
        '<?xml version="1.0" encoding="UTF-8"?>'
        '<DescribeSpotPriceHistoryResponse xmlns="http://ec2.amazonaws.com/doc/2016-11-15/">'
        f"<requestId>{uuid.uuid4()}</requestId><spotPriceHistorySet>{items}</spotPriceHistorySet>{more}"
        "</DescribeSpotPriceHistoryResponse>"
    ).encode()
    return "200 OK", [("Content-Type", "text/xml"), ("Content-Length", str(len(body)))], body


def _listed(params: dict[str, str], name: str) -> set[str]:
    """The values of a query-protocol list parameter (`Name.1`, `Name.2`, ...)."""
    return {value for key, value in params.items() if key.startswith(f"{name}.") and key[len(name) + 1 :].isdigit()}


def _filters(params: dict[str, str]) -> dict[str, list[str]]:
    """Filter.N.Name → its Filter.N.Value.M values."""
    filters: dict[str, list[str]] = {}
    for key, name in params.items():
        if key.startswith("Filter.") and key.endswith(".Name"):
            prefix = key[: -len("Name")] + "Value."
            filters.setdefault(name, []).extend(v for k, v in params.items() if k.startswith(prefix))
    return filters


def _any_match(value: str, patterns: list[str]) -> bool:
    return any(fnmatch.fnmatchcase(value, pattern) for pattern in patterns)


def _item(point: Point) -> str:
    fields = (
        ("instanceType", point.instance_type),
        ("productDescription", point.product),
        ("spotPrice", point.price),
        ("timestamp", TIMESTAMP),
        ("availabilityZone", point.az),
        ("availabilityZoneId", point.az_id),
    )
    return "<item>" + "".join(f"<{tag}>{escape(value)}</{tag}>" for tag, value in fields) + "</item>"


def _error(code: str, message: str) -> Answer:
    body = (
        f'<?xml version="1.0" encoding="UTF-8"?><Response><Errors><Error><Code>{code}</Code>'
        f"<Message>{escape(message)}</Message></Error></Errors><RequestID>{uuid.uuid4()}</RequestID></Response>"
    ).encode()
    return "400 Bad Request", [("Content-Type", "text/xml"), ("Content-Length", str(len(body)))], body
