"""RunInstances answers read, at C speed, only for the instance fields the plugin uses.

botocore reads an XML answer in Python, element by element, through the operation's output shape. An instance in a
RunInstances answer has ~150 elements (network interfaces, block devices, CPU and metadata options, ...); the plugin
reads seven of them (ec2._instance: id, private address, type, AZ, tags, launch time, state). Reading 1,600 whole
instances took botocore 0.85 s of CPU; ElementTree (C) builds the same document's tree in 0.33 s, and reading the
seven fields from it is a few milliseconds (bench/README.md, issue 33).

`read_used_fields` handles botocore's `before-parse.ec2.RunInstances` event, which hands the handler the HTTP answer
before it is parsed. For a successful answer it reads the body with ElementTree, takes the instances out of their
`instancesSet` into `customized_response_dict["Instances"]` (botocore puts these keys over what it parsed, the
event's documented use) and gives botocore the rest: the reservation, its owner and the request id, which botocore
parses as usual. Each instance is what botocore gives for those fields: `InstanceId`, `PrivateIpAddress` and
`InstanceType` (when present), `Placement.AvailabilityZone`, `Tags` (Key, Value), `LaunchTime` (read by the client's
own timestamp parser) and `State` (Code as an int, Name). A body that is no XML, has no `instancesSet`, or
holds anything in those fields that botocore would refuse or read otherwise is left as it came, so botocore reads or
reports it as before (ec2.NO_ANSWER); an error answer is not touched. The one difference: the fields the plugin does
not read are not read at all, so a malformed value there (which botocore would raise on) goes unnoticed.

Only RunInstances is read so, and only on the plugin's own EC2 clients (Ec2.client): no other code of the plugin
reads a RunInstances answer, while DescribeInstances answers are also read by the cluster manager, which reads more.
"""

from __future__ import annotations

import xml.etree.ElementTree as ElementTree
from collections.abc import Callable
from typing import Any

EVENT = "before-parse.ec2.RunInstances"
HANDLER_ID = "elastic-slurm-read-used-fields"
Timestamps = Callable[[str], Any]


def _local(tag: str) -> str:
    """An element's name without its namespace (`{http://ec2.amazonaws.com/doc/...}item` -> `item`)."""
    return tag.rpartition("}")[2]


class _Unusual(Exception):
    """A used field botocore would read differently or refuse: the whole answer is left to botocore."""


def _instance(item: ElementTree.Element, ns: str, timestamp: Timestamps) -> dict[str, Any]:
    """The used fields of one `instancesSet/item`, as botocore names and types them."""
    raw: dict[str, Any] = {}
    for field, name in (("InstanceId", "instanceId"), ("PrivateIpAddress", "privateIpAddress"),
                        ("InstanceType", "instanceType")):  # fmt: skip
        value = item.findtext(ns + name)
        if value is not None:
            raw[field] = value
    zone = item.findtext(f"{ns}placement/{ns}availabilityZone")
    if zone is not None:
        raw["Placement"] = {"AvailabilityZone": zone}
    tags = item.find(ns + "tagSet")
    if tags is not None:
        raw["Tags"] = []
        for tag in tags:
            tag_key, tag_value = tag.find(ns + "key"), tag.find(ns + "value")
            if _local(tag.tag) != "item" or tag_key is None or tag_value is None:
                raise _Unusual("a tag without its key or value")
            raw["Tags"].append({"Key": tag_key.text or "", "Value": tag_value.text or ""})
    launched = item.findtext(ns + "launchTime")
    if launched is not None:
        try:
            raw["LaunchTime"] = timestamp(launched)
        except (ValueError, TypeError, OverflowError) as refused:  # botocore's parser raises it too
            raise _Unusual("launchTime") from refused
    state = item.find(ns + "instanceState")
    if state is not None:
        raw["State"] = {}
        code, called = state.findtext(ns + "code"), state.findtext(ns + "name")
        if code is not None:
            try:
                raw["State"]["Code"] = int(code)
            except ValueError as refused:  # botocore's int() raises it too
                raise _Unusual("instanceState/code") from refused
        if called is not None:
            raw["State"]["Name"] = called
    return raw


def split_instances(body: bytes, timestamp: Timestamps) -> tuple[bytes, list[dict[str, Any]]] | None:
    """(`body` without the items of its `instancesSet`, those instances' used fields), or None, which leaves the
    whole answer to botocore: no XML in UTF-8 (botocore reads it as UTF-8 whatever it declares, and refuses it too),
    no `instancesSet`, a child of one that is not an `item` (botocore would read it as an instance), or a used field
    botocore would refuse or read otherwise (an empty state code or launch time, a tag without its key or value)."""
    try:
        parser = ElementTree.XMLParser(target=ElementTree.TreeBuilder(), encoding="utf-8")  # as botocore's
        parser.feed(body)
        root = parser.close()
    except ElementTree.ParseError:
        return None
    ns = root.tag[: root.tag.index("}") + 1] if root.tag.startswith("{") else ""
    holders = list(root.iter(ns + "instancesSet"))
    if not holders or any(_local(item.tag) != "item" for holder in holders for item in holder):
        return None
    try:
        instances = [_instance(item, ns, timestamp) for holder in holders for item in holder]
    except _Unusual:
        return None
    for holder in holders:
        for item in list(holder):
            holder.remove(item)
    return ElementTree.tostring(root, encoding="utf-8"), instances


def read_used_fields(timestamp: Timestamps) -> Callable[..., None]:
    """botocore's before-parse handler for RunInstances (see the docstring); `timestamp` reads launch times."""

    def handler(response_dict: dict[str, Any], customized_response_dict: dict[str, Any], **_: Any) -> None:
        if int(response_dict.get("status_code", 0)) >= 300:
            return
        body = response_dict.get("body")
        if not isinstance(body, bytes) or not body:
            return
        split = split_instances(body, timestamp)
        if split is not None:
            response_dict["body"], customized_response_dict["Instances"] = split

    return handler


def install(client: Any, timestamp: Timestamps) -> Any:
    """Make `client` (an EC2 client) read RunInstances answers with `read_used_fields` (idempotent per client)."""
    client.meta.events.register(EVENT, read_used_fields(timestamp), unique_id=HANDLER_ID)
    return client
