"""The only EC2 adapter of the plugin: launch (CreateFleet instant / RunInstances), find and terminate instances.

Retries live in one place: botocore's `standard` retry mode with a per-call attempt budget and timeouts (RETRY_CONFIG).
Every launch carries a ClientToken (EC2 idempotency) and the launch-request tag; when a launch was retried or its
answer was lost, the instances it really created are found by that tag (one filtered DescribeInstances).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import boto3
from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError

from slurm_plugin.manifest import TAG_CLUSTER, TAG_LAUNCH_REQUEST, TAG_POOL
from slurm_plugin.planner import TERMINATE_MAX_IDS, Market, Override, batches

RETRY_CONFIG = Config(
    retries={"mode": "standard", "max_attempts": 6},
    connect_timeout=10,
    read_timeout=60,
)
LIVE_STATES = ["pending", "running", "stopping", "stopped"]


@dataclass(frozen=True)
class Instance:
    """What the plugin needs to know about one EC2 instance."""

    instance_id: str
    region: str
    private_ip: str | None
    instance_type: str
    availability_zone: str
    tags: dict[str, str] = field(default_factory=dict, compare=False)


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
    )


def _retried(response: Mapping[str, Any]) -> bool:
    return int(response.get("ResponseMetadata", {}).get("RetryAttempts", 0)) > 0


class Ec2:
    """EC2 in any region, through one boto3 client per region (created on first use)."""

    def __init__(self, endpoint_url: str | None = None, config: Config = RETRY_CONFIG) -> None:
        self.endpoint_url = endpoint_url
        self.config = config
        self._clients: dict[str, Any] = {}
        self._session = boto3.session.Session()

    def client(self, region: str) -> Any:
        """The (cached) EC2 client of `region`."""
        if region not in self._clients:
            self._clients[region] = self._session.client(
                "ec2", region_name=region, endpoint_url=self.endpoint_url, config=self.config
            )
        return self._clients[region]

    # ------------------------------------------------------------------ launch
    def launch(self, request: LaunchRequest) -> LaunchResult:
        """Launch with RunInstances (one override) or CreateFleet instant (several); never raises on EC2 errors."""
        if len(request.overrides) == 1:
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
            "MinCount": 1,
            "MaxCount": request.count,
            "ClientToken": request.token,
            "TagSpecifications": self._tag_spec(request),
        }
        if request.market == "spot":
            params["InstanceMarketOptions"] = {"MarketType": "spot"}
        if request.placement_group:
            params["Placement"] = {"GroupName": request.placement_group}
        try:
            response = self.client(request.region).run_instances(**params)
        except ClientError as exc:
            error = exc.response.get("Error", {})
            code = str(error.get("Code", "Unknown"))
            failure = LaunchError(code, str(error.get("Message", "")), override.instance_type, override.subnet_id)
            return LaunchResult(self._by_token(request), (failure,), "RunInstances")
        except BotoCoreError as exc:
            return LaunchResult(self._by_token(request), (LaunchError(type(exc).__name__, str(exc)),), "RunInstances")
        if _retried(response):
            return LaunchResult(self._by_token(request), (), "RunInstances")
        instances = tuple(_instance(raw, request.region) for raw in response.get("Instances", []))
        return LaunchResult(instances, (), "RunInstances")

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
        if request.market == "spot":
            params["SpotOptions"] = {"AllocationStrategy": "capacity-optimized-prioritized"}
        else:
            params["OnDemandOptions"] = {"AllocationStrategy": "prioritized"}
        errors: list[LaunchError] = []
        try:
            response = self.client(request.region).create_fleet(**params)
        except ClientError as exc:
            error = exc.response.get("Error", {})
            errors.append(LaunchError(str(error.get("Code", "Unknown")), str(error.get("Message", ""))))
            return LaunchResult(self._by_token(request), tuple(errors), "CreateFleet")
        except BotoCoreError as exc:
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
        if missing:  # eventual consistency on real EC2: ask by id once
            found.update(
                {
                    i.instance_id: i
                    for i in self.describe_ids(request.region, request.tags.get(TAG_CLUSTER, ""), missing)
                }
            )
        return LaunchResult(tuple(found.values()), tuple(errors), "CreateFleet")

    # ------------------------------------------------------------------ find
    def _describe(self, region: str, **params: Any) -> list[Instance]:
        paginator = self.client(region).get_paginator("describe_instances")
        result = []
        for page in paginator.paginate(**params):
            for reservation in page.get("Reservations", []):
                for raw in reservation.get("Instances", []):
                    if raw.get("State", {}).get("Name") in LIVE_STATES:
                        result.append(_instance(raw, region))
        return result

    def _by_token(self, request: LaunchRequest) -> tuple[Instance, ...]:
        cluster = request.tags.get(TAG_CLUSTER, "")
        filters = [
            {"Name": f"tag:{TAG_LAUNCH_REQUEST}", "Values": [request.token]},
            {"Name": f"tag:{TAG_CLUSTER}", "Values": [cluster]},
            {"Name": "instance-state-name", "Values": LIVE_STATES},
        ]
        try:
            return tuple(self._describe(request.region, Filters=filters))
        except (ClientError, BotoCoreError):
            return ()

    def describe_ids(self, region: str, cluster: str, ids: Sequence[str]) -> list[Instance]:
        """Live instances of the cluster among `ids` (unknown ids are simply absent)."""
        filters = [{"Name": f"tag:{TAG_CLUSTER}", "Values": [cluster]}]
        try:
            return self._describe(region, InstanceIds=list(ids), Filters=filters)
        except ClientError:
            return []

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
