"""The product's HTTP servers (the metrics exporter, the web page) close a connection that stays silent: a client
that connects and sends nothing cannot hold a server thread for ever (issue 30, hardening)."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator

import pytest
from prometheus_client import CollectorRegistry

from slurm_plugin import http_limits
from slurm_plugin.exporter import main as exporter
from slurm_plugin.webui import server as webui

SHORT = 0.5  # the servers' connection timeout in these tests (the product's is http_limits.CONNECTION_TIMEOUT)
GRACE = 30.0  # far longer than SHORT: a server that never closes is what fails, never a slow machine


def _closed_by_server(port: int) -> bool:
    """Connect, send nothing, and tell whether the server closed the connection (EOF) within GRACE."""
    with socket.create_connection(("127.0.0.1", port), timeout=GRACE) as conn:
        try:
            return conn.recv(1) == b""
        except TimeoutError:
            return False


@pytest.fixture
def exporter_port(monkeypatch: pytest.MonkeyPatch) -> Iterator[int]:
    monkeypatch.setattr(exporter._TimedHandler, "timeout", SHORT)
    server, thread = exporter.serve_metrics("127.0.0.1", 0, CollectorRegistry())
    yield server.server_address[1]
    server.shutdown()
    thread.join(timeout=5)


@pytest.fixture
def webui_port(monkeypatch: pytest.MonkeyPatch) -> Iterator[int]:
    monkeypatch.setattr(webui.Handler, "timeout", SHORT)
    server = webui.make_server("127.0.0.1", 0, webui.WebUi("http://127.0.0.1:9", [], dict))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server.server_address[1]
    server.shutdown()
    thread.join(timeout=5)


def test_the_product_sets_a_connection_timeout_on_both_servers() -> None:
    assert exporter._TimedHandler.timeout == webui.Handler.timeout == http_limits.CONNECTION_TIMEOUT > 0


def test_the_exporter_closes_a_silent_connection_and_still_serves_metrics(exporter_port: int) -> None:
    assert _closed_by_server(exporter_port)
    with socket.create_connection(("127.0.0.1", exporter_port), timeout=GRACE) as conn:
        conn.sendall(b"GET /metrics HTTP/1.0\r\n\r\n")
        assert conn.recv(64).startswith(b"HTTP/1.0 200")


def test_the_web_page_closes_a_silent_connection(webui_port: int) -> None:
    assert _closed_by_server(webui_port)
