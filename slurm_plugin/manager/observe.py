"""Observe the cluster: Slurm nodes from one `scontrol show nodes` and instances from one DescribeInstances per region.

Parsers are pure. Slurm 22.05 has no `--json` for scontrol, so `--oneliner` is the format every version has:
`Key=Value` pairs separated by spaces, where some values contain spaces (`OS=Linux 6.1 #1 SMP ...`) and `Reason=` comes
last with free text and a `[user@time]` stamp. `State=` is `BASE+FLAG+FLAG` (IDLE+CLOUD+POWERED_DOWN,
MIXED+CLOUD+DRAIN+POWER_UP, DOWN+CLOUD+POWERED_DOWN+NOT_RESPONDING). The JSON of newer Slurm (`state` as a string
plus `state_flags`, or a list of names; times as numbers or `{"number": n, "set": true}`) is parsed too.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from datetime import UTC, datetime, tzinfo
from typing import Any

from botocore.exceptions import ClientError

from slurm_plugin.manager.model import Instance, Node, ScheduledEvent
from slurm_plugin.manifest import TAG_CLUSTER, TAG_POOL

# `Key=` at the start of a token (keys are letters, digits and `_`; values may contain `=`).
_KEY = re.compile(r"^([A-Za-z][A-Za-z0-9_]*)=(.*)$")
_STAMP = re.compile(r"^(?P<text>.*?)\s*\[(?P<user>[^@\]\s]*)@(?P<time>\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)\]\s*$")
# Old state-name suffixes (sinfo style) that some outputs append to the base state.
_SUFFIX_FLAGS = {
    "*": "NOT_RESPONDING",
    "~": "POWERED_DOWN",
    "#": "POWERING_UP",
    "%": "POWERING_DOWN",
    "!": "POWER_DOWN",
}
OBSERVED_INSTANCE_STATES = ["pending", "running", "shutting-down", "stopping", "stopped"]
# EC2's scheduled event codes (DescribeInstanceStatus, filter `event.code`)
EVENT_CODES = ["instance-reboot", "system-reboot", "system-maintenance", "instance-retirement", "instance-stop"]
# What the manager acts on, one query each (EC2 ANDs filters of different names): an impaired instance check, an
# impaired system check, a scheduled event.
STATUS_QUERIES = (
    [{"Name": "instance-status.status", "Values": ["impaired"]}],
    [{"Name": "system-status.status", "Values": ["impaired"]}],
    [{"Name": "event.code", "Values": EVENT_CODES}],
)
STATUS_PAGE_SIZE = 1000  # DescribeInstanceStatus MaxResults (5-1000)


class ObserveError(Exception):
    """Slurm or EC2 output could not be understood (one line)."""


# ---------------------------------------------------------------- Slurm
def parse_state(text: str) -> tuple[str, frozenset[str]]:
    """`IDLE+CLOUD+POWERED_DOWN` → ("IDLE", {"CLOUD", "POWERED_DOWN"}); `down*` → ("DOWN", {"NOT_RESPONDING"})."""
    parts = [p for p in text.strip().upper().split("+") if p]
    if not parts:
        return "UNKNOWN", frozenset()
    flags: set[str] = set()
    cleaned = []
    for part in parts:
        while part and part[-1] in _SUFFIX_FLAGS:
            flags.add(_SUFFIX_FLAGS[part[-1]])
            part = part[:-1]
        if part:
            cleaned.append(part)
    base = cleaned[0] if cleaned else "UNKNOWN"
    flags.update(cleaned[1:])
    return base, frozenset(flags)


def split_reason(text: str, tz: tzinfo | None = None) -> tuple[str, datetime | None]:
    """`(Code:X) text [root@2026-11-22T02:46:11]` → ("(Code:X) text", that time in `tz` (default: local time))."""
    match = _STAMP.match(text)
    if not match:
        return text.strip(), None
    stamp = datetime.fromisoformat(match["time"])
    stamp = stamp.replace(tzinfo=tz) if tz is not None else stamp.astimezone()
    return match["text"].strip(), stamp


def oneliner_fields(line: str) -> dict[str, str]:
    """One `scontrol --oneliner show node` line → {key: value}; `Reason` is everything after ` Reason=`."""
    line = line.strip()
    reason: str | None = None
    head = line
    at = line.find(" Reason=")
    if at >= 0:
        head, reason = line[:at], line[at + len(" Reason=") :]
    fields: dict[str, str] = {}
    last: str | None = None
    for token in head.split(" "):
        if not token:
            continue
        match = _KEY.match(token)
        if match:
            last = match[1]
            fields[last] = match[2]
        elif last is not None:
            fields[last] += " " + token  # a value with spaces (OS=Linux 6.1 #1 SMP ...)
    if reason is not None:
        fields["Reason"] = reason.strip()
    return fields


def node_from_fields(fields: Mapping[str, str], tz: tzinfo | None = None) -> Node:
    """A Node from oneliner fields; NodeAddr equal to the name (never addressed) becomes None."""
    name = fields["NodeName"]
    state, flags = parse_state(fields.get("State", ""))
    addr = fields.get("NodeAddr") or None
    reason, when = split_reason(fields.get("Reason", ""), tz)
    return Node(name, state, flags, None if addr in (None, name) else addr, reason, when)


def parse_oneliner(text: str, tz: tzinfo | None = None) -> list[Node]:
    """Every node of `scontrol --oneliner show nodes` output (blank and `No nodes` lines skipped)."""
    nodes = []
    for line in text.splitlines():
        if line.startswith("NodeName="):
            nodes.append(node_from_fields(oneliner_fields(line), tz))
    return nodes


def _number(value: Any) -> int | None:
    if isinstance(value, dict):
        return int(value.get("number", 0)) if value.get("set", True) and not value.get("infinite") else None
    if isinstance(value, int | float):
        return int(value)
    return None


def parse_json(text: str) -> list[Node]:
    """`scontrol --json show nodes` (Slurm 23.02+ data_parser, or the 22.05-era openapi shape) → nodes."""
    try:
        data = json.loads(text)
        raw_nodes = data["nodes"]
    except (ValueError, KeyError, TypeError) as exc:
        raise ObserveError(f"scontrol --json show nodes: unexpected output ({exc})") from None
    nodes = []
    for raw in raw_nodes:
        state_value = raw.get("state", [])
        names = [state_value] if isinstance(state_value, str) else [str(s) for s in state_value]
        names += [str(f) for f in raw.get("state_flags", [])]
        state, flags = parse_state("+".join(names))
        name = str(raw["name"])
        addr = raw.get("address") or None
        changed = _number(raw.get("reason_changed_at"))
        when = datetime.fromtimestamp(changed, UTC) if changed else None
        reason = str(raw.get("reason") or "")
        nodes.append(Node(name, state, flags, None if addr in (None, name) else str(addr), reason, when))
    return nodes


def active_controller(ping: str) -> str | None:
    """The host of the controller in charge from `scontrol ping`: the first one that is UP (primary, then backups)."""
    for line in ping.splitlines():
        match = re.match(r"\s*Slurmctld\((?:primary|backup\d*)\) at (\S+) is UP", line)
        if match:
            return match[1]
    return None


# ---------------------------------------------------------------- EC2
def _tags(raw: Iterable[Mapping[str, str]] | None) -> dict[str, str]:
    return {t["Key"]: t["Value"] for t in raw or () if "Key" in t}


def _aware(value: Any) -> datetime:
    if isinstance(value, datetime):
        return value if value.tzinfo else value.replace(tzinfo=UTC)
    return datetime.fromisoformat(str(value).replace("Z", "+00:00"))


def instance_from_api(raw: Mapping[str, Any], region: str) -> Instance:
    """One DescribeInstances `Instances[]` element → Instance (status fields empty)."""
    tags = _tags(raw.get("Tags"))
    return Instance(
        instance_id=str(raw["InstanceId"]),
        region=region,
        state=str(raw.get("State", {}).get("Name", "unknown")),
        private_ip=raw.get("PrivateIpAddress") or None,
        launch_time=_aware(raw["LaunchTime"]),
        cluster=tags.get(TAG_CLUSTER, ""),
        pool=tags.get(TAG_POOL, ""),
        instance_type=str(raw.get("InstanceType", "")),
        availability_zone=str(raw.get("Placement", {}).get("AvailabilityZone", "")),
        spot=raw.get("InstanceLifecycle") == "spot",
    )


def status_from_api(raw: Mapping[str, Any]) -> tuple[datetime | None, tuple[ScheduledEvent, ...]]:
    """One DescribeInstanceStatus `InstanceStatuses[]` element → (impaired since, scheduled events)."""
    since: list[datetime] = []
    for key in ("InstanceStatus", "SystemStatus"):
        status = raw.get(key, {})
        if status.get("Status") == "impaired":
            for detail in status.get("Details", []):
                if detail.get("ImpairedSince") is not None:
                    since.append(_aware(detail["ImpairedSince"]))
    events = tuple(
        ScheduledEvent(
            code=str(e.get("Code", "")),
            description=str(e.get("Description", "")),
            not_before=_aware(e["NotBefore"]) if e.get("NotBefore") else None,
        )
        for e in raw.get("Events", [])
    )
    return (min(since) if since else None), events


def describe_cluster(client: Any, region: str, cluster: str) -> list[Instance]:
    """The cluster's instances in one region: one filtered, paginated DescribeInstances plus their status."""
    filters = [
        {"Name": f"tag:{TAG_CLUSTER}", "Values": [cluster]},
        {"Name": "instance-state-name", "Values": OBSERVED_INSTANCE_STATES},
    ]
    found: list[Instance] = []
    for page in client.get_paginator("describe_instances").paginate(Filters=filters):
        for reservation in page.get("Reservations", []):
            found.extend(instance_from_api(raw, region) for raw in reservation.get("Instances", []))
    running = [i.instance_id for i in found if i.state == "running"]
    statuses = describe_status(client, running)
    return [_with_status(i, statuses.get(i.instance_id)) for i in found]


