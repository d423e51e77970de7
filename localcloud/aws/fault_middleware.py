"""WSGI middleware in front of moto: counts calls, injects `Faults`, and gives EC2 launches real-EC2 semantics.

What it adds to moto, request by request:
- call counts by `service:Action` (the benchmark's and the tests' way to count AWS calls);
- latency, throttling (`RequestLimitExceeded`, 503, call not executed) and lost responses (call executed, 500 returned);
- capacity errors: RunInstances fails as a whole (HTTP 500, like EC2); CreateFleet instant drops the matching overrides
  and reports each in the response's `errorSet`, as EC2 does;
- ClientToken idempotency for RunInstances/CreateFleet (moto ignores ClientToken; EC2 returns the first answer again,
  also to a retry that arrives while the first request is still being served);
- RunInstances launches up to MaxCount when capacity is there, as EC2 does (moto launches only MinCount);
- prices, which moto lacks: the Price List API (`pricing` GetProducts, localcloud/aws/price_list.py) and
  DescribeSpotPriceHistory with per-AZ prices from the same table (localcloud/aws/spot_history.py);
- DescribeInstanceTopology, which moto lacks: network nodes per instance (localcloud/aws/instance_topology.py).
Control endpoints (JSON): POST /_localcloud/faults, GET /_localcloud/calls, POST /_localcloud/calls/reset;
PUT /_localcloud/wait-condition/<token> stores a signal as a CloudFormation wait condition handle receives it (the
token is the capability, as the handle's pre-signed URL is), GET returns the signals it received;
GET /_localcloud/ec2-changes?after=N&wait=S answers `{"generation": G}`, EC2's change count — one more for every EC2
or Auto Scaling call that is not a Describe/Get/List — as soon as G differs from N, or after S seconds (at most 30):
the instance runner watches EC2 through it instead of polling DescribeInstances (localcloud/instances/ec2_changes.py).
"""

from __future__ import annotations

import contextlib
import io
import json
import re
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterable
from typing import Any
from urllib.parse import parse_qsl, urlencode
from xml.sax.saxutils import escape

from localcloud.aws import price_list, spot_history
from localcloud.aws.faults import Faults

StartResponse = Callable[..., Any]
WAIT_CONDITION_PATH = "/_localcloud/wait-condition/"
WsgiApp = Callable[[dict[str, Any], StartResponse], Iterable[bytes]]
# (ec2 region, thing) → answer; looked up in the moto backend of the same process.
SubnetAz = Callable[[str, str], str | None]
TemplateType = Callable[[str, str], str | None]
SpotOffers = Callable[[str], Iterable[spot_history.Offer]]  # ec2 region → the (type, AZ) pairs EC2 offers
Answer = tuple[str, list[tuple[str, str]], bytes]
Topology = Callable[[str, dict[str, str]], Answer]  # (ec2 region, params) → DescribeInstanceTopology's answer

_CREDENTIAL = re.compile(r"Credential=[^/]+/\d{8}/([a-z0-9-]+)/([a-z0-9-]+)/aws4_request")
_OVERRIDE = re.compile(r"^LaunchTemplateConfigs\.(\d+)\.Overrides\.(\d+)\.(.+)$")
_IDEMPOTENT = ("RunInstances", "CreateFleet")
CHANGES_PATH = "/_localcloud/ec2-changes"
_READ_ONLY = ("Describe", "Get", "List")  # actions that change nothing
_LAUNCHING_SERVICES = ("ec2", "autoscaling")  # whose calls start and end instances (login nodes: Auto Scaling)
MAX_CHANGE_WAIT = 30.0


def ec2_error(code: str, message: str, status: str) -> tuple[str, list[tuple[str, str]], bytes]:
    """An EC2 (query protocol) error response."""
    body = (
        f'<?xml version="1.0" encoding="UTF-8"?><Response><Errors><Error><Code>{code}</Code>'
        f"<Message>{escape(message)}</Message></Error></Errors><RequestID>{uuid.uuid4()}</RequestID></Response>"
    ).encode()
    return status, [("Content-Type", "text/xml"), ("Content-Length", str(len(body)))], body


