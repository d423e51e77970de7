"""The emulated AWS answers the Price List API and DescribeSpotPriceHistory as AWS does, from localcloud's price table:
filters, pagination and error codes as boto3 sees them."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest
from botocore.exceptions import ClientError

from localcloud.aws.emulated_aws import EmulatedAws
from localcloud.aws.price_list import REGIONS

CACHE_FILTERS = {  # what slurm_plugin/instance_cache_aws.py asks for
    "instanceType": "c7i.large",
    "regionCode": "us-east-1",
    "operatingSystem": "Linux",
    "tenancy": "Shared",
    "preInstalledSw": "NA",
    "capacitystatus": "Used",
}


def _products(aws: EmulatedAws, filters: dict[str, str], **extra: Any) -> list[dict[str, Any]]:
    reply = aws.client("pricing").get_products(
        ServiceCode="AmazonEC2",
        Filters=[{"Type": "TERM_MATCH", "Field": k, "Value": v} for k, v in filters.items()],
        **extra,
    )
    return [json.loads(item) for item in reply["PriceList"]]


def _usd(product: dict[str, Any]) -> float:
    (term,) = product["terms"]["OnDemand"].values()
    (dimension,) = term["priceDimensions"].values()
    return float(dimension["pricePerUnit"]["USD"])


def test_get_products_with_the_caches_filters_is_one_linux_shared_hourly_price(aws: EmulatedAws) -> None:
    (product,) = _products(aws, CACHE_FILTERS, MaxResults=10)
    attributes = product["product"]["attributes"]
    assert (attributes["instanceType"], attributes["location"]) == ("c7i.large", "US East (N. Virginia)")
    assert attributes["usagetype"] == "BoxUsage:c7i.large" and _usd(product) == 0.08925
    assert aws.call_counts() == {"pricing:GetProducts": 1}


def test_get_products_lists_every_os_tenancy_and_capacity_variant_when_not_filtered(aws: EmulatedAws) -> None:
    products = _products(aws, {"instanceType": "c7i.large", "regionCode": "us-west-2"})
    variants = {
        (p["product"]["attributes"]["operatingSystem"], p["product"]["attributes"]["tenancy"]): _usd(p)
        for p in products
        if p["product"]["attributes"]["capacitystatus"] == "Used"
    }
    assert len(products) == 12
    assert variants[("Linux", "Shared")] < variants[("Linux", "Dedicated")] < variants[("Windows", "Dedicated")]
    assert variants[("Linux", "Shared")] < variants[("Windows", "Shared")]
    allocated = [p for p in products if p["product"]["attributes"]["capacitystatus"] == "AllocatedCapacityReservation"]
    assert len(allocated) == 4 and {_usd(p) for p in allocated} == {0.0}  # already paid by the reservation


def test_get_products_of_a_type_the_table_lacks_is_empty(aws: EmulatedAws) -> None:
    assert _products(aws, {**CACHE_FILTERS, "instanceType": "r7i.large"}) == []
    assert _products(aws, {**CACHE_FILTERS, "operatingSystem": "linux"}) == []  # TERM_MATCH is exact here


def test_get_products_pages_with_next_token(aws: EmulatedAws) -> None:
    pages = list(
        aws.client("pricing")
        .get_paginator("get_products")
        .paginate(
            ServiceCode="AmazonEC2",
            Filters=[{"Type": "TERM_MATCH", "Field": "instanceType", "Value": "m7i.large"}],
            PaginationConfig={"PageSize": 7},
        )
    )
    sizes = [len(page["PriceList"]) for page in pages]
    skus = {json.loads(item)["product"]["sku"] for page in pages for item in page["PriceList"]}
    assert sum(sizes) == len(skus) == 12 * len(REGIONS) and max(sizes) == 7 and len(sizes) > 1


def test_get_products_rejects_a_bad_next_token(aws: EmulatedAws) -> None:
    with pytest.raises(ClientError) as bad:
        aws.client("pricing").get_products(ServiceCode="AmazonEC2", NextToken="not-a-token")
    assert bad.value.response["Error"]["Code"] == "InvalidNextTokenException"


def _history(aws: EmulatedAws, **request: Any) -> list[dict[str, Any]]:
    pages = aws.client("ec2").get_paginator("describe_spot_price_history").paginate(**request)
    return [entry for page in pages for entry in page["SpotPriceHistory"]]


def test_spot_history_has_a_price_per_az_where_the_type_is_offered(aws: EmulatedAws) -> None:
    history = _history(
        aws, InstanceTypes=["c7i.large"], ProductDescriptions=["Linux/UNIX (Amazon VPC)"], StartTime=datetime.now(UTC)
    )
    prices = {entry["AvailabilityZone"]: float(entry["SpotPrice"]) for entry in history}
    assert len(history) == len(prices) >= 3 and len(set(prices.values())) == len(prices)
    assert all(0 < price < 0.08925 for price in prices.values())
    assert "us-east-1e" not in prices  # EC2 does not offer c7i.large there (moto's offerings data)
    assert {entry["AvailabilityZoneId"][:4] for entry in history} == {"use1"}


def test_spot_history_honours_az_product_and_filter_parameters(aws: EmulatedAws) -> None:
    in_b = _history(aws, InstanceTypes=["c7i.large", "m7i.large"], AvailabilityZone="us-east-1b")
    assert {(e["InstanceType"], e["AvailabilityZone"]) for e in in_b} == {
        ("c7i.large", "us-east-1b"),
        ("m7i.large", "us-east-1b"),
    }
    assert {e["ProductDescription"] for e in in_b} == {"Linux/UNIX", "Linux/UNIX (Amazon VPC)"}
    assert _history(aws, InstanceTypes=["c7i.large"], ProductDescriptions=["Windows"]) == []
    vpc = _history(
        aws,
        InstanceTypes=["c7i.large"],
        Filters=[
            {"Name": "product-description", "Values": ["*(Amazon VPC)"]},
            {"Name": "availability-zone", "Values": ["us-east-1a", "us-east-1c"]},
        ],
    )
    assert sorted(e["AvailabilityZone"] for e in vpc) == ["us-east-1a", "us-east-1c"]


def test_spot_history_pages_with_next_token(aws: EmulatedAws) -> None:
    types = ["c7i.large", "c6i.large", "m7i.large", "c7i.xlarge"]
    whole = _history(aws, InstanceTypes=types)
    paged = _history(aws, InstanceTypes=types, PaginationConfig={"PageSize": 5})
    assert paged == whole and len(whole) > 5
    assert aws.call_counts()["ec2:DescribeSpotPriceHistory"] == 1 + -(-len(whole) // 5)


def test_spot_history_rejects_an_unknown_filter(aws: EmulatedAws) -> None:
    with pytest.raises(ClientError) as bad:
        aws.client("ec2").describe_spot_price_history(Filters=[{"Name": "colour", "Values": ["blue"]}])
    assert bad.value.response["Error"]["Code"] == "InvalidParameterValue"
