"""DescribeInstanceTopology for the emulated EC2 (moto has no such action): deterministic network nodes per instance.

Real EC2 answers for running instances of the supported instance types only (docs/topology.md); here every running
instance gets three network nodes, derived from where and how it was launched, so a test knows which instances share
one:
- layer 1 (top): one per Availability Zone;
- layer 2: one per AZ and cluster placement group (instances in no group share their AZ's);
- layer 3 (the instance's own): one per launch call in that AZ and group — the `elastic-slurm:launch-request` tag the
  plugin puts on every launch, else moto's reservation — as instances launched together into a cluster placement
  group tend to land close together.
An instance in another state is listed with no network nodes (as EC2 does). The request rules EC2 documents are
enforced: at most 100 InstanceIds (and GroupNames), MaxResults (1-100, default 20) not together with InstanceIds, the
`availability-zone`, `instance-type` (with wildcards) and `zone-id` filters, pages with NextToken.
"""

from __future__ import annotations

import base64
import fnmatch
import hashlib
import re
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from xml.sax.saxutils import escape

from localcloud.aws.fault_middleware import ec2_error
from slurm_plugin.manifest import TAG_LAUNCH_REQUEST

MAX_IDS = 100
DEFAULT_PAGE = 20
MAX_PAGE = 100
_FILTER_NAME = re.compile(r"^Filter\.(\d+)\.Name$")
Answer = tuple[str, list[tuple[str, str]], bytes]


@dataclass(frozen=True)
class EmulatedInstance:
    """What the answer needs of one instance of the emulated EC2."""

    instance_id: str
    instance_type: str
    availability_zone: str
    zone_id: str
    state: str
    group_name: str  # cluster placement group, "" for none
    launch_group: str  # the launch-request tag, else the reservation id


def network_node(*parts: str) -> str:
    """A stable network node id (`nn-` and 17 hex digits, as EC2's look) for a place."""
    return "nn-" + hashlib.sha256("/".join(parts).encode()).hexdigest()[:17]


def network_nodes(instance: EmulatedInstance) -> tuple[str, ...]:
    """The instance's network nodes, top layer first; none unless it is running."""
    if instance.state != "running":
        return ()
    az, group = instance.availability_zone, instance.group_name
    return (network_node(az), network_node(az, group), network_node(az, group, instance.launch_group))


def launch_group(tags: Mapping[str, str], reservation_id: str) -> str:
    """The launch an instance came from: the plugin's launch-request tag, else its reservation."""
    return tags.get(TAG_LAUNCH_REQUEST) or reservation_id


def describe_instance_topology(params: Mapping[str, str], instances: Iterable[EmulatedInstance]) -> Answer:
    """The query-protocol answer (XML) to one DescribeInstanceTopology request over the region's instances."""
    ids = [value for key, value in sorted(params.items(), key=_index) if key.startswith("InstanceId.")]
    groups = [value for key, value in params.items() if key.startswith("GroupName.")]
    if len(ids) > MAX_IDS or len(groups) > MAX_IDS:
        return ec2_error("InvalidParameterValue", f"At most {MAX_IDS} instance IDs or group names.", "400 Bad Request")
    if ids and "MaxResults" in params:
        return ec2_error(
            "InvalidParameterCombination", "MaxResults cannot be used with InstanceIds.", "400 Bad Request"
        )
    page = _int(params.get("MaxResults", ""), DEFAULT_PAGE)
    if page is None or not 1 <= page <= MAX_PAGE:
        return ec2_error("InvalidParameterValue", f"MaxResults must be 1 to {MAX_PAGE}.", "400 Bad Request")
    selected = _filtered(params, [i for i in instances if i.state != "terminated"])
    if isinstance(selected, tuple):
        return selected
    if ids:
        known = {i.instance_id for i in selected}
        missing = [i for i in ids if i not in known]
        if missing:
            return ec2_error(
                "InvalidInstanceID.NotFound", f"The instance IDs '{', '.join(missing)}' do not exist", "400 Bad Request"
            )
        selected = [i for i in selected if i.instance_id in set(ids)]
        page = MAX_IDS  # the listed instances come in one answer
    if groups:
        selected = [i for i in selected if i.group_name in groups]
    start = _int(_untoken(params.get("NextToken", "")), 0)
    if start is None or start < 0:
        return ec2_error("InvalidParameterValue", "The NextToken is not valid.", "400 Bad Request")
    chunk = selected[start : start + page]
    more = start + page < len(selected)
    return _response(chunk, _token(start + page) if more else None)


def _index(item: tuple[str, str]) -> tuple[str, int]:
    key = item[0]
    head, _, tail = key.rpartition(".")
    return (head, int(tail)) if tail.isdigit() else (key, 0)


def _int(text: str, default: int) -> int | None:
    if text == "":
        return default
    try:
        return int(text)
    except ValueError:
        return None


def _token(offset: int) -> str:
    return base64.urlsafe_b64encode(f"offset:{offset}".encode()).decode()


def _untoken(token: str) -> str:
    if not token:
        return ""
    try:
        text = base64.urlsafe_b64decode(token.encode()).decode()
    except ValueError:
        return "bad"
    return text.removeprefix("offset:") if text.startswith("offset:") else "bad"


_FILTERS: dict[str, Callable[[EmulatedInstance, str], bool]] = {
    "availability-zone": lambda inst, value: inst.availability_zone == value,
    "zone-id": lambda inst, value: inst.zone_id == value,
    "instance-type": lambda inst, value: fnmatch.fnmatchcase(inst.instance_type, value),
}


def _filtered(params: Mapping[str, str], instances: list[EmulatedInstance]) -> list[EmulatedInstance] | Answer:
    for key, name in params.items():
        match = _FILTER_NAME.match(key)
        if not match:
            continue
        test = _FILTERS.get(name)
        if test is None:
            return ec2_error("InvalidParameterValue", f"The filter '{name}' is invalid", "400 Bad Request")
        prefix = f"Filter.{match[1]}.Value."
        values = [v for k, v in params.items() if k.startswith(prefix)]
        instances = [i for i in instances if any(test(i, value) for value in values)]
    return instances


def _response(instances: list[EmulatedInstance], next_token: str | None) -> Answer:
    items = []
    for inst in instances:
        nodes = "".join(f"<item>{escape(n)}</item>" for n in network_nodes(inst))
        group = f"<groupName>{escape(inst.group_name)}</groupName>" if inst.group_name else ""
        items.append(
            f"<item><instanceId>{escape(inst.instance_id)}</instanceId>"
            f"<instanceType>{escape(inst.instance_type)}</instanceType>{group}"
            f"<networkNodeSet>{nodes}</networkNodeSet>"
            f"<availabilityZone>{escape(inst.availability_zone)}</availabilityZone>"
            f"<zoneId>{escape(inst.zone_id)}</zoneId></item>"
        )
    token = f"<nextToken>{escape(next_token)}</nextToken>" if next_token else ""
    body = (
        '<?xml version="1.0" encoding="UTF-8"?>'
        '<DescribeInstanceTopologyResponse xmlns="http://ec2.amazonaws.com/doc/2016-11-15/">'
        f"<requestId>{uuid.uuid4()}</requestId><instanceSet>{''.join(items)}</instanceSet>{token}"
        "</DescribeInstanceTopologyResponse>"
    ).encode()
    return "200 OK", [("Content-Type", "text/xml"), ("Content-Length", str(len(body)))], body