def describe_status(client: Any, ids: Sequence[str]) -> dict[str, tuple[datetime | None, tuple[ScheduledEvent, ...]]]:
    """Status checks and scheduled events of the running instances among `ids` that have something to report.

    One filtered, paginated DescribeInstanceStatus per condition the manager acts on (STATUS_QUERIES) for the whole
    region: a constant number of calls however many instances run (asking by id took one call per 100 instances),
    and the answers hold only the few instances in trouble. Instances of other clusters in them are left out."""
    wanted = set(ids)
    result: dict[str, tuple[datetime | None, tuple[ScheduledEvent, ...]]] = {}
    if not wanted:
        return result
    paginator = client.get_paginator("describe_instance_status")
    for filters in STATUS_QUERIES:
        try:
            for page in paginator.paginate(Filters=filters, PaginationConfig={"PageSize": STATUS_PAGE_SIZE}):
                for raw in page.get("InstanceStatuses", []):
                    if str(raw["InstanceId"]) in wanted:  # each answer holds the instance's whole status
                        result[str(raw["InstanceId"])] = status_from_api(raw)
        except ClientError:
            continue  # status is advisory: the next cycle asks again
    return result


def _with_status(inst: Instance, status: tuple[datetime | None, tuple[ScheduledEvent, ...]] | None) -> Instance:
    if status is None:
        return inst
    return replace(inst, impaired_since=status[0], events=status[1])
