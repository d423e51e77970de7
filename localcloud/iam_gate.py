"""IAM enforcement for the emulated AWS, in front of the fault layer: moto's own SigV4 check and policy evaluation.

moto enforces IAM inside its backends once INITIAL_NO_AUTH_ACTION_COUNT requests have been served, but there it sees
the request after the fault layer rewrote CreateFleet/RunInstances bodies (dropped overrides, MinCount), so every
such signature fails. This gate runs moto's `IAMRequest` (signature against the emulated IAM user's key, then the
user's policies) on the request exactly as the client signed it, and moto's in-backend check stays off.

`/_localcloud/iam` turns it on or off: GET -> {"enforce": bool}; POST {"enforce": bool}. Unsigned requests to moto's
own admin API (`/moto-api/`) pass; any other unsigned request is refused while enforcing.
"""

from __future__ import annotations

import io
import json
from collections.abc import Callable, Iterable
from typing import Any
from urllib.parse import parse_qsl

WsgiApp = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]

ACCOUNT = "123456789012"
CONTROL_PATH = "/_localcloud/iam"


def request_action(environ: dict[str, Any], body: bytes) -> str:
    """The API action of a request: the JSON protocol's X-Amz-Target suffix, else the query protocol's Action."""
    target = str(environ.get("HTTP_X_AMZ_TARGET", ""))
    if target:
        return target.rpartition(".")[2]
    query = dict(parse_qsl(str(environ.get("QUERY_STRING", ""))))
    if "x-www-form-urlencoded" in str(environ.get("CONTENT_TYPE", "")):
        query.update(parse_qsl(body.decode("utf-8", "replace"), keep_blank_values=True))
    return query.get("Action", "")


class IamGate:
    """WSGI wrapper that authenticates and authorizes every AWS request while enforcement is on."""

    def __init__(self, app: WsgiApp, enforce: bool = False) -> None:
        self.app = app
        self.enforce = enforce

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        path = str(environ.get("PATH_INFO", ""))
        if path == CONTROL_PATH:
            return self._control(environ, start_response)
        if not self.enforce or path.startswith(("/_localcloud/", "/moto-api/")):
            return self.app(environ, start_response)
        length = int(environ.get("CONTENT_LENGTH") or 0)
        body = environ["wsgi.input"].read(length) if length else b""
        environ["wsgi.input"] = io.BytesIO(body)
        denial = self._check(environ, path, body)
        if denial is not None:
            return denial(environ, start_response)  # type: ignore[no-any-return]
        return self.app(environ, start_response)

    def _check(self, environ: dict[str, Any], path: str, body: bytes) -> Any:
        """None when allowed, else moto's error (a WSGI-callable werkzeug HTTPException)."""
        from moto.iam.access_control import IAMRequest
        from werkzeug.datastructures import EnvironHeaders
        from werkzeug.exceptions import Forbidden, HTTPException

        headers = EnvironHeaders(environ)
        if "AWS4-HMAC-SHA256" not in headers.get("Authorization", ""):
            return Forbidden("MissingAuthenticationToken: IAM is enforced; sign the request")
        query = str(environ.get("QUERY_STRING", ""))
        try:
            request = IAMRequest(
                account_id=ACCOUNT,
                method=str(environ.get("REQUEST_METHOD", "GET")),
                path=path + (f"?{query}" if query else ""),
                data=dict(parse_qsl(body.decode("utf-8", "replace"))),
                body=body,
                headers=headers,  # type: ignore[arg-type]  # a case-insensitive mapping, as moto's own is
                action=request_action(environ, body),
            )
            request.check_signature()
            request.check_action_permitted("*")
        except HTTPException as error:  # moto's AuthFailure / AccessDenied / InvalidClientTokenId
            return error
        return None

    def _control(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        if environ.get("REQUEST_METHOD") == "POST":
            length = int(environ.get("CONTENT_LENGTH") or 0)
            self.enforce = bool(json.loads(environ["wsgi.input"].read(length) or b"{}").get("enforce"))
        body = json.dumps({"enforce": self.enforce}).encode()
        start_response("200 OK", [("Content-Type", "application/json"), ("Content-Length", str(len(body)))])
        return [body]
