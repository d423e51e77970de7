"""The base of the config model: the strict base class (unknown keys and invisible characters refused), shared patterns,
the purchase option enum, CIDR checks."""

from __future__ import annotations

import ipaddress
import types
import typing
import unicodedata
from enum import StrEnum
from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, ConfigDict, model_validator

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


def cidr(value: str) -> str:
    """Check an IPv4 or IPv6 CIDR (host bits set are an error, as AWS refuses them) and return it normalised: an
    address without a mask is that one address (`198.51.100.7` → `198.51.100.7/32`, `2001:db8::1` → `2001:db8::1/128`)
    — CDK's `Peer.ipv4`/`Peer.ipv6` and AWS refuse a CIDR without a mask — and IPv6 in its short form."""
    if "%" in value:  # ipaddress accepts an IPv6 zone index (fe80::1%eth0): no rule or address list means one
        raise ValueError(f"'{value}' is not a CIDR: a zone index ('%...') has no meaning here")
    try:
        return ipaddress.ip_network(value).with_prefixlen
    except ValueError as exc:
        raise ValueError(f"'{value}' is not a CIDR: {exc}") from None


def ipv4_cidr(value: str) -> str:
    """`cidr`, IPv4 only: for rules the stacks write with `Peer.ipv4` (the cluster's VPCs are IPv4-only)."""
    net = cidr(value)
    if ":" in net:
        raise ValueError(
            f"'{value}' is an IPv6 CIDR: the cluster's VPC and its SSH rules are IPv4-only (give an IPv4 range, or use "
            "SSM Session Manager, which needs no ingress)"
        )
    return net


CidrList = list[Annotated[str, AfterValidator(cidr)]]  # IPv4 or IPv6 CIDRs, each checked and normalised
Ipv4CidrList = list[Annotated[str, AfterValidator(ipv4_cidr)]]  # IPv4 CIDRs, each checked and normalised


# No string of the config (value, list item, mapping key) holds these Unicode categories: control characters (Cc:
# NUL, newline, CR, ESC), format characters (Cf: zero-width space, right-to-left override, BOM), line and paragraph
# separators, surrogates, private-use and unassigned code points; nor is any longer than MAX_TEXT. Checked before the
# fields' own patterns, so the error never echoes such a value (docs/security.md).
UNSAFE_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"})
MAX_TEXT = 4096
# No number of the config is larger: AWS's and Slurm's integer fields are 32-bit.
MAX_NUMBER = 2**31 - 1


def text_problem(value: Any) -> str | None:
    """Why `value` (a string, or a list or mapping holding strings) is not plain one-line text; None when it is."""
    if isinstance(value, str):
        if len(value) > MAX_TEXT:
            return f"a value of {len(value)} characters (at most {MAX_TEXT})"
        for char in value:
            if unicodedata.category(char) in UNSAFE_CATEGORIES:
                name = unicodedata.name(char, "a control or invisible character")
                return f"character U+{ord(char):04X} ({name}) in a value: one line of visible text only"
        return None
    if isinstance(value, dict):
        items: list[Any] = [*value.keys(), *value.values()]
        return next((p for p in map(text_problem, items) if p), None)
    if isinstance(value, list | tuple):
        return next((p for p in map(text_problem, value) if p), None)
    return None


def _largest(value: Any) -> int:
    """The largest magnitude of the integers `value` holds (0 when none); sections below check their own."""
    if isinstance(value, int) and not isinstance(value, bool):
        return abs(value)
    if isinstance(value, dict):
        return max(map(_largest, value.values()), default=0)
    if isinstance(value, list):
        return max(map(_largest, value), default=0)
    return 0


def holds_model(annotation: Any) -> bool:
    """Whether a field annotation may hold a config section (through Optional, unions, lists, dicts, Annotated)."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return True
    origin = typing.get_origin(annotation)
    if origin is typing.Annotated:
        return holds_model(typing.get_args(annotation)[0])
    if origin in (typing.Union, types.UnionType, list, dict):
        return any(holds_model(arg) for arg in typing.get_args(annotation))
    return False


def literal_numbers(annotation: Any) -> bool:
    """Whether a field annotation is (or holds, through Optional and Annotated) a Literal of numbers, e.g. `Literal[1,
    2]`: pydantic matches `True` against `1` there even in strict mode."""
    origin = typing.get_origin(annotation)
    if origin is typing.Literal:
        return any(isinstance(v, int | float) and not isinstance(v, bool) for v in typing.get_args(annotation))
    if origin in (typing.Annotated, typing.Union, types.UnionType):
        return any(literal_numbers(arg) for arg in typing.get_args(annotation))
    return False


class StrictModel(BaseModel):
    """Base for every config section: unknown keys are errors (a typo must never be silently ignored), every string is
    one line of visible text (`text_problem`; nested sections check their own), and values are strict (pydantic's
    strict mode): `max_nodes: true` or `max_nodes: "4"` is not a number, `backup: 1` or `backup: "yes"` not a boolean.
    Enum fields take their values' strings (`Field(strict=False)` there: strict mode would want enum objects)."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True, allow_inf_nan=False)

    @model_validator(mode="before")
    @classmethod
    def _plain_text(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        for key, value in data.items():
            key_problem = text_problem(key)
            if key_problem:
                raise ValueError(f"a key: {key_problem}")
            field = cls.model_fields.get(key) if isinstance(key, str) else None
            if field is not None and isinstance(value, bool) and literal_numbers(field.annotation):
                raise ValueError(f"{key}: a number, not the boolean {str(value).lower()}")
            if field is not None and holds_model(field.annotation):
                continue
            if (big := _largest(value)) > MAX_NUMBER:
                raise ValueError(f"{key}: a number of {len(str(big))} digits (at most {MAX_NUMBER})")
            problem = text_problem(value)
            if problem:
                raise ValueError(f"{key}: {problem}")
        return data


class PurchaseOption(StrEnum):
    """How a pool buys capacity."""

    ON_DEMAND = "on_demand"
    SPOT = "spot"
    SPOT_THEN_ON_DEMAND = "spot_then_on_demand"
