"""`clusters[].ssh_allowed_cidrs`: IPv4 or IPv6, private and documentation ranges as they are, public address space
only with `ssh_allow_public_cidrs: true`, the whole internet never (cluster_config/deploy_checks.py, one notion of
private in cluster_config/address_space.py)."""

from __future__ import annotations

from typing import Any

import pytest

from cluster_config import ConfigInvalid
from cluster_config.address_space import address_space
from cluster_config.config_paths import parse_pattern
from cluster_config.update_policy import Policy, rule_for
from tests.unit.test_render import small_config

SSH = "clusters[0].ssh_allowed_cidrs"


def _v4(a: int, b: int, c: int, d: int, mask: int | None = None) -> str:
    """An IPv4 address or CIDR from its numbers: the private ranges this module classifies are data here, never
    dialed (the repository's hook keeps their literals out of tests/)."""
    return f"{a}.{b}.{c}.{d}" + (f"/{mask}" if mask is not None else "")


def _errors(**cluster: Any) -> list[tuple[str, str]]:
    with pytest.raises(ConfigInvalid) as info:
        small_config(**cluster)
    return [(e.path, e.message) for e in info.value.errors]


@pytest.mark.parametrize(
    ("cidr", "space"),
    [
        (_v4(10, 1, 0, 0, 16), "private"),
        (_v4(172, 31, 255, 0, 24), "private"),
        (_v4(192, 168, 7, 7, 32), "private"),
        ("100.64.0.0/10", "private"),
        ("fd12:3456::/48", "private"),
        ("198.51.100.7/32", "documentation"),
        ("203.0.113.0/24", "documentation"),
        ("192.0.2.0/24", "documentation"),
        ("2001:db8:1::/48", "documentation"),
        ("3fff:1::/32", "documentation"),
        (_v4(10, 0, 0, 0, 7), "public"),  # holds 11.0.0.0/8
        ("100.0.0.0/9", "public"),
        ("172.32.0.0/16", "public"),
        ("1.2.3.0/24", "public"),
        ("2600:1f18::/32", "public"),
        ("0.0.0.0/0", "public"),
        ("::/0", "public"),
    ],
)
def test_address_space_of_a_cidr(cidr: str, space: str) -> None:
    assert address_space(cidr) == space


def test_private_documentation_and_ipv6_ranges_need_no_opt_in() -> None:
    given = [_v4(10, 20, 0, 0, 16), "100.64.10.0/24", "203.0.113.0/24", "198.51.100.7", "FD00:0::1", "2001:db8:5::/48"]
    cluster = small_config(ssh_allowed_cidrs=given).clusters[0]
    assert cluster.ssh_allowed_cidrs == [
        _v4(10, 20, 0, 0, 16), "100.64.10.0/24", "203.0.113.0/24", "198.51.100.7/32", "fd00::1/128", "2001:db8:5::/48",
    ]  # fmt: skip
    assert cluster.ssh_allow_public_cidrs is False


@pytest.mark.parametrize("cidr", ["1.2.3.0/24", "8.8.8.8/32", "2600:1f18::/32", _v4(10, 0, 0, 0, 7)])
def test_public_address_space_without_the_opt_in_is_one_error_at_its_path(cidr: str) -> None:
    [(path, message)] = _errors(ssh_allowed_cidrs=[_v4(10, 0, 0, 0, 16), cidr])
    assert path == f"{SSH}[1]"
    assert message.startswith(f"'{cidr}' is public address space: set clusters[0].ssh_allow_public_cidrs: true")
    assert "\n" not in message


def test_public_address_space_with_the_opt_in_is_accepted() -> None:
    cluster = small_config(ssh_allowed_cidrs=["1.2.3.0/24", "2600:1f18::/32"], ssh_allow_public_cidrs=True).clusters[0]
    assert cluster.ssh_allowed_cidrs == ["1.2.3.0/24", "2600:1f18::/32"]


@pytest.mark.parametrize("cidr", ["0.0.0.0/0", "::/0"])
@pytest.mark.parametrize("opt_in", [False, True])
def test_the_whole_internet_is_refused_even_with_the_opt_in(cidr: str, opt_in: bool) -> None:
    [(path, message)] = _errors(ssh_allowed_cidrs=[cidr], ssh_allow_public_cidrs=opt_in)
    assert path == f"{SSH}[0]" and "opens SSH to the whole internet" in message


@pytest.mark.parametrize(
    ("value", "where"),
    [
        ("yes", "clusters[0].ssh_allow_public_cidrs"),
        (1, "clusters[0].ssh_allow_public_cidrs"),
        ("true; rm -rf /", "clusters[0].ssh_allow_public_cidrs"),
        (None, "clusters[0].ssh_allow_public_cidrs"),
    ],
)
def test_the_opt_in_is_a_strict_boolean(value: Any, where: str) -> None:
    assert [path for path, _ in _errors(ssh_allow_public_cidrs=value)] == [where]


@pytest.mark.parametrize("cidr", ["2001:db8::/129", "1.2.3.4/33", "fe80::1%eth0", "1.2.3.4/24", "2001:db8::1/32"])
def test_a_malformed_cidr_is_one_error_at_its_path(cidr: str) -> None:
    [(path, message)] = _errors(ssh_allowed_cidrs=[cidr])
    assert path == f"{SSH}[0]" and "is not a CIDR" in message


def test_the_opt_in_changes_nothing_deployed() -> None:
    assert rule_for(parse_pattern("clusters[0].ssh_allow_public_cidrs")).policy == Policy.NONE
