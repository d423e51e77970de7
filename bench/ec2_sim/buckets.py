"""EC2's throttling model: token buckets with the documented sizes and refill rates.

Source: Amazon EC2 Developer Guide, "Request throttling for the Amazon EC2 API"
(https://docs.aws.amazon.com/ec2/latest/devguide/ec2-api-throttling.html, also APIReference/throttling.html).
Every account has, per Region, one *request* bucket per API (each request takes one token) and, for RunInstances,
TerminateInstances, StartInstances and StopInstances, a *resource* bucket that "depletes based on the number of
resources that are impacted by the request". "If the bucket is below its maximum capacity, a set number of tokens is
added back to it every second": refills here happen at whole seconds of the clock. The numbers are in `DOCUMENTED`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field, replace


@dataclass(frozen=True)
class BucketSpec:
    """A bucket's maximum capacity (the burst) and refill rate (tokens per second, the sustained rate)."""

    capacity: float
    refill_per_second: float


@dataclass(frozen=True)
class Limits:
    """The request bucket of each API the model answers, and the resource buckets."""

    request: Mapping[str, BucketSpec]
    resource: Mapping[str, BucketSpec]
    # which resource bucket an API's launches or terminations draw on
    resource_of: Mapping[str, str] = field(
        default_factory=lambda: {
            "RunInstances": "RunInstances",
            # Not on the throttling page; aws-parallelcluster-node PR #734 (2026) states that a CreateFleet scale-up
            # exhausts "the RunInstances resource token bucket, which holds 1000 instances and refills at 2/s".
            "CreateFleet": "RunInstances",
            "TerminateInstances": "TerminateInstances",
        }
    )

    def with_launch_refill(self, per_second: float) -> Limits:
        """The same limits with another RunInstances resource refill rate (a limit increase AWS support can grant)."""
        resource = {
            **self.resource,
            "RunInstances": replace(self.resource["RunInstances"], refill_per_second=per_second),
        }
        return replace(self, resource=resource)


UNFILTERED = "DescribeInstances (unfiltered, unpaginated)"

DOCUMENTED = Limits(
    request={
        "RunInstances": BucketSpec(5, 2),  # an "uncategorized action" of its own
        "CreateFleet": BucketSpec(50, 5),  # "Mutating actions"
        "DescribeInstances": BucketSpec(100, 20),  # "Non-mutating actions" (with a filter or pagination)
        UNFILTERED: BucketSpec(50, 10),  # "Unfiltered and unpaginated non-mutating actions"
        "TerminateInstances": BucketSpec(100, 5),  # uncategorized
        "CreateTags": BucketSpec(100, 10),  # uncategorized
    },
    resource={
        "RunInstances": BucketSpec(1000, 2),
        "TerminateInstances": BucketSpec(1000, 20),
    },
)


class TokenBucket:
    """One bucket; starts full; `refill_per_second` tokens are added at each whole second, up to `capacity`."""

    def __init__(self, spec: BucketSpec, now: float) -> None:
        self.spec = spec
        self.tokens = float(spec.capacity)
        self._second = math.floor(now)

    def level(self, now: float) -> float:
        """Tokens available at `now` (after the refills of every whole second since the last look)."""
        second = math.floor(now)
        if second > self._second:
            self.tokens = min(self.spec.capacity, self.tokens + (second - self._second) * self.spec.refill_per_second)
            self._second = second
        return self.tokens

    def take(self, amount: float, now: float) -> bool:
        """Take `amount` tokens if the bucket has them (all or nothing)."""
        if self.level(now) + 1e-9 < amount:
            return False
        self.tokens -= amount
        return True

    def take_up_to(self, wanted: int, now: float) -> int:
        """Take as many whole tokens as the bucket has, at most `wanted`; returns how many."""
        granted = max(0, min(wanted, math.floor(self.level(now) + 1e-9)))
        self.tokens -= granted
        return granted

    def seconds_until(self, amount: float, now: float) -> float:
        """How long until the bucket holds `amount` tokens without further takes (inf if above its capacity)."""
        missing = amount - self.level(now)
        if missing <= 1e-9:
            return 0.0
        if amount > self.spec.capacity or self.spec.refill_per_second <= 0:
            return math.inf
        ticks = math.ceil(missing / self.spec.refill_per_second - 1e-9)
        return math.floor(now) + ticks - now


class AccountBuckets:
    """The buckets of one account: per Region, one request bucket per API and the resource buckets (lazily made)."""

    def __init__(self, limits: Limits) -> None:
        self.limits = limits
        self._buckets: dict[tuple[str, str, str], TokenBucket] = {}

    def _bucket(self, kind: str, region: str, name: str, now: float) -> TokenBucket:
        key = (kind, region, name)
        if key not in self._buckets:
            table = self.limits.request if kind == "request" else self.limits.resource
            self._buckets[key] = TokenBucket(table[name], now)
        return self._buckets[key]

    def request(self, region: str, api: str, now: float) -> TokenBucket:
        """The request bucket of `api` in `region`."""
        return self._bucket("request", region, api, now)

    def resource(self, region: str, api: str, now: float) -> TokenBucket:
        """The resource bucket `api` draws on in `region`."""
        return self._bucket("resource", region, self.limits.resource_of[api], now)
