"""The EC2 model behind a real botocore client: a `before-send` hook answers each HTTP request from the model.

Everything above the HTTP layer is real: the plugin's EC2 adapter, botocore's serializer (EC2 query protocol), its
response parser, and its retry handler with the plugin's policy (slurm_plugin/powersave/retry_policy.py), whose
backoff sleeps go through the patched `time.sleep` (virtual time). The hook decodes the query-string body, asks the
model, waits the answer's latency (virtual), and returns EC2's XML: the success shape is written from botocore's own
output shape of the operation, errors in EC2's `<Response><Errors><Error>` form.
"""

from __future__ import annotations

import datetime
import time
from collections.abc import Iterator, Mapping
from typing import Any
from urllib.parse import parse_qsl
from xml.sax.saxutils import escape

import boto3
from botocore.awsrequest import AWSPreparedRequest, AWSResponse
from botocore.compat import HTTPHeaders
from botocore.model import Shape

from bench.ec2_sim.ec2_model import ApiError, Ec2Model
from slurm_plugin.powersave.ec2 import Ec2

XMLNS = "http://ec2.amazonaws.com/doc/2016-11-15/"


class _Body:
    """The `raw` of an AWSResponse: botocore reads it with `stream()`."""

    def __init__(self, data: bytes) -> None:
        self._data = data

    def stream(self, **_: Any) -> Iterator[bytes]:
        yield self._data


def parse_query(body: str | bytes) -> tuple[str, dict[str, Any]]:
    """`Action=X&A.1.B=v&...` -> ("X", {"A": [{"B": "v"}], ...}): dotted keys nested, numbered parts as lists."""
    text = body.decode() if isinstance(body, bytes) else body
    tree: dict[str, Any] = {}
    for key, value in parse_qsl(text, keep_blank_values=True):
        node = tree
        parts = key.split(".")
        for part in parts[:-1]:
            node = node.setdefault(part, {})
        node[parts[-1]] = value
    action = str(tree.pop("Action", ""))
    tree.pop("Version", None)
    return action, _lists(tree)


def _lists(node: Any) -> Any:
    """Dicts whose keys are all numbers become lists in that order."""
    if not isinstance(node, dict):
        return node
    items = {k: _lists(v) for k, v in node.items()}
    if items and all(k.isdigit() for k in items):
        return [items[k] for k in sorted(items, key=int)]
    return items


def to_xml(shape: Shape, value: Any, name: str) -> str:
    """`value` (botocore's parsed form) as EC2 XML for `shape`, in an element called `name`."""
    if shape.type_name == "structure":
        members = shape.members  # type: ignore[attr-defined]
        inner = "".join(
            to_xml(members[key], item, members[key].serialization.get("name", key))
            for key, item in value.items()
            if key in members and item is not None
        )
        return f"<{name}>{inner}</{name}>"
    if shape.type_name == "list":
        member = shape.member  # type: ignore[attr-defined]
        tag = member.serialization.get("name", "item")
        return f"<{name}>{''.join(to_xml(member, item, tag) for item in value)}</{name}>"
    if shape.type_name == "boolean":
        text = "true" if value else "false"
    elif shape.type_name == "timestamp" and isinstance(value, datetime.datetime):
        text = value.astimezone(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%S.000Z")
    else:
        text = str(value)
    return f"<{name}>{escape(text)}</{name}>"


def success_xml(shape: Shape | None, action: str, answer: Mapping[str, Any], request_id: str) -> bytes:
    """A success response document."""
    inner = "" if shape is None else to_xml(shape, answer, "x")[3:-4]
    return f'<{action}Response xmlns="{XMLNS}"><requestId>{request_id}</requestId>{inner}</{action}Response>'.encode()


def error_xml(code: str, message: str, request_id: str) -> bytes:
    """EC2's error document."""
    return (
        f"<Response><Errors><Error><Code>{escape(code)}</Code><Message>{escape(message)}</Message></Error></Errors>"
        f"<RequestID>{request_id}</RequestID></Response>"
    ).encode()


def install(client: Any, model: Ec2Model) -> None:
    """Answer every request of `client` (an EC2 client) from `model`; nothing goes on the network."""
    region = str(client.meta.region_name)
    service = client.meta.service_model
    counter = iter(range(1, 1 << 62))

    def answer(request: AWSPreparedRequest, **_: Any) -> AWSResponse:
        action, params = parse_query(request.body if isinstance(request.body, str | bytes) else b"")
        request_id = f"sim-{next(counter)}"
        try:
            result, latency = model.handle(region, action, params)
            body = success_xml(service.operation_model(action).output_shape, action, result, request_id)
            status = 200
        except ApiError as error:
            body, status = error_xml(error.code, error.message, request_id), error.status
            latency = model.throttle_latency() if status == 503 else model.params.latency_describe[0]
        time.sleep(latency)  # the virtual clock's sleep: other simulated processes run meanwhile
        headers = HTTPHeaders()
        headers["Content-Type"] = "text/xml"
        return AWSResponse(request.url, status, headers, _Body(body))

    client.meta.events.register("before-send.ec2", answer)


class SimEc2(Ec2):
    """The plugin's EC2 adapter (unchanged) whose clients are answered by the model."""

    # never contacted: the before-send hook answers first
    ENDPOINT = "http://127.0.0.1:9"

    def __init__(self, model: Ec2Model, state_dir: str | None = None) -> None:
        super().__init__(self.ENDPOINT, state_dir=state_dir)
        self.model = model
        # dummy keys: requests are signed (botocore's real path) but never sent; no real credentials are looked up
        self._session = boto3.session.Session(aws_access_key_id="sim", aws_secret_access_key="sim")

    def client(self, region: str) -> Any:
        """The plugin's client of `region` (retry policy installed), answered by the model."""
        fresh = region not in self._clients
        made = super().client(region)
        if fresh:
            install(made, self.model)
        return made
