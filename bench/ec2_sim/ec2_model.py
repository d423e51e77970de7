"""The EC2 model: what EC2 answers to the calls the plugin makes, with throttling, capacity and boot times.

Answers are plain dicts shaped like botocore's parsed output (`wire` turns them into EC2's XML), or an `ApiError`.
- Request buckets (`buckets.DOCUMENTED`): an empty one answers HTTP 503 `RequestLimitExceeded` (nothing happens).
- The RunInstances resource bucket (CreateFleet draws on it too): CreateFleet instant launches what the bucket allows
  and lists `RequestLimitExceeded` in `Errors`, one entry per override it could not use (HTTP 200; the shape
  aws-parallelcluster-node PRs #578/#734 describe); with `empty_bucket_answer="throttle"` a CreateFleet that can
  launch nothing answers 503 instead (a sensitivity variant). RunInstances: fewer tokens than MinCount is a 503, else it
  launches as many as the tokens, capacity and MaxCount allow. TerminateInstances: fewer tokens than ids is a 503.
- Capacity: per (AZ, instance type) a finite count (given back on termination); each override of each launch also
  fails with probability `ice_rate` (seeded RNG) with `InsufficientInstanceCapacity` (RunInstances: HTTP 500).
- An instance is `pending` for `pending_fraction` of its boot time, then `running`; its boot time (launch to slurmd
  registered) is lognormal. Instances are visible to DescribeInstances at once (no eventual consistency).
"""

from __future__ import annotations

import datetime
import itertools
import math
import random
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from bench.ec2_sim.buckets import DOCUMENTED, UNFILTERED, AccountBuckets, Limits

Answer = dict[str, Any]
THROTTLED = "RequestLimitExceeded"
ICE = "InsufficientInstanceCapacity"
STATE_CODES = {"pending": 0, "running": 16, "shutting-down": 32, "terminated": 48}


@dataclass(frozen=True)
class ApiError(Exception):
    """An error answer: HTTP status, EC2 error code and message."""

    status: int
    code: str
    message: str


@dataclass(frozen=True)
class ModelParams:
    """Everything the model's behaviour depends on (defaults: the documented limits, the benchmark's choices)."""

    limits: Limits = DOCUMENTED
    capacity: Mapping[tuple[str, str], int] = field(default_factory=dict)  # (AZ, type) -> instances; absent: no limit
    ice_rate: float = 0.02  # chance that one override of one launch call fails with InsufficientInstanceCapacity
    boot_median_s: float = 75.0  # launch to slurmd registered, lognormal
    boot_sigma: float = 0.25
    pending_fraction: float = 0.2  # EC2 state `running` after this share of the boot time
    # API latency (virtual seconds): base + per instance launched / described / terminated; a throttled answer is fast
    latency_launch: tuple[float, float] = (0.5, 0.004)
    latency_describe: tuple[float, float] = (0.15, 0.0001)
    latency_terminate: tuple[float, float] = (0.2, 0.001)
    latency_throttled: float = 0.05
    empty_bucket_answer: str = "errors"  # CreateFleet with no launch tokens: "errors" (HTTP 200) or "throttle" (503)
    seed: int = 17


@dataclass
class SimInstance:
    """One instance the model launched."""

    instance_id: str
    region: str
    availability_zone: str
    subnet_id: str
    instance_type: str
    private_ip: str
    launch_time: float
    boot_s: float
    pending_s: float
    market: str
    reservation_id: str
    tags: dict[str, str]
    terminated_at: float | None = None

    def state(self, now: float) -> str:
        """EC2 state at `now`."""
        if self.terminated_at is not None and now >= self.terminated_at:
            return "terminated"
        return "running" if now >= self.launch_time + self.pending_s else "pending"

    @property
    def registered_at(self) -> float:
        """When its slurmd could register (if a node has its address by then)."""
        return self.launch_time + self.boot_s


@dataclass(frozen=True)
class Subnet:
    """A subnet of the modelled network."""

    subnet_id: str
    region: str
    availability_zone: str


