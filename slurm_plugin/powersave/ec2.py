"""The only EC2 adapter of the plugin: launch (CreateFleet instant / RunInstances), find and terminate instances.

Retries follow one policy, by error class (slurm_plugin/powersave/retry_policy.py): capacity errors are never retried (the
launcher fails over at once), throttling and transport errors are, with the same ClientToken. Every launch carries a
ClientToken (EC2 idempotency) and the launch-request tag: the instances of the launch answer are used first; when a
launch was retried or its answer was lost, the instances it really created are found by that tag. Lookups by id are
batched filters (unknown ids are simply absent, never an error for the whole call) and never raise: what could not be
looked up comes back without an address, so the caller terminates it rather than leaving it unbound.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import boto3
import botocore.session
from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError
from botocore.parsers import ResponseParserError
from botocore.utils import parse_timestamp

from slurm_plugin.manifest import TAG_CLUSTER, TAG_LAUNCH_REQUEST, TAG_POOL
from slurm_plugin.powersave import ec2_answers, retry_policy
from slurm_plugin.powersave.planner import TERMINATE_MAX_IDS, Market, Override, batches
from slurm_plugin.telemetry import events

RETRY_CONFIG = retry_policy.CONFIG
DESCRIBE_MAX_IDS = 200  # values per `instance-id` filter of one DescribeInstances (EC2: up to 200 filter values)
LIVE_STATES = ["pending", "running", "stopping", "stopped"]
# No usable answer: the call may or may not have happened (a garbled 5xx page is no ClientError and no BotoCoreError)
NO_ANSWER = (BotoCoreError, ResponseParserError)


@dataclass(frozen=True)
class Instance:
    """What the plugin needs to know about one EC2 instance."""

    instance_id: str
    region: str
    private_ip: str | None
    instance_type: str
    availability_zone: str
    tags: dict[str, str] = field(default_factory=dict, compare=False)
    launch_time: float | None = field(default=None, compare=False)  # epoch seconds
    state: str = field(default="", compare=False)


@dataclass(frozen=True)
class LaunchRequest:
    """One launch call: `count` instances of the overrides (priority order) in one region and market."""

    region: str
    launch_template_id: str
    market: Market
    overrides: tuple[Override, ...]
    count: int
    token: str
    tags: Mapping[str, str]
    placement_group: str | None = None
    # every instance in one AZ, at least `min_count` (default: all `count`) or none (whole multi-node jobs):
    # RunInstances MinCount, CreateFleet SingleAvailabilityZone + MinTargetCapacity
    all_in_one_az: bool = False
    min_count: int | None = None
    # into this capacity reservation only (CapacityReservationSpecification), a Capacity Block when `capacity_block`
    capacity_reservation_id: str | None = None
    capacity_block: bool = False
    # the launch template has network interfaces (EFA, stacks/launch_templates.py): RunInstances refuses an
    # instance-level SubnetId next to them (InvalidParameterCombination, "If you specify a network interface, you must
    # specify any subnets as part of the network interface", https://docs.aws.amazon.com/AWSEC2/latest/APIReference/
    # API_RunInstances.html), so such launches go through CreateFleet, whose overrides carry the subnet
    efa: bool = False


@dataclass(frozen=True)
class LaunchError:
    """A failure reported by EC2: code, and the override it concerns when known."""

    code: str
    message: str
    instance_type: str | None = None
    subnet_id: str | None = None


@dataclass(frozen=True)
class LaunchResult:
    """Instances really running for a launch request, and the errors EC2 gave."""

    instances: tuple[Instance, ...]
    errors: tuple[LaunchError, ...]
    api: str


@dataclass(frozen=True)
class Recorded:
    """What EC2 says of instances recorded earlier: alive (pending/running/stopping/stopped), gone (terminated, or
    not returned at all), or unsure (the lookup kept failing)."""

    alive: dict[str, Instance]
    gone: list[str]
    unsure: list[str]


def _tags(raw: Iterable[Mapping[str, str]] | None) -> dict[str, str]:
    return {t["Key"]: t["Value"] for t in raw or () if "Key" in t}


def _instance(raw: Mapping[str, Any], region: str) -> Instance:
    return Instance(
        instance_id=raw["InstanceId"],
        region=region,
        private_ip=raw.get("PrivateIpAddress"),
        instance_type=raw.get("InstanceType", ""),
        availability_zone=raw.get("Placement", {}).get("AvailabilityZone", ""),
        tags=_tags(raw.get("Tags")),
        launch_time=raw["LaunchTime"].timestamp() if hasattr(raw.get("LaunchTime"), "timestamp") else None,
        state=str(raw.get("State", {}).get("Name", "")),
    )


def iso_timestamp(value: Any) -> datetime:
    """botocore's timestamp parser with a fast path for EC2's ISO 8601 times (`2026-11-26T02:53:45.000Z`): a
    10,000-instance DescribeInstances has 30,000 of them, and botocore's default (dateutil) took ~0.6 s CPU to read
    them (bench/README.md). Anything else goes to botocore's own parser."""
    if isinstance(value, str):
        try:
            parsed = datetime.fromisoformat(value)
        except ValueError:
            parsed = None
        if parsed is not None and parsed.tzinfo is not None:
            return parsed
    result: datetime = parse_timestamp(value)
    return result


