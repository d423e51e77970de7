"""IAM enforcement for the emulated AWS, in front of the fault layer: moto's own SigV4 check and policy evaluation.

moto enforces IAM inside its backends once INITIAL_NO_AUTH_ACTION_COUNT requests have been served, but there it sees
the request after the fault layer rewrote CreateFleet/RunInstances bodies (dropped overrides, MinCount), so every
such signature fails. This gate runs moto's `IAMRequest` (signature against the emulated IAM user's key, then the
user's policies) on the request exactly as the client signed it, and moto's in-backend check stays off.

`/_localcloud/iam` turns it on or off: GET -> {"enforce": bool, "request_log": path|null}; POST with either key.
Unsigned requests to moto's own admin API (`/moto-api/`) pass; any other unsigned request is refused while enforcing.
With a request log set, every AWS request is appended to it as one JSON line `{"service", "region", "action",
"params"}` (what localcloud/aws/iam_requests.py turns into IAM authorization requests).
"""

from __future__ import annotations

import contextlib
import io
import json
import threading
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl

WsgiApp = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]

ACCOUNT = "123456789012"
CONTROL_PATH = "/_localcloud/iam"
# IAM service prefixes that differ from the SigV4 signing name moto takes the action's prefix from
IAM_PREFIXES = {"monitoring": "cloudwatch"}
# API operations IAM authorizes as another action: SQS's batch calls have no permission of their own, "setting
# permissions for SendMessage, DeleteMessage, or ChangeMessageVisibility sets permissions for the corresponding batch
# versions" (SQS Developer Guide, "Amazon SQS batch actions")
IAM_ACTION_OF = {
    "sqs:SendMessageBatch": "sqs:SendMessage",
    "sqs:DeleteMessageBatch": "sqs:DeleteMessage",
    "sqs:ChangeMessageVisibilityBatch": "sqs:ChangeMessageVisibility",
}


def request_action(environ: dict[str, Any], body: bytes) -> str:
    """The API action of a request: the JSON protocol's X-Amz-Target suffix, else the query protocol's Action."""
    target = str(environ.get("HTTP_X_AMZ_TARGET", ""))
    if target:
        return target.rpartition(".")[2]
    query = dict(parse_qsl(str(environ.get("QUERY_STRING", ""))))
    if "x-www-form-urlencoded" in str(environ.get("CONTENT_TYPE", "")):
        query.update(parse_qsl(body.decode("utf-8", "replace"), keep_blank_values=True))
    return query.get("Action", "")


def request_params(environ: dict[str, Any], body: bytes) -> dict[str, Any]:
    """The request's parameters: form fields (query protocol) or the JSON document (JSON protocol)."""
    params: dict[str, Any] = dict(parse_qsl(str(environ.get("QUERY_STRING", ""))))
    if "x-www-form-urlencoded" in str(environ.get("CONTENT_TYPE", "")):
        params.update(parse_qsl(body.decode("utf-8", "replace"), keep_blank_values=True))
    elif body.startswith(b"{"):
        with contextlib.suppress(ValueError):
            params.update(json.loads(body))
    return params


def s3_action(method: str, path: str) -> str:
    """The IAM action of an S3 REST request (path-style, as the emulated endpoint is addressed): object or bucket by
    whether the path names a key. The harness creates buckets before enforcement; nodes only read and write objects."""
    has_key = "/" in path.strip("/")
    if has_key:
        return {"GET": "GetObject", "HEAD": "GetObject", "PUT": "PutObject", "DELETE": "DeleteObject"}.get(method, "")
    return {"GET": "ListBucket", "HEAD": "ListBucket", "PUT": "CreateBucket", "DELETE": "DeleteBucket"}.get(method, "")


def s3_error(error: Any) -> Any:
    """A WSGI response for one of moto's S3 errors (a ServiceException, not an HTTP exception): 403 with S3's XML."""
    from werkzeug.wrappers import Response

    body = f"<?xml version='1.0' encoding='UTF-8'?><Error><Code>{error.code}</Code><Message>{error.message}</Message></Error>"
    status = 403 if "Denied" in error.code or "Signature" in error.code or "AccessKey" in error.code else 400
    return Response(body, status=status, content_type="application/xml")


