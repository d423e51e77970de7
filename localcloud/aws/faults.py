"""Fault injection for the emulated AWS API: what can go wrong on real EC2, described as plain data.

`Faults` is set on a running emulated AWS server (`EmulatedAws.set_faults`) and applied by `FaultMiddleware`
(localcloud/aws/fault_middleware.py) in front of moto. The same injector serves the plugin's moto tests, the local cloud
e2e tests and the demo — nothing in the production code knows it exists.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

CAPACITY_CODES = (
    "InsufficientInstanceCapacity",
    "InsufficientCapacity",
    "InsufficientHostCapacity",
    "MaxSpotInstanceCountExceeded",
    "InstanceLimitExceeded",
    "SpotMaxPriceTooLow",
    "Unsupported",
)


@dataclass(frozen=True)
class CapacityFault:
    """Launches matching every non-None field fail with `code` (None matches anything)."""

    instance_type: str | None = None
    availability_zone: str | None = None
    region: str | None = None
    market: str | None = None  # "spot" | "on-demand"
    code: str = "InsufficientInstanceCapacity"

    def matches(self, instance_type: str | None, availability_zone: str | None, region: str, market: str) -> bool:
        """True when a launch of that type/AZ/region/market is hit by this fault."""
        return (
            (self.instance_type is None or self.instance_type == instance_type)
            and (self.availability_zone is None or self.availability_zone == availability_zone)
            and (self.region is None or self.region == region)
            and (self.market is None or self.market == market)
        )


@dataclass(frozen=True)
class Faults:
    """Everything the emulated AWS does wrong, all off by default."""

    capacity: tuple[CapacityFault, ...] = ()
    throttle_every: int = 0  # every Nth EC2 call answers RequestLimitExceeded (not executed); 0: never
    lose_responses: dict[str, int] = field(default_factory=dict)  # Action -> next N calls executed, answered 500
    lose_every: dict[str, int] = field(default_factory=dict)  # Action -> every Nth call executed, answered 500
    latency_ms: int = 0  # added to every AWS call

    def to_json(self) -> dict[str, Any]:
        """Plain JSON-able dict (for the control endpoint)."""
        data = asdict(self)
        data["capacity"] = [asdict(c) for c in self.capacity]
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Faults:
        """Inverse of to_json; unknown keys are errors."""
        capacity = tuple(CapacityFault(**c) for c in data.get("capacity", []))
        rest = {k: v for k, v in data.items() if k != "capacity"}
        return cls(capacity=capacity, **rest)

    def capacity_error(
        self, instance_type: str | None, availability_zone: str | None, region: str, market: str
    ) -> str | None:
        """The error code a launch of that shape gets, or None when capacity is there."""
        for fault in self.capacity:
            if fault.matches(instance_type, availability_zone, region, market):
                return fault.code
        return None
