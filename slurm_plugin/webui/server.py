"""The web page's HTTPS server: static files, the job templates, node AZs, and the REST API proxy (one thread per
request, standard library only; TLS with the controller's certificate, certificate.py).

Routes: `/` and `/static/<file>` (the page), `GET /elastic/templates` (templates.py), `GET /elastic/node-zones`
(zones.py; only for a token slurmctld accepts: the user's headers are checked with a small query first),
`/slurm/...` and `/openapi/...` (any method: proxy.py). Everything else is 404. Each request is logged as one line
without its query string or token.
"""

from __future__ import annotations

import json
import logging
import mimetypes
import ssl
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from cluster_config.model_rest_api import DATA_PARSER
from slurm_plugin.http_limits import CONNECTION_TIMEOUT
from slurm_plugin.webui import proxy, templates

STATIC = Path(__file__).parent / "static"
STATIC_FILES = {"/": "index.html", "/static/app.js": "app.js", "/static/style.css": "style.css"}
# a small query slurmctld answers only for a token it accepts (ping answers 200 with a wrong one: it reports the
# controllers' state in its body)
AUTH_CHECK = f"/slurm/{DATA_PARSER}/licenses/"
SECURITY_HEADERS = {
    "Content-Security-Policy": "default-src 'self'; frame-ancestors 'none'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}
LOG = logging.getLogger("slurm-webui")


@dataclass(frozen=True)
class WebUi:
    """What the handler needs: slurmrestd's URL, the templates, node AZs (a callable: read at each request)."""

    upstream: str
    templates: list[templates.Template]
    zones: Callable[[], dict[str, str]]
    workdir: str = "/tmp"  # the Directory field's default: the node's own /tmp (the user picks a shared one)


class Handler(BaseHTTPRequestHandler):
    """One request; `server.webui` holds the settings."""

    server_version = "elastic-slurm-webui"
    sys_version = ""
    protocol_version = "HTTP/1.1"
    timeout = CONNECTION_TIMEOUT  # a silent connection is closed (slurm_plugin/http_limits.py)

    @property
    def webui(self) -> WebUi:
        ui: WebUi = self.server.webui  # type: ignore[attr-defined]
        return ui

    def do_GET(self) -> None:
        """Static files, the two page endpoints, or the proxy."""
        path = self.path.split("?", 1)[0]
        if path in STATIC_FILES:
            self._static(STATIC_FILES[path])
        elif path == "/elastic/templates":
            self._json(200, {"templates": templates.as_json(self.webui.templates), "workdir": self.webui.workdir})
        elif path == "/elastic/node-zones":
            self._zones()
        else:
            self._proxy()

    def do_POST(self) -> None:
        """The proxy (job submission, updates)."""
        self._proxy()

    def do_DELETE(self) -> None:
        """The proxy (job cancel)."""
        self._proxy()

    def log_message(self, format: str, *args: Any) -> None:
        """http.server's own lines carry the raw request line (with its query): replaced by `_send`'s lines."""

    def _static(self, name: str) -> None:
        body = (STATIC / name).read_bytes()
        kind = mimetypes.guess_type(name)[0] or "application/octet-stream"
        self._send(proxy.Answer(200, f"{kind}; charset=utf-8", body))

    def _json(self, status: int, data: object) -> None:
        self._send(proxy.Answer(status, "application/json", json.dumps(data).encode()))

    def _zones(self) -> None:
        check = proxy.forward(self.webui.upstream, "GET", AUTH_CHECK, dict(self.headers), None)
        if check.status != 200:
            self._send(check)
            return
        self._json(200, {"zones": self.webui.zones()})

    def _proxy(self) -> None:
        if not proxy.forwardable(self.path):
            self._send(proxy.error(404, "not found"))
            return
        if self.headers.get("Transfer-Encoding"):  # a chunked body would be read as the next request
            self._refuse(proxy.error(411, "send the body with a Content-Length"))
            return
        raw = (self.headers.get("Content-Length") or "0").strip()
        length = int(raw) if raw.isdigit() else -1  # never negative: read(-1) would read until the client closes
        if length < 0:
            self._refuse(proxy.error(400, "Content-Length is not a number of bytes"))
            return
        if length > proxy.MAX_BODY:
            self._refuse(proxy.error(413, f"request body over {proxy.MAX_BODY} bytes"))
            return
        body = self.rfile.read(length) if length else None
        self._send(proxy.forward(self.webui.upstream, self.command, self.path, dict(self.headers), body))

    def _send(self, answer: proxy.Answer) -> None:
        self.send_response(answer.status)
        self.send_header("Content-Type", answer.content_type)
        self.send_header("Content-Length", str(len(answer.body)))
        for name, value in SECURITY_HEADERS.items():
            self.send_header(name, value)
        self.end_headers()
        LOG.info(proxy.describe(self.command, self.path, dict(self.headers), answer.status))
        self.wfile.write(answer.body)

    def _refuse(self, answer: proxy.Answer) -> None:
        """Answer without reading the body, then close (what is left of the request is never parsed)."""
        self.close_connection = True
        self._send(answer)


def tls_context(certificate: str, key: str) -> ssl.SSLContext:
    """The page's TLS: TLS 1.2 or newer, Python's default (forward-secret) ciphers; OSError/ssl.SSLError when the pair
    cannot be read or does not match."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.load_cert_chain(certificate, key)
    return context


class TlsServer(ThreadingHTTPServer):
    """HTTPS: each connection's handshake runs in its handler's thread (with the connection's timeout), never in the
    accept loop, so a client that connects and stays silent holds no one else up."""

    tls: ssl.SSLContext | None = None

    def finish_request(self, request: Any, client_address: Any) -> None:
        if self.tls is None:
            super().finish_request(request, client_address)
            return
        request.settimeout(CONNECTION_TIMEOUT)
        try:
            secure = self.tls.wrap_socket(request, server_side=True)
        except (OSError, ssl.SSLError):
            request.close()  # a plain-HTTP request or a failed handshake: nothing is answered in clear text
            return
        try:
            super().finish_request(secure, client_address)
        finally:
            self.shutdown_request(secure)  # the TLS socket (the plain one the caller closes was detached by the wrap)


def make_server(host: str, port: int, webui: WebUi, tls: ssl.SSLContext | None = None) -> ThreadingHTTPServer:
    """A bound server (port 0: any free port; `server.server_address` tells which); HTTPS with `tls`."""
    server = TlsServer((host, port), Handler)
    server.daemon_threads = True
    server.tls = tls
    server.webui = webui  # type: ignore[attr-defined]
    return server