def credential_scope(environ: dict[str, Any]) -> tuple[str, str]:
    """(service, region) from the SigV4 Authorization header ("", "") when unsigned."""
    auth = str(environ.get("HTTP_AUTHORIZATION", ""))
    parts = auth.partition("Credential=")[2].partition(",")[0].split("/")
    return (parts[3], parts[2]) if len(parts) >= 4 else ("", "")


class IamGate:
    """WSGI wrapper that authenticates and authorizes every AWS request while enforcement is on."""

    def __init__(self, app: WsgiApp, enforce: bool = False) -> None:
        self.app = app
        self.enforce = enforce
        self.request_log: Path | None = None
        self.lock = threading.Lock()

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        path = str(environ.get("PATH_INFO", ""))
        if path == CONTROL_PATH:
            return self._control(environ, start_response)
        if not (self.enforce or self.request_log) or path.startswith(("/_localcloud/", "/moto-api/")):
            return self.app(environ, start_response)
        length = int(environ.get("CONTENT_LENGTH") or 0)
        body = environ["wsgi.input"].read(length) if length else b""
        environ["wsgi.input"] = io.BytesIO(body)
        if self.request_log is not None:
            self._log(environ, body, self.request_log)
        denial = self._check(environ, path, body) if self.enforce else None
        if denial is not None:
            return denial(environ, start_response)  # type: ignore[no-any-return]
        return self.app(environ, start_response)

    def _log(self, environ: dict[str, Any], body: bytes, log: Path) -> None:
        service, region = credential_scope(environ)
        entry = {
            "service": service,
            "region": region,
            "action": request_action(environ, body),
            "params": request_params(environ, body),
        }
        with self.lock, log.open("a") as out:
            out.write(json.dumps(entry, sort_keys=True) + "\n")

    def _check(self, environ: dict[str, Any], path: str, body: bytes) -> Any:
        """None when allowed, else moto's error (a WSGI-callable werkzeug HTTPException)."""
        from moto.core.exceptions import ServiceException
        from moto.iam.access_control import IAMRequest, S3IAMRequest
        from werkzeug.datastructures import EnvironHeaders
        from werkzeug.exceptions import Forbidden, HTTPException

        headers = EnvironHeaders(environ)
        if "AWS4-HMAC-SHA256" not in headers.get("Authorization", ""):
            return Forbidden("MissingAuthenticationToken: IAM is enforced; sign the request")
        query = str(environ.get("QUERY_STRING", ""))
        method = str(environ.get("REQUEST_METHOD", "GET"))
        s3 = credential_scope(environ)[0] == "s3"
        kind = S3IAMRequest if s3 else IAMRequest
        try:
            request = kind(
                account_id=ACCOUNT,
                method=method,
                path=path + (f"?{query}" if query else ""),
                data={} if s3 else dict(parse_qsl(body.decode("utf-8", "replace"))),
                body=body,
                headers=headers,  # type: ignore[arg-type]  # a case-insensitive mapping, as moto's own is
                action=s3_action(method, path) if s3 else request_action(environ, body),
            )
            service, _, name = request._action.partition(":")
            action = f"{IAM_PREFIXES.get(service, service)}:{name}"
            request._action = IAM_ACTION_OF.get(action, action)
            request.check_signature()
            request.check_action_permitted("*")
        except HTTPException as error:  # moto's AuthFailure / AccessDenied / InvalidClientTokenId
            return error
        except ServiceException as error:  # S3's errors: serialized here as S3 answers them (XML, 403)
            return s3_error(error)
        return None

    def _control(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        if environ.get("REQUEST_METHOD") == "POST":
            length = int(environ.get("CONTENT_LENGTH") or 0)
            settings = json.loads(environ["wsgi.input"].read(length) or b"{}")
            self.enforce = bool(settings.get("enforce", self.enforce))
            if "request_log" in settings:
                self.request_log = Path(settings["request_log"]) if settings["request_log"] else None
        log = str(self.request_log) if self.request_log else None
        body = json.dumps({"enforce": self.enforce, "request_log": log}).encode()
        start_response("200 OK", [("Content-Type", "application/json"), ("Content-Length", str(len(body)))])
        return [body]