def _minimum(request: LaunchRequest) -> int:
    """The all-or-nothing minimum of a one-AZ launch: `min_count` when set (1..count), else `count`."""
    return request.count if request.min_count is None else max(1, min(request.min_count, request.count))


def _retried(response: Mapping[str, Any]) -> bool:
    return int(response.get("ResponseMetadata", {}).get("RetryAttempts", 0)) > 0


class Ec2:
    """EC2 in any region, through one boto3 client per region (created on first use)."""

    def __init__(
        self, endpoint_url: str | None = None, config: Config = RETRY_CONFIG, state_dir: str | None = None
    ) -> None:
        """`state_dir`: where throttled answers are recorded (the event log); None records nothing."""
        self.endpoint_url = endpoint_url
        self.config = config
        self.state_dir = state_dir
        self._clients: dict[str, Any] = {}
        self._lock = threading.Lock()  # the launcher calls from several threads; boto3 clients are thread-safe
        core = botocore.session.get_session()
        core.get_component("response_parser_factory").set_parser_defaults(timestamp_parser=iso_timestamp)
        self._session = boto3.session.Session(botocore_session=core)

    def client(self, region: str) -> Any:
        """The (cached) EC2 client of `region`."""
        with self._lock:  # a boto3 session is not thread-safe: clients are made one at a time
            if region not in self._clients:
                client = self._session.client(
                    "ec2", region_name=region, endpoint_url=self.endpoint_url, config=self.config
                )
                client = retry_policy.install(client, on_throttle=self._throttled_in(region))
                self._clients[region] = ec2_answers.install(client, iso_timestamp)  # RunInstances: used fields
            return self._clients[region]

    def _throttled_in(self, region: str) -> Callable[[str], None] | None:
        state_dir = self.state_dir
        if state_dir is None:
            return None

        def throttled(api: str) -> None:
            events.record(state_dir, [{"event": "throttled", "api": api, "region": region}])

        return throttled

    # ------------------------------------------------------------------ launch
    def launch(self, request: LaunchRequest) -> LaunchResult:
        """Launch with RunInstances (one override) or CreateFleet instant (several, or any number for a template with
        network interfaces); never raises on EC2 errors."""
        # a reservation is one type in one AZ (an EFA pool with one is refused at synth: stacks/launch_templates.py)
        if request.capacity_reservation_id or (len(request.overrides) == 1 and not request.efa):
            return self._run_instances(request)
        return self._create_fleet(request)

    def _tag_spec(self, request: LaunchRequest) -> list[dict[str, Any]]:
        tags = {**request.tags, TAG_LAUNCH_REQUEST: request.token}
        return [{"ResourceType": "instance", "Tags": [{"Key": k, "Value": v} for k, v in tags.items()]}]

    def _run_instances(self, request: LaunchRequest) -> LaunchResult:
        override = request.overrides[0]
        params: dict[str, Any] = {
            "LaunchTemplate": {"LaunchTemplateId": request.launch_template_id, "Version": "$Default"},
            "InstanceType": override.instance_type,
            "SubnetId": override.subnet_id,
            "MinCount": _minimum(request) if request.all_in_one_az else 1,
            "MaxCount": request.count,
            "ClientToken": request.token,
            "TagSpecifications": self._tag_spec(request),
        }
        if request.market == "spot":
            params["InstanceMarketOptions"] = {"MarketType": "spot"}
        if request.capacity_reservation_id:
            target = {"CapacityReservationId": request.capacity_reservation_id}
            params["CapacityReservationSpecification"] = {"CapacityReservationTarget": target}
            if request.capacity_block:
                params["InstanceMarketOptions"] = {"MarketType": "capacity-block"}
        if request.placement_group:
            params["Placement"] = {"GroupName": request.placement_group}
        try:
            response = self.client(request.region).run_instances(**params)
        except ClientError as exc:
            error = exc.response.get("Error", {})
            code = str(error.get("Code", "Unknown"))
            failure = LaunchError(code, str(error.get("Message", "")), override.instance_type, override.subnet_id)
            return LaunchResult(self._by_token(request), (failure,), "RunInstances")
        except NO_ANSWER as exc:
            return LaunchResult(self._by_token(request), (LaunchError(type(exc).__name__, str(exc)),), "RunInstances")
        found = {i.instance_id: i for i in (_instance(raw, request.region) for raw in response.get("Instances", []))}
        if _retried(response):  # an earlier try may have launched too: its instances carry the same token tag
            found.update({i.instance_id: i for i in self._by_token(request) if i.instance_id not in found})
        return LaunchResult(tuple(found.values()), (), "RunInstances")

    def _create_fleet(self, request: LaunchRequest) -> LaunchResult:
        overrides = []
        for o in request.overrides:
            item: dict[str, Any] = {
                "InstanceType": o.instance_type,
                "SubnetId": o.subnet_id,
                "Priority": float(o.priority),
            }
            if request.placement_group:
                item["Placement"] = {"GroupName": request.placement_group}
            overrides.append(item)
        params: dict[str, Any] = {
            "Type": "instant",
            "ClientToken": request.token,
            "TargetCapacitySpecification": {
                "TotalTargetCapacity": request.count,
                "DefaultTargetCapacityType": request.market,
            },
            "LaunchTemplateConfigs": [
                {
                    "LaunchTemplateSpecification": {
                        "LaunchTemplateId": request.launch_template_id,
                        "Version": "$Default",
                    },
                    "Overrides": overrides,
                }
            ],
            "TagSpecifications": self._tag_spec(request),
        }
        options: dict[str, Any]
        if request.market == "spot":
            options = params["SpotOptions"] = {"AllocationStrategy": "capacity-optimized-prioritized"}
        else:
            options = params["OnDemandOptions"] = {"AllocationStrategy": "prioritized"}
        if request.all_in_one_az:
            options |= {"SingleAvailabilityZone": True, "MinTargetCapacity": _minimum(request)}
        errors: list[LaunchError] = []
        try:
            response = self.client(request.region).create_fleet(**params)
        except ClientError as exc:
            error = exc.response.get("Error", {})
            errors.append(LaunchError(str(error.get("Code", "Unknown")), str(error.get("Message", ""))))
            return LaunchResult(self._by_token(request), tuple(errors), "CreateFleet")
        except NO_ANSWER as exc:
            return LaunchResult(self._by_token(request), (LaunchError(type(exc).__name__, str(exc)),), "CreateFleet")
        for raw in response.get("Errors", []):
            lto = raw.get("LaunchTemplateAndOverrides", {}).get("Overrides", {})
            errors.append(
                LaunchError(
                    str(raw.get("ErrorCode", "Unknown")),
                    str(raw.get("ErrorMessage", "")),
                    lto.get("InstanceType"),
                    lto.get("SubnetId"),
                )
            )
        # CreateFleet answers ids without addresses: one describe by the launch-request tag gives both, and also
        # catches instances of an earlier attempt whose answer was lost.
        found = {i.instance_id: i for i in self._by_token(request)}
        ids = [i for item in response.get("Instances", []) for i in item.get("InstanceIds", [])]
        missing = [i for i in ids if i not in found]
        if missing:  # eventual consistency on real EC2: ask by id
            found.update({i.instance_id: i for i in self.lookup(request.region, missing)})
        return LaunchResult(tuple(found.values()), tuple(errors), "CreateFleet")

    # ------------------------------------------------------------------ find
    def _describe(self, region: str, live_only: bool = True, **params: Any) -> list[Instance]:
        paginator = self.client(region).get_paginator("describe_instances")
        result = []
        for page in paginator.paginate(**params):
            for reservation in page.get("Reservations", []):
                for raw in reservation.get("Instances", []):
                    if not live_only or raw.get("State", {}).get("Name") in LIVE_STATES:
                        result.append(_instance(raw, region))
        return result

    def _by_token(self, request: LaunchRequest) -> tuple[Instance, ...]:
        cluster = request.tags.get(TAG_CLUSTER, "")
        filters = [
            {"Name": f"tag:{TAG_LAUNCH_REQUEST}", "Values": [request.token]},
            {"Name": f"tag:{TAG_CLUSTER}", "Values": [cluster]},
            {"Name": "instance-state-name", "Values": LIVE_STATES},
        ]
        for attempt in range(3):  # on top of the retry policy: this is the only way to find a lost launch's instances
            try:
                return tuple(self._describe(request.region, Filters=filters))
            except (ClientError, *NO_ANSWER):
                time.sleep(attempt + 1)
        return ()  # still unknown: the cluster manager terminates them as orphans after its grace period

    def describe_ids(self, region: str, ids: Sequence[str]) -> list[Instance]:
        """The instances among `ids` in any state, in batches of DESCRIBE_MAX_IDS (paginated); unknown ids are simply
        absent. Raises ClientError/BotoCoreError when a batch still fails after the retry policy."""
        found: list[Instance] = []
        for start in range(0, len(ids), DESCRIBE_MAX_IDS):
            filters = [{"Name": "instance-id", "Values": list(ids[start : start + DESCRIBE_MAX_IDS])}]
            found.extend(self._describe(region, live_only=False, Filters=filters))
        return found

    def lookup(self, region: str, ids: Sequence[str], attempts: int = 3, pause: float = 1.0) -> list[Instance]:
        """Every id of `ids` as an Instance, never raising: ids that stay unknown (eventual consistency) or whose
        lookup keeps failing come back without an address, so the caller terminates them instead of binding them.
        Ids of instances that are already gone (terminated) are left out."""
        found: dict[str, Instance] = {}
        missing = list(dict.fromkeys(ids))
        for attempt in range(attempts):
            if attempt:
                time.sleep(pause * attempt)
            try:
                found.update({i.instance_id: i for i in self.describe_ids(region, missing)})
            except (ClientError, *NO_ANSWER):
                continue
            missing = [i for i in missing if i not in found]
            if not missing:
                break
        unknown = [Instance(i, region, None, "", "") for i in missing]
        return [*(i for i in found.values() if i.state in LIVE_STATES), *unknown]

    def recorded(self, region: str, ids: Sequence[str], attempts: int = 3, pause: float = 1.0) -> Recorded:
        """Which of `ids` (instances bound earlier, so EC2 knew them then) are alive now. An id EC2 does not return
        is gone (terminated and forgotten), never alive; ids whose describe kept failing are `unsure`."""
        missing = list(dict.fromkeys(ids))
        for attempt in range(attempts):
            if attempt:
                time.sleep(pause * attempt)
            try:
                found = {i.instance_id: i for i in self.describe_ids(region, missing)}
            except (ClientError, *NO_ANSWER):
                continue
            alive = {iid: i for iid, i in found.items() if i.state in LIVE_STATES}
            return Recorded(alive, [i for i in missing if i not in alive], [])
        return Recorded({}, [], missing)

    def cluster_instances(self, region: str, cluster: str, pool_keys: Iterable[str]) -> list[Instance]:
        """Live instances of the cluster's pools in one region: one filtered DescribeInstances (paginated)."""
        filters = [
            {"Name": f"tag:{TAG_CLUSTER}", "Values": [cluster]},
            {"Name": f"tag:{TAG_POOL}", "Values": sorted(set(pool_keys))},
            {"Name": "instance-state-name", "Values": LIVE_STATES},
        ]
        return self._describe(region, Filters=filters)

    # ------------------------------------------------------------------ terminate
    def terminate(self, region: str, ids: Sequence[str]) -> None:
        """Terminate instances in batches of TerminateInstances' limit; raises ClientError/BotoCoreError on failure."""
        start = 0
        for size in batches(len(ids), TERMINATE_MAX_IDS):
            self.client(region).terminate_instances(InstanceIds=list(ids[start : start + size]))
            start += size