class FaultMiddleware:
    """Wraps moto's WSGI app; thread-safe (the server is threaded)."""

    def __init__(
        self,
        app: WsgiApp,
        subnet_az: SubnetAz,
        template_type: TemplateType,
        offers: SpotOffers,
        topology: Topology | None = None,
    ) -> None:
        self.app = app
        self.subnet_az = subnet_az
        self.template_type = template_type
        self.offers = offers
        self.topology = topology  # moto has no DescribeInstanceTopology (localcloud/aws/instance_topology.py)
        # moto's EC2 backend is not safe for concurrent requests (two launches into one subnet: 'generator already
        # executing' in its address allocation, answered as an HTML 500); the plugin launches several jobs at once
        # (slurm_plugin/powersave/launcher.py), so EC2 requests reach moto one at a time. Only EC2: SQS's long polls
        # wait inside moto and would hold everything up.
        self._ec2_lock = threading.Lock()
        self.faults = Faults()
        self.counts: Counter[str] = Counter()
        self.lost_left: dict[str, int] = {}
        self.answers: dict[tuple[str, str, str], tuple[str, list[tuple[str, str]], bytes]] = {}
        # a launch being served, by its key: a retry with the same ClientToken waits for it instead of launching again
        self.in_flight: dict[tuple[str, str, str], threading.Event] = {}
        self.ec2_calls = 0
        self.lock = threading.Lock()
        self.signals: dict[str, list[Any]] = {}  # wait condition token -> the signals PUT to it, in order
        self.ec2_generation = 0  # EC2 calls that may have changed something (CHANGES_PATH)
        self.ec2_changed = threading.Condition()

    # ------------------------------------------------------------------ WSGI entry
    def __call__(self, environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
        path = environ.get("PATH_INFO", "")
        if path == CHANGES_PATH:
            status, headers, body = self._changes(environ)
            start_response(status, headers)
            return [body]
        if path.startswith("/_localcloud/"):
            status, headers, body = self._control(environ, path)
            start_response(status, headers)
            return [body]
        length = int(environ.get("CONTENT_LENGTH") or 0)
        raw = environ["wsgi.input"].read(length) if length else b""
        environ["wsgi.input"] = io.BytesIO(raw)
        service, region = self._scope(environ)
        params = self._params(environ, raw)
        action = environ.get("HTTP_X_AMZ_TARGET", "").rpartition(".")[2] or params.get("Action", "?")
        with self.lock:
            self.counts[f"{service}:{action}"] += 1
            faults = self.faults
        if faults.latency_ms:
            time.sleep(faults.latency_ms / 1000)
        if service == "pricing":
            status, headers, body = price_list.answer(action, raw)
            start_response(status, headers)
            return [body]
        try:
            if service != "ec2":
                return self.app(environ, start_response)
            status, headers, body = self._ec2(environ, raw, params, action, region, faults)
        finally:
            if service in _LAUNCHING_SERVICES and not action.startswith(_READ_ONLY):
                with self.ec2_changed:
                    self.ec2_generation += 1
                    self.ec2_changed.notify_all()
        start_response(status, headers)
        return [body]

    def _changes(self, environ: dict[str, Any]) -> tuple[str, list[tuple[str, str]], bytes]:
        """CHANGES_PATH: the generation once it differs from `after`, or when `wait` seconds are over."""
        query = dict(parse_qsl(str(environ.get("QUERY_STRING", ""))))
        try:
            after = int(query.get("after", "-1"))
            wait = min(max(float(query.get("wait", "0")), 0.0), MAX_CHANGE_WAIT)
        except ValueError:
            return "400 Bad Request", [("Content-Type", "application/json")], b'{"error": "after, wait: numbers"}'
        with self.ec2_changed:
            # != rather than >: a caller that saw a generation of an earlier server process is answered at once
            self.ec2_changed.wait_for(lambda: self.ec2_generation != after, timeout=wait)
            generation = self.ec2_generation
        body = json.dumps({"generation": generation}).encode()
        return "200 OK", [("Content-Type", "application/json"), ("Content-Length", str(len(body)))], body

    # ------------------------------------------------------------------ EC2
    def _ec2(
        self, environ: dict[str, Any], raw: bytes, params: dict[str, str], action: str, region: str, faults: Faults
    ) -> tuple[str, list[tuple[str, str]], bytes]:
        with self.lock:
            self.ec2_calls += 1
            if faults.throttle_every and self.ec2_calls % faults.throttle_every == 0:
                return ec2_error("RequestLimitExceeded", "Request limit exceeded.", "503 Service Unavailable")
        token = params.get("ClientToken")
        key = (region, action, token or "")
        idempotent = action in _IDEMPOTENT and bool(token)
        while idempotent:
            with self.lock:
                if key in self.answers:
                    return self.answers[key]
                running = self.in_flight.get(key)
                if running is None:
                    self.in_flight[key] = threading.Event()
                    break
            running.wait(120)  # the first request with this token is still launching: EC2 answers both the same
        try:
            if action == "RunInstances":
                answer = self._run_instances(environ, raw, params, region, faults)
            elif action == "CreateFleet":
                answer = self._create_fleet(environ, params, region, faults)
            elif action == "DescribeSpotPriceHistory":
                answer = spot_history.describe_spot_price_history(params, self.offers(region))
            elif action == "DescribeInstanceTopology" and self.topology is not None:
                answer = self.topology(region, params)
            else:
                answer = self._forward(environ, raw)
        finally:
            if idempotent:
                with self.lock:
                    done = self.in_flight.pop(key, None)
                if done is not None:
                    done.set()
        if idempotent and answer[0].startswith("200"):
            with self.lock:
                self.answers[key] = answer
        with self.lock:
            every = faults.lose_every.get(action, 0)
            lost_now = every > 0 and self.counts[f"ec2:{action}"] % every == 0
            if lost_now or self.lost_left.get(action, 0) > 0:
                if not lost_now:
                    self.lost_left[action] -= 1
                return ec2_error(
                    "InternalError", "An internal error has occurred (lost response).", "500 Internal Server Error"
                )
        return answer

    def _run_instances(
        self, environ: dict[str, Any], raw: bytes, params: dict[str, str], region: str, faults: Faults
    ) -> tuple[str, list[tuple[str, str]], bytes]:
        itype = params.get("InstanceType") or self.template_type(
            region, params.get("LaunchTemplate.LaunchTemplateId", "")
        )
        subnet = params.get("SubnetId") or params.get("NetworkInterface.1.SubnetId")
        az = params.get("Placement.AvailabilityZone") or (self.subnet_az(region, subnet) if subnet else None)
        market = "spot" if params.get("InstanceMarketOptions.MarketType") == "spot" else "on-demand"
        code = faults.capacity_error(itype, az, region, market)
        if code:
            return ec2_error(
                code, f"We currently do not have sufficient {itype} capacity in {az}.", "500 Internal Server Error"
            )
        if "MaxCount" in params and params.get("MinCount") != params["MaxCount"]:
            # EC2 launches up to MaxCount when capacity is there; moto launches only MinCount.
            raw = urlencode({**params, "MinCount": params["MaxCount"]}).encode()
        return self._forward(environ, raw)

    def _create_fleet(
        self, environ: dict[str, Any], params: dict[str, str], region: str, faults: Faults
    ) -> tuple[str, list[tuple[str, str]], bytes]:
        market = params.get("TargetCapacitySpecification.DefaultTargetCapacityType", "on-demand")
        overrides: dict[tuple[int, int], dict[str, str]] = {}
        rest: dict[str, str] = {}
        for name, value in params.items():
            match = _OVERRIDE.match(name)
            if match:
                overrides.setdefault((int(match[1]), int(match[2])), {})[match[3]] = value
            else:
                rest[name] = value
        kept: dict[int, list[dict[str, str]]] = {}
        errors: list[str] = []
        for (cfg, _idx), override in sorted(overrides.items()):
            template = rest.get(f"LaunchTemplateConfigs.{cfg}.LaunchTemplateSpecification.LaunchTemplateId", "")
            itype = override.get("InstanceType") or self.template_type(region, template)
            az = override.get("AvailabilityZone") or self.subnet_az(region, override.get("SubnetId", ""))
            code = faults.capacity_error(itype, az, region, market)
            if code is None:
                kept.setdefault(cfg, []).append(override)
            else:
                errors.append(_fleet_error_item(template, override, az, market, code))
        if overrides and not kept:
            return _fleet_response(f"fleet-{uuid.uuid4().hex[:17]}", errors)
        for (cfg, _idx), _override in overrides.items():
            rest.pop(f"LaunchTemplateConfigs.{cfg}.Overrides", None)
        for cfg, items in kept.items():
            for j, override in enumerate(items, start=1):
                for field, value in override.items():
                    rest[f"LaunchTemplateConfigs.{cfg}.Overrides.{j}.{field}"] = value
        body = urlencode(rest).encode()
        environ["CONTENT_LENGTH"] = str(len(body))
        status, headers, answer = self._forward(environ, body)
        if errors and status.startswith("200"):
            answer = answer.replace(
                b"</CreateFleetResponse>", f"<errorSet>{''.join(errors)}</errorSet></CreateFleetResponse>".encode()
            )
            headers = [(k, v) for k, v in headers if k.lower() != "content-length"] + [
                ("Content-Length", str(len(answer)))
            ]
        return status, headers, answer

    # ------------------------------------------------------------------ plumbing
    def _forward(self, environ: dict[str, Any], raw: bytes) -> tuple[str, list[tuple[str, str]], bytes]:
        environ["wsgi.input"] = io.BytesIO(raw)
        environ["CONTENT_LENGTH"] = str(len(raw))
        captured: dict[str, Any] = {}

        def start(status: str, headers: list[tuple[str, str]], exc_info: Any = None) -> None:
            captured["status"], captured["headers"] = status, list(headers)

        with self._ec2_lock if self._scope(environ)[0] == "ec2" else contextlib.nullcontext():
            chunks = self.app(environ, start)
            try:
                body = b"".join(chunks)
            finally:
                close = getattr(chunks, "close", None)
                if close:
                    close()
        return captured["status"], captured["headers"], body

    @staticmethod
    def _scope(environ: dict[str, Any]) -> tuple[str, str]:
        match = _CREDENTIAL.search(environ.get("HTTP_AUTHORIZATION", ""))
        return (match[2], match[1]) if match else ("?", "us-east-1")

    @staticmethod
    def _params(environ: dict[str, Any], raw: bytes) -> dict[str, str]:
        params = dict(parse_qsl(environ.get("QUERY_STRING", ""), keep_blank_values=True))
        if "x-www-form-urlencoded" in environ.get("CONTENT_TYPE", ""):
            params.update(parse_qsl(raw.decode(), keep_blank_values=True))
        return params

    def _control(self, environ: dict[str, Any], path: str) -> tuple[str, list[tuple[str, str]], bytes]:
        method = environ.get("REQUEST_METHOD", "GET")
        with self.lock:
            if path == "/_localcloud/faults" and method == "POST":
                length = int(environ.get("CONTENT_LENGTH") or 0)
                self.faults = Faults.from_json(json.loads(environ["wsgi.input"].read(length) or b"{}"))
                self.lost_left = dict(self.faults.lose_responses)
                payload: Any = self.faults.to_json()
            elif path == "/_localcloud/faults":
                payload = self.faults.to_json()
            elif path == "/_localcloud/calls/reset" and method == "POST":
                self.counts.clear()
                payload = {}
            elif path == "/_localcloud/calls":
                payload = dict(self.counts)
            elif path.startswith(WAIT_CONDITION_PATH) and method == "PUT":
                length = int(environ.get("CONTENT_LENGTH") or 0)
                raw = environ["wsgi.input"].read(length)
                try:
                    signal = json.loads(raw)
                except ValueError:
                    return "400 Bad Request", [("Content-Type", "application/json")], b'{"error": "not JSON"}'
                self.signals.setdefault(path[len(WAIT_CONDITION_PATH) :], []).append(signal)
                payload = {}
            elif path.startswith(WAIT_CONDITION_PATH):
                payload = self.signals.get(path[len(WAIT_CONDITION_PATH) :], [])
            else:
                return "404 Not Found", [("Content-Type", "application/json")], b'{"error": "unknown control path"}'
        body = json.dumps(payload).encode()
        return "200 OK", [("Content-Type", "application/json"), ("Content-Length", str(len(body)))], body


def _fleet_error_item(template: str, override: dict[str, str], az: str | None, market: str, code: str) -> str:
    fields = "".join(
        f"<{tag}>{escape(value)}</{tag}>"
        for tag, value in (
            ("instanceType", override.get("InstanceType", "")),
            ("subnetId", override.get("SubnetId", "")),
            ("availabilityZone", az or ""),
        )
        if value
    )
    return (
        "<item><launchTemplateAndOverrides><launchTemplateSpecification>"
        f"<launchTemplateId>{escape(template)}</launchTemplateId></launchTemplateSpecification>"
        f"<overrides>{fields}</overrides></launchTemplateAndOverrides><lifecycle>{market}</lifecycle>"
        f"<errorCode>{code}</errorCode><errorMessage>There is no {escape(override.get('InstanceType', ''))} capacity "
        f"in {escape(az or '?')}.</errorMessage></item>"
    )


def _fleet_response(fleet_id: str, errors: list[str]) -> tuple[str, list[tuple[str, str]], bytes]:
    body = (
        '<?xml version="1.0" encoding="UTF-8"?><CreateFleetResponse xmlns="http://ec2.amazonaws.com/doc/2016-11-15/">'
        f"<requestId>{uuid.uuid4()}</requestId><fleetId>{fleet_id}</fleetId><errorSet>{''.join(errors)}</errorSet>"
        "<fleetInstanceSet/></CreateFleetResponse>"
    ).encode()
    return "200 OK", [("Content-Type", "text/xml"), ("Content-Length", str(len(body)))], body