class Ec2Model:
    """One account's EC2 in any number of regions, answering `handle(region, action, params)`."""

    def __init__(self, params: ModelParams, subnets: Sequence[Subnet], clock: Callable[[], float]) -> None:
        self.params = params
        self.subnets = {s.subnet_id: s for s in subnets}
        self.clock = clock
        self.buckets = AccountBuckets(params.limits)
        self.rng = random.Random(params.seed)
        self.capacity = dict(params.capacity)
        self.instances: dict[str, SimInstance] = {}
        self.by_ip: dict[str, SimInstance] = {}
        self.calls: Counter[str] = Counter()  # every request that reached EC2 (each retry counts)
        # answers with RequestLimitExceeded: "API" (its request bucket), "API (resource)" (the launch/terminate bucket)
        self.throttled: Counter[str] = Counter()
        self.capacity_errors: Counter[str] = Counter()  # InsufficientInstanceCapacity answers or error entries
        self._tokens: dict[str, Answer] = {}  # ClientToken -> the answer of the launch that used it
        self._ids = itertools.count(1)
        self._hosts: Counter[str] = Counter()
        self._azs = sorted({s.availability_zone for s in subnets})

    # ------------------------------------------------------------------ entry
    def handle(self, region: str, action: str, params: Mapping[str, Any]) -> tuple[Answer, float]:
        """The answer to one request and its latency (virtual seconds); raises ApiError for an error answer."""
        self.calls[action] += 1
        handlers: dict[str, Callable[[str, Mapping[str, Any]], tuple[Answer, float]]] = {
            "CreateFleet": self._create_fleet,
            "RunInstances": self._run_instances,
            "DescribeInstances": self._describe_instances,
            "TerminateInstances": self._terminate_instances,
            "CreateTags": self._create_tags,
        }
        if action not in handlers:
            raise ApiError(400, "InvalidAction", f"the EC2 model does not answer {action}")
        bucket = action
        if action == "DescribeInstances" and not any(k in params for k in ("Filter", "InstanceId", "MaxResults")):
            bucket = UNFILTERED
        if not self.buckets.request(region, bucket, self.clock()).take(1, self.clock()):
            self._throttle(action)
        return handlers[action](region, params)

    def _throttle(self, bucket: str) -> None:
        """Answer 503 RequestLimitExceeded, counted under `bucket` ("API" or "API (resource)")."""
        self.throttled[bucket] += 1
        raise ApiError(503, THROTTLED, "Request limit exceeded.")

    # ------------------------------------------------------------------ launch
    def _launch(self, region: str, subnet: Subnet, itype: str, count: int, market: str, tags: dict[str, str],
                reservation: str) -> list[SimInstance]:  # fmt: skip
        now = self.clock()
        made = []
        key = (subnet.availability_zone, itype)
        if key in self.capacity:
            self.capacity[key] -= count
        for _ in range(count):
            boot = self.rng.lognormvariate(math.log(self.params.boot_median_s), self.params.boot_sigma)
            instance = SimInstance(
                f"i-{next(self._ids):017x}", region, subnet.availability_zone, subnet.subnet_id, itype,
                self._address(subnet.availability_zone), now, boot, boot * self.params.pending_fraction, market,
                reservation, dict(tags),
            )  # fmt: skip
            self.instances[instance.instance_id] = instance
            self.by_ip[instance.private_ip] = instance
            made.append(instance)
        return made

    def _address(self, az: str) -> str:
        """A loopback address never handed out before (127.16+AZ index.x.y), like the local cloud's VPCs."""
        self._hosts[az] += 1
        n = self._hosts[az]
        return f"127.{16 + self._azs.index(az)}.{n // 250 % 256}.{n % 250 + 1}"

    def _room(self, az: str, itype: str) -> int:
        """Instances the (AZ, type) pool can still take (a large number when unlimited)."""
        return max(0, self.capacity.get((az, itype), 10**9))

    def _ice(self, az: str, itype: str) -> bool:
        """This launch gets InsufficientInstanceCapacity in this pool (at random, or the pool is exhausted)."""
        return self.rng.random() < self.params.ice_rate or self._room(az, itype) < 1

    def _create_fleet(self, region: str, params: Mapping[str, Any]) -> tuple[Answer, float]:
        token = str(params.get("ClientToken", ""))
        if token and token in self._tokens:
            return self._tokens[token], self.params.latency_launch[0]
        config = params["LaunchTemplateConfigs"][0]
        template = config["LaunchTemplateSpecification"]
        overrides = sorted(config.get("Overrides", []), key=lambda o: float(o.get("Priority", 0)))
        target = params["TargetCapacitySpecification"]
        count = int(target["TotalTargetCapacity"])
        market = str(target.get("DefaultTargetCapacityType", "on-demand"))
        options = params.get("OnDemandOptions" if market == "on-demand" else "SpotOptions", {})
        single_az = str(options.get("SingleAvailabilityZone", "false")).lower() == "true"
        minimum = int(options.get("MinTargetCapacity", 0)) if single_az else 0
        tags = _instance_tags(params)
        now = self.clock()
        launch_bucket = self.buckets.resource(region, "CreateFleet", now)
        tokens = math.floor(launch_bucket.level(now) + 1e-9)
        if tokens < max(1, minimum) and self.params.empty_bucket_answer == "throttle":
            self._throttle("CreateFleet (resource)")
        reservation = f"r-{next(self._ids):017x}"
        errors: list[Answer] = []
        groups: list[Answer] = []
        need = count
        plan: list[tuple[Mapping[str, Any], int]] = []
        for override in overrides:
            subnet = self.subnets[str(override["SubnetId"])]
            itype = str(override["InstanceType"])
            if need <= 0:
                break
            if self._ice(subnet.availability_zone, itype):
                errors.append(_fleet_error(template, override, market, ICE, "There is no Spot/On-Demand capacity."))
                self.capacity_errors["CreateFleet"] += 1
                continue
            if tokens <= 0:
                errors.append(_fleet_error(template, override, market, THROTTLED, "Request limit exceeded."))
                continue
            take = min(need, tokens, self._room(subnet.availability_zone, itype))
            plan.append((override, take))
            need -= take
            tokens -= take
        if single_az and (
            count - need < minimum or len({self.subnets[o["SubnetId"]].availability_zone for o, _ in plan}) > 1
        ):
            # all or nothing in one AZ: the model grants it only when one AZ's first pools hold it all
            code = THROTTLED if any(e["ErrorCode"] == THROTTLED for e in errors) else ICE
            plan, errors = (
                [],
                [_fleet_error(template, o, market, code, "MinTargetCapacity not met.") for o in overrides],
            )
            if code == ICE:
                self.capacity_errors["CreateFleet"] += len(overrides)
        if any(e["ErrorCode"] == THROTTLED for e in errors):
            self.throttled["CreateFleet (resource)"] += 1
        launched = 0
        for override, take in plan:
            subnet = self.subnets[str(override["SubnetId"])]
            made = self._launch(region, subnet, str(override["InstanceType"]), take, market, tags, reservation)
            launch_bucket.take(take, now)
            launched += take
            groups.append(
                {"LaunchTemplateAndOverrides": {"LaunchTemplateSpecification": dict(template),
                                                "Overrides": _override_out(override)},
                 "Lifecycle": market, "InstanceIds": [i.instance_id for i in made],
                 "InstanceType": str(override["InstanceType"])}
            )  # fmt: skip
        answer: Answer = {"FleetId": f"fleet-{next(self._ids):017x}", "Errors": errors, "Instances": groups}
        if token:
            self._tokens[token] = answer
        return answer, self._latency(self.params.latency_launch, launched)

    def _run_instances(self, region: str, params: Mapping[str, Any]) -> tuple[Answer, float]:
        token = str(params.get("ClientToken", ""))
        if token and token in self._tokens:
            return self._tokens[token], self.params.latency_launch[0]
        subnet = self.subnets[str(params["SubnetId"])]
        itype = str(params.get("InstanceType", "c7i.large"))
        low, high = int(params["MinCount"]), int(params["MaxCount"])
        market = str(params.get("InstanceMarketOptions", {}).get("MarketType", "on-demand"))
        now = self.clock()
        bucket = self.buckets.resource(region, "RunInstances", now)
        if bucket.level(now) + 1e-9 < low:
            self._throttle("RunInstances (resource)")
        room = self._room(subnet.availability_zone, itype)
        if self.rng.random() < self.params.ice_rate or room < low:
            self.capacity_errors["RunInstances"] += 1
            raise ApiError(500, ICE, f"We currently do not have sufficient {itype} capacity in the Availability Zone you requested.")  # fmt: skip
        count = min(high, room, math.floor(bucket.level(now) + 1e-9))
        bucket.take(count, now)
        reservation = f"r-{next(self._ids):017x}"
        made = self._launch(region, subnet, itype, count, market, _instance_tags(params), reservation)
        answer: Answer = {"ReservationId": reservation, "OwnerId": "123456789012", "Groups": [],
                          "Instances": [self._describe(i, now) for i in made]}  # fmt: skip
        if token:
            self._tokens[token] = answer
        return answer, self._latency(self.params.latency_launch, count)

    # ------------------------------------------------------------------ find, tag, terminate
    def _describe_instances(self, region: str, params: Mapping[str, Any]) -> tuple[Answer, float]:
        now = self.clock()
        wanted_ids = {str(i) for i in params.get("InstanceId", [])}
        filters = [(str(f["Name"]), {str(v) for v in f.get("Value", [])}) for f in params.get("Filter", [])]
        found = [
            i for i in self.instances.values()
            if i.region == region and (not wanted_ids or i.instance_id in wanted_ids) and _matches(i, filters, now)
        ]  # fmt: skip
        start = int(params.get("NextToken", 0) or 0)
        size = int(params.get("MaxResults", 0) or 0) or len(found) or 1
        page = found[start : start + size]
        reservations: dict[str, list[Answer]] = {}
        for instance in page:
            reservations.setdefault(instance.reservation_id, []).append(self._describe(instance, now))
        answer: Answer = {
            "Reservations": [{"ReservationId": r, "OwnerId": "123456789012", "Instances": items}
                             for r, items in reservations.items()],
        }  # fmt: skip
        if start + size < len(found):
            answer["NextToken"] = str(start + size)
        return answer, self._latency(self.params.latency_describe, len(page))

    def _describe(self, instance: SimInstance, now: float) -> Answer:
        state = instance.state(now)
        return {
            "InstanceId": instance.instance_id,
            "InstanceType": instance.instance_type,
            "LaunchTime": datetime.datetime.fromtimestamp(instance.launch_time, tz=datetime.UTC),
            "Placement": {"AvailabilityZone": instance.availability_zone},
            "PrivateIpAddress": instance.private_ip,
            "SubnetId": instance.subnet_id,
            "State": {"Code": STATE_CODES[state], "Name": state},
            "Tags": [{"Key": k, "Value": v} for k, v in instance.tags.items()],
        }

    def _create_tags(self, region: str, params: Mapping[str, Any]) -> tuple[Answer, float]:
        for resource in params.get("ResourceId", []):
            if str(resource) in self.instances:
                self.instances[str(resource)].tags.update(
                    {str(t["Key"]): str(t.get("Value", "")) for t in params.get("Tag", [])}
                )
        return {}, self.params.latency_describe[0]

    def _terminate_instances(self, region: str, params: Mapping[str, Any]) -> tuple[Answer, float]:
        ids = [str(i) for i in params.get("InstanceId", [])]
        unknown = [i for i in ids if i not in self.instances or self.instances[i].region != region]
        if unknown:
            raise ApiError(400, "InvalidInstanceID.NotFound", f"The instance IDs '{', '.join(unknown)}' do not exist")
        now = self.clock()
        live = [self.instances[i] for i in ids if self.instances[i].state(now) != "terminated"]
        if not self.buckets.resource(region, "TerminateInstances", now).take(len(live), now):
            self._throttle("TerminateInstances (resource)")
        changes = []
        for instance in (self.instances[i] for i in ids):
            before = instance.state(now)
            if before != "terminated":
                instance.terminated_at = now
                key = (instance.availability_zone, instance.instance_type)
                if key in self.capacity:
                    self.capacity[key] += 1
            changes.append({"InstanceId": instance.instance_id, "PreviousState": {"Code": STATE_CODES[before], "Name": before},
                            "CurrentState": {"Code": 32, "Name": "shutting-down"}})  # fmt: skip
        return {"TerminatingInstances": changes}, self._latency(self.params.latency_terminate, len(ids))

    def _latency(self, cost: tuple[float, float], items: int) -> float:
        return cost[0] + cost[1] * items

    def throttle_latency(self) -> float:
        """How long a throttled answer takes."""
        return self.params.latency_throttled

    def live(self, now: float) -> list[SimInstance]:
        """Instances not terminated at `now`."""
        return [i for i in self.instances.values() if i.state(now) != "terminated"]


