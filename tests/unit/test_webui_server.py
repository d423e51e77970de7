"""The web page's server (slurm_plugin/webui) against a fake slurmrestd: what it serves, what it forwards (paths and
headers), slurmrestd's errors passed on (511 as 401), its own errors (404, 413, 502), node AZs from the event log,
and a log that never holds the token."""

from __future__ import annotations

import http.client
import json
import logging
import threading
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from cluster_config.model_rest_api import DATA_PARSER
from slurm_plugin.telemetry import events
from slurm_plugin.webui import proxy, templates, zones
from slurm_plugin.webui.__main__ import parse_listen
from slurm_plugin.webui.server import WebUi, make_server

GOOD, BAD = "good.jwt.token", "bad.jwt.token"


class FakeRestd(BaseHTTPRequestHandler):
    """slurmrestd as the proxy sees it: 401 without a token, 511 for a wrong one (24.11), else echoes the request."""

    seen: list[dict[str, Any]] = []

    def _answer(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        FakeRestd.seen.append({"path": self.path, "headers": dict(self.headers), "body": body.decode()})
        token = self.headers.get("X-SLURM-USER-TOKEN")
        status = 401 if token is None else 511 if token != GOOD else 200
        data = json.dumps({"path": self.path, "errors": []}).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    do_GET = do_POST = do_DELETE = _answer

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet."""


def _serve(server: ThreadingHTTPServer) -> str:
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    host, port = server.server_address[:2]
    return f"http://{host!s}:{port}"


@pytest.fixture
def site(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """The web page's server in front of a fake slurmrestd; yields its URL and the event log's state dir."""
    FakeRestd.seen = []
    upstream = ThreadingHTTPServer(("127.0.0.1", 0), FakeRestd)
    restd = _serve(upstream)
    (tmp_path / "templates").mkdir()
    (tmp_path / "templates" / "mine.sbatch").write_text("#!/bin/bash\n# My job.\n#SBATCH -n 2\nhostname\n")
    ui = WebUi(restd, templates.load(tmp_path / "templates"), zones.NodeZones(tmp_path).current)
    server = make_server("127.0.0.1", 0, ui)
    yield _serve(server), tmp_path
    server.shutdown()
    upstream.shutdown()


def _call(url: str, method: str = "GET", token: str | None = GOOD, body: bytes | None = None) -> tuple[int, bytes]:
    headers = {"X-SLURM-USER-NAME": "alice", "Cookie": "session=1", "Authorization": "Basic eA=="}
    if token is not None:
        headers["X-SLURM-USER-TOKEN"] = token
    request = urllib.request.Request(url, data=body, method=method, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=10) as answer:
            return answer.status, answer.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


def test_the_page_and_its_script_are_served_with_a_strict_content_policy(site: tuple[str, Path]) -> None:
    url, _ = site
    with urllib.request.urlopen(url + "/", timeout=10) as answer:
        assert answer.status == 200
        assert "default-src 'self'" in answer.headers["Content-Security-Policy"]
        assert b'id="submit-form"' in answer.read()
    with urllib.request.urlopen(url + "/static/app.js", timeout=10) as answer:
        assert f"/slurm/{DATA_PARSER}".encode() in answer.read()


def test_templates_list_hello_then_the_directorys_files(site: tuple[str, Path]) -> None:
    url, _ = site
    status, body = _call(url + "/elastic/templates", token=None)
    listed = json.loads(body)["templates"]
    assert json.loads(body)["workdir"] == "/tmp"  # the Directory field's default
    assert status == 200
    assert [(t["name"], t["summary"]) for t in listed] == [
        ("hello", "A one-task job: where it ran, as whom, then a short sleep so the page shows it RUNNING."),
        ("mine", "My job."),
    ]


def test_rest_calls_are_forwarded_with_the_jwt_headers_only(site: tuple[str, Path]) -> None:
    url, _ = site
    status, _ = _call(url + f"/slurm/{DATA_PARSER}/job/submit", "POST", body=b'{"job": {"script": "#!/bin/sh"}}')
    assert status == 200
    [seen] = FakeRestd.seen
    assert seen["path"] == f"/slurm/{DATA_PARSER}/job/submit"
    assert seen["body"] == '{"job": {"script": "#!/bin/sh"}}'
    sent = {k.lower() for k in seen["headers"]}
    assert {"x-slurm-user-name", "x-slurm-user-token"} <= sent
    assert not sent & {"cookie", "authorization"}  # the browser's other credentials never reach slurmrestd


def test_a_wrong_token_is_401_as_is_a_missing_one(site: tuple[str, Path]) -> None:
    url, _ = site
    assert _call(url + f"/slurm/{DATA_PARSER}/nodes/", token=BAD)[0] == 401  # slurmrestd said 511
    assert _call(url + f"/slurm/{DATA_PARSER}/nodes/", token=None)[0] == 401
    assert _call(url + "/elastic/node-zones", token=BAD)[0] == 401


@pytest.mark.parametrize("path", ["/etc/passwd", "/slurm/../etc/passwd", "/slurmdb", "/static/../server.py"])
def test_only_rest_api_paths_are_forwarded(site: tuple[str, Path], path: str) -> None:
    url, _ = site
    assert _call(url + path)[0] == 404
    assert FakeRestd.seen == []


def _status_of_headers_only(url: str, headers: dict[str, str]) -> int:
    """POST with these headers and no body sent: the server must answer without waiting for one."""
    parts = urllib.parse.urlsplit(url)
    connection = http.client.HTTPConnection(parts.hostname or "127.0.0.1", parts.port, timeout=10)
    try:
        connection.putrequest("POST", f"/slurm/{DATA_PARSER}/job/submit")
        for name, value in headers.items():
            connection.putheader(name, value)
        connection.endheaders()
        return connection.getresponse().status
    finally:
        connection.close()


@pytest.mark.parametrize(
    ("headers", "status"),
    [
        ({"Content-Length": str(proxy.MAX_BODY + 1)}, 413),
        ({"Content-Length": "-1"}, 400),  # read(-1) would read until the client closes
        ({"Content-Length": "abc"}, 400),
        ({"Transfer-Encoding": "chunked"}, 411),
    ],
)
def test_a_body_over_the_limit_or_without_a_length_is_refused_unread(
    site: tuple[str, Path], headers: dict[str, str], status: int
) -> None:
    url, _ = site
    assert _status_of_headers_only(url, headers) == status
    assert FakeRestd.seen == []


def test_slurmrestd_down_is_502_in_the_rest_api_error_shape() -> None:
    answer = proxy.forward("http://127.0.0.1:9", "GET", f"/slurm/{DATA_PARSER}/nodes/", {}, None)
    assert answer.status == 502
    assert json.loads(answer.body)["errors"][0]["error"].startswith("slurmrestd is not answering")


def test_node_zones_follow_launches_and_terminations(site: tuple[str, Path]) -> None:
    url, state_dir = site
    events.record(state_dir, [
        {"event": "node_launched", "node": "cpu-small-1", "instance_id": "i-1", "az": "us-east-1a"},
        {"event": "node_launched", "node": "cpu-small-2", "instance_id": "i-2", "az": "us-east-1b"},
    ])  # fmt: skip
    assert json.loads(_call(url + "/elastic/node-zones")[1]) == {
        "zones": {"cpu-small-1": "us-east-1a", "cpu-small-2": "us-east-1b"}
    }
    events.record(state_dir, [{"event": "terminated", "node": "", "instance_id": "i-1"}])
    assert json.loads(_call(url + "/elastic/node-zones")[1]) == {"zones": {"cpu-small-2": "us-east-1b"}}


def test_the_log_names_the_user_and_never_the_token(site: tuple[str, Path], caplog: pytest.LogCaptureFixture) -> None:
    url, _ = site
    with caplog.at_level(logging.INFO, logger="slurm-webui"):
        _call(url + f"/slurm/{DATA_PARSER}/jobs/?token={GOOD}")
        _call(url + f"/slurm/{DATA_PARSER}/jobs/", token=BAD)
    text = caplog.text
    assert f"GET /slurm/{DATA_PARSER}/jobs/ user=alice -> 200" in text
    assert GOOD not in text and BAD not in text


def test_listen_must_be_host_and_port() -> None:
    assert parse_listen("0.0.0.0:8080") == ("0.0.0.0", 8080)
    with pytest.raises(ValueError, match="is not HOST:PORT"):
        parse_listen("8080")
