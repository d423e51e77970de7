"""A full subnet reclaims the private addresses of its terminated instances, as EC2 does (installed in the emulated AWS).

moto frees an instance's private IPv4 address only when the Python object is garbage-collected
(`moto.ec2.models.instances.Instance.__del__`), which never happens: a reservation keeps its terminated instances
for ever. So a subnet runs out after as many launches as it has addresses, terminated or not, and the next
RunInstances/CreateFleet into it fails with an uncaught StopIteration (an HTML 500 from the server): the bench's
N=4000 rows hit that after ~16,000 launches into one /18. EC2 releases a terminated instance's address for reuse.

`reclaim_when_full` wraps `Subnet.get_available_subnet_ip`: only when moto has no address left does it hand the
addresses of the subnet's terminated instances back to moto's own free pool (`del_subnet_ip`, what `__del__` would
have done) and ask again. Before a subnet is full nothing changes, so an address is never reused while the local
cloud may still be stopping the machine that had it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

_INSTALLED = "_elastic_slurm_reclaims_ips"


def reclaim_when_full(get_available_subnet_ip: Callable[[Any, Any], str]) -> Callable[[Any, Any], str]:
    """moto's address allocation, reclaiming terminated instances' addresses when the subnet is full."""

    def allocate(subnet: Any, instance: Any) -> str:
        try:
            return get_available_subnet_ip(subnet, instance)
        except StopIteration:
            holders: dict[str, Any] = subnet._subnet_ips  # address -> instance (or another holder, e.g. EFS)
            gone = [ip for ip, holder in holders.items() if getattr(holder, "state", None) == "terminated"]
            if not gone:
                raise
            for ip in gone:
                subnet.del_subnet_ip(ip)
            return get_available_subnet_ip(subnet, instance)

    return allocate


def install() -> None:
    """Make moto's subnets reclaim terminated instances' addresses when full (idempotent)."""
    from moto.ec2.models.subnets import Subnet

    if getattr(Subnet, _INSTALLED, False):
        return
    Subnet.get_available_subnet_ip = reclaim_when_full(Subnet.get_available_subnet_ip)  # type: ignore[method-assign,assignment]
    setattr(Subnet, _INSTALLED, True)
