"""The base of the config model: the strict base class, shared patterns, the purchase option enum, CIDR checks."""

from __future__ import annotations

import ipaddress
from enum import StrEnum
from typing import Annotated

from pydantic import AfterValidator, BaseModel, ConfigDict

NAME_PATTERN = r"^[a-z][a-z0-9]*$"
CLUSTER_NAME_PATTERN = r"^[a-z][a-z0-9-]*[a-z0-9]$"
REGION_PATTERN = r"^[a-z]{2,4}(-[a-z]+)?-[a-z]+-\d$"  # us-east-1, us-gov-west-1, eusc-de-east-1, us-iso-east-1
AZ_PATTERN = r"^[a-z]{2,4}(-[a-z]+)?-[a-z]+-\d[a-z]$"
INSTANCE_TYPE_PATTERN = r"^[a-z][a-z0-9-]*\.[a-z0-9]+$"
# An RDS instance class, with or without the `db.` prefix; the family always carries a generation digit (t4g, r6g).
DB_INSTANCE_CLASS_PATTERN = r"^(db\.)?[a-z]+[0-9][a-z0-9-]*\.[a-z0-9]+$"
HOST_PORT_PATTERN = r"^[A-Za-z0-9.-]+:\d+$"
SECURITY_GROUP_PATTERN = r"^sg-[0-9a-f]{8,17}$"
MANAGED_POLICY_PATTERN = r"^arn:aws[a-z-]*:iam::(aws|\d{12}):policy/[\w+=,.@/-]+$"


def vpc_cidr(value: str) -> str:
    """Check an AWS VPC/subnet CIDR: IPv4, no host bits, prefix /16 to /28 (AWS limits)."""
    try:
        net = ipaddress.IPv4Network(value)
    except ValueError as exc:  # AddressValueError and NetmaskValueError are ValueErrors
        raise ValueError(f"'{value}' is not an IPv4 CIDR: {exc}") from None
    if not 16 <= net.prefixlen <= 28:
        raise ValueError(f"'{value}': AWS allows prefix lengths /16 to /28")
    return value


def cidrs(values: list[str]) -> list[str]:
    """Check IPv4 or IPv6 CIDRs (host bits set are an error, as AWS refuses them)."""
    for value in values:
        try:
            ipaddress.ip_network(value)
        except ValueError as exc:
            raise ValueError(f"'{value}' is not a CIDR: {exc}") from None
    return values


CidrList = Annotated[list[str], AfterValidator(cidrs)]  # IPv4 or IPv6 CIDRs, each checked


class StrictModel(BaseModel):
    """Base for every config section: unknown keys are errors (a typo must never be silently ignored)."""

    model_config = ConfigDict(extra="forbid", frozen=True)


class PurchaseOption(StrEnum):
    """How a pool buys capacity."""

    ON_DEMAND = "on_demand"
    SPOT = "spot"
    SPOT_THEN_ON_DEMAND = "spot_then_on_demand"
