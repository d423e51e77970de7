"""Which address space a CIDR of the config lies in: private, documentation-only, or public (the internet's).

One notion for every field that opens a port to addresses outside the cluster: `clusters[].ssh_allowed_cidrs`
(public ranges only with `ssh_allow_public_cidrs`, cluster_config/deploy_checks.py) and
`clusters[].rest_api.allowed_cidrs` (private ranges only: the page is for the cluster's own network). A range counts
as private or documentation only when all of it does: `10.0.0.0/7` is public (it holds 11.0.0.0/8).
"""

from __future__ import annotations

import ipaddress
from typing import Literal

AddressSpace = Literal["private", "documentation", "public"]
Network = ipaddress.IPv4Network | ipaddress.IPv6Network

# Private: RFC 1918, RFC 6598 (shared address space, carrier-grade NAT and many VPNs), IPv6 unique local (RFC 4193).
PRIVATE_RANGES: tuple[Network, ...] = tuple(
    ipaddress.ip_network(r) for r in ("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "100.64.0.0/10", "fc00::/7")
)
# Documentation: RFC 5737 (TEST-NET-1/2/3), RFC 3849 and RFC 9637 (IPv6). Never routed on the internet, so a rule
# naming them admits no one there; the examples and tests use them.
DOCUMENTATION_RANGES: tuple[Network, ...] = tuple(
    ipaddress.ip_network(r) for r in ("192.0.2.0/24", "198.51.100.0/24", "203.0.113.0/24", "2001:db8::/32", "3fff::/20")
)


def _within(network: Network, ranges: tuple[Network, ...]) -> bool:
    return any(r.version == network.version and network.subnet_of(r) for r in ranges)  # type: ignore[arg-type]


def address_space(cidr: str) -> AddressSpace:
    """The address space all of `cidr` (a CIDR the model already checked; host bits are ignored) lies in."""
    network = ipaddress.ip_network(cidr, strict=False)
    if _within(network, PRIVATE_RANGES):
        return "private"
    if _within(network, DOCUMENTATION_RANGES):
        return "documentation"
    return "public"