def _instance_tags(params: Mapping[str, Any]) -> dict[str, str]:
    """Tags of the `instance` TagSpecification of a launch."""
    for spec in params.get("TagSpecification", []):
        if spec.get("ResourceType") == "instance":
            return {str(t["Key"]): str(t.get("Value", "")) for t in spec.get("Tag", [])}
    return {}


def _matches(instance: SimInstance, filters: list[tuple[str, set[str]]], now: float) -> bool:
    """EC2 filter semantics: every filter matches (AND), any of its values (OR)."""
    for name, values in filters:
        if name == "instance-id":
            value: str | None = instance.instance_id
        elif name == "instance-state-name":
            value = instance.state(now)
        elif name.startswith("tag:"):
            value = instance.tags.get(name[4:])
        elif name == "tag-key":
            if not values & set(instance.tags):
                return False
            continue
        elif name == "availability-zone":
            value = instance.availability_zone
        else:
            raise ApiError(400, "InvalidParameterValue", f"The filter '{name}' is invalid")
        if value not in values:
            return False
    return True


def _override_out(override: Mapping[str, Any]) -> Answer:
    return {"InstanceType": str(override["InstanceType"]), "SubnetId": str(override["SubnetId"]),
            "Priority": float(override.get("Priority", 0))}  # fmt: skip


def _fleet_error(
    template: Mapping[str, Any], override: Mapping[str, Any], market: str, code: str, message: str
) -> Answer:
    return {
        "LaunchTemplateAndOverrides": {
            "LaunchTemplateSpecification": dict(template),
            "Overrides": _override_out(override),
        },
        "Lifecycle": market,
        "ErrorCode": code,
        "ErrorMessage": message,
    }
