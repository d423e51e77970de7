"""Forward one browser request to slurmrestd (the only upstream), keeping only what the REST API needs.

Only `/slurm/...` and `/openapi/...` paths are forwarded; only the JWT headers, Content-Type and Accept travel; a body
is at most MAX_BODY bytes; slurmrestd's 511 for a rejected token becomes 401. The token is never logged (`describe`
names the user only).
"""

from __future__ import annotations

import http.client
import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass

FORWARDED_PREFIXES = ("/slurm/", "/openapi/")
FORWARDED_HEADERS = ("X-SLURM-USER-NAME", "X-SLURM-USER-TOKEN", "Content-Type", "Accept")
TOKEN_HEADER = "X-SLURM-USER-TOKEN"
USER_HEADER = "X-SLURM-USER-NAME"
MAX_BODY = 1 << 20  # a job script and its options
TIMEOUT = 60.0
UNAUTHORIZED = 401
# slurmrestd answers 511 when slurmctld rejects the token (a wrong or expired one; a missing one is 401). RFC 6585
# keeps 511 for intercepting proxies ("origin servers should not generate it"), and browsers and HTTP clients treat it
# as such: the proxy, the origin its clients see, answers 401 Unauthorized instead.
NETWORK_AUTHENTICATION_REQUIRED = 511


@dataclass(frozen=True)
class Answer:
    """What slurmrestd answered (or the proxy's own error), ready to send back."""

    status: int
    content_type: str
    body: bytes


def forwardable(path: str) -> bool:
    """Whether the proxy forwards `path` (its query string aside): the REST API's paths only, no escapes upward."""
    bare = urllib.parse.urlsplit(path).path
    if ".." in bare.split("/") or "\\" in bare:
        return False
    return bare.startswith(FORWARDED_PREFIXES) or bare == "/openapi"


def forwarded_headers(headers: Mapping[str, str]) -> dict[str, str]:
    """The request headers that travel upstream."""
    lowered = {k.lower(): v for k, v in headers.items()}
    return {name: lowered[name.lower()] for name in FORWARDED_HEADERS if name.lower() in lowered}


def describe(method: str, path: str, headers: Mapping[str, str], status: int) -> str:
    """One log line: method, path without its query, the user, the status; never the token."""
    user = {k.lower(): v for k, v in headers.items()}.get(USER_HEADER.lower(), "-")
    return f"{method} {urllib.parse.urlsplit(path).path} user={user} -> {status}"


def error(status: int, message: str) -> Answer:
    """The proxy's own error, in the REST API's error shape."""
    text = message.replace("\\", "\\\\").replace('"', '\\"')
    return Answer(status, "application/json", f'{{"errors": [{{"error": "{text}"}}]}}'.encode())


def forward(upstream: str, method: str, path: str, headers: Mapping[str, str], body: bytes | None) -> Answer:
    """Send the request to slurmrestd at `upstream` (http://127.0.0.1:PORT); 502 when it cannot be reached."""
    if not forwardable(path):
        return error(404, "not a REST API path")
    target = urllib.parse.urlsplit(upstream)
    connection = http.client.HTTPConnection(target.hostname or "127.0.0.1", target.port or 80, timeout=TIMEOUT)
    try:
        connection.request(method, path, body=body, headers=forwarded_headers(headers))
        response = connection.getresponse()
        data = response.read()
        status = UNAUTHORIZED if response.status == NETWORK_AUTHENTICATION_REQUIRED else response.status
        return Answer(status, response.getheader("Content-Type", "application/json"), data)
    except (OSError, http.client.HTTPException) as exc:
        return error(502, f"slurmrestd is not answering: {type(exc).__name__}")
    finally:
        connection.close()
