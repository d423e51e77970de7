"""The timeline picture (elastic_slurm/report): drawing a synthetic timeline, reading one from a fake Prometheus on
127.0.0.1 (canned /api/v1/query_range answers), the one-line errors, and `elastic-slurm local report`."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import urllib.parse
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from matplotlib.image import imread

from elastic_slurm.cli import main
from elastic_slurm.report import TIMELINE_QUERIES, PrometheusError, ReportError, Timeline, draw, fetch_timeline

START = 1_800_000_000.0
UNREACHABLE = "http://127.0.0.1:9"  # the discard port: nobody listens there


def _steps(changes: dict[float, float], until: int = 300, every: int = 5) -> list[tuple[float, float]]:
    """A series sampled every `every` s: the value of the latest change at or before each sample (0 before any)."""
    latest_first = sorted(changes.items(), reverse=True)
    return [(START + t, float(next((v for at, v in latest_first if at <= t), 0))) for t in range(0, until + 1, every)]


def synthetic_timeline() -> Timeline:
    """Nodes of two pools come up in two AZs, 4 jobs pend then run, 2 capacity errors, everything ends at 250 s."""
    return Timeline(
        cluster="demo",
        start=START,
        end=START + 300,
        step=5,
        nodes_up={
            "cpu-c7i": _steps({25: 1, 35: 3, 45: 5, 55: 6, 250: 0}),
            "gpu-g5": _steps({55: 1, 70: 2, 250: 0}),
        },
        instances={"us-east-1a": _steps({15: 3, 30: 5, 250: 0}), "us-east-1b": _steps({40: 2, 60: 3, 250: 0})},
        jobs={"pending": _steps({0: 4, 60: 0}), "running": _steps({60: 4, 240: 0})},
        launches={"us-east-1a": _steps({15: 3, 30: 5}), "us-east-1b": _steps({40: 2, 60: 3})},
        capacity_errors={"us-east-1a": _steps({25: 1, 45: 2})},
        terminations={"total": _steps({250: 8})},
    )


def test_a_synthetic_timeline_draws_a_big_colourful_png(tmp_path: Path) -> None:
    path = draw(synthetic_timeline(), tmp_path / "sub" / "timeline.png")
    assert path == tmp_path / "sub" / "timeline.png"
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    pixels = imread(path)
    height, width = pixels.shape[:2]
    assert width >= 1000 and height >= 750
    rgb = (pixels[..., :3] * 255).astype(np.uint8).reshape(-1, 3)
    colours = {tuple(c) for c in np.unique(rgb, axis=0)}
    assert len(colours) > 5
    named = {(0x1F, 0x77, 0xB4), (0xFF, 0x7F, 0x0E), (0x2C, 0xA0, 0x2C)}  # the AZ and job-state line colours
    assert named <= colours
    assert float(rgb.std()) > 10


def test_an_empty_timeline_draws_no_data_panels(tmp_path: Path) -> None:
    path = draw(Timeline(cluster="", start=START, end=START + 60, step=1), tmp_path / "empty.png")
    pixels = imread(path)
    assert pixels.shape[1] >= 1000
    assert float(pixels[..., :3].std()) > 0  # axes and "no data" text, not a blank image


def test_draw_without_matplotlib_says_how_to_install_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib.figure", None)
    with pytest.raises(ReportError, match=r"^matplotlib is not installed: pip install matplotlib$"):
        draw(synthetic_timeline(), tmp_path / "t.png")
    assert not (tmp_path / "t.png").exists()


def test_the_cli_and_the_report_package_import_without_matplotlib() -> None:
    program = "import sys, elastic_slurm.cli, elastic_slurm.report; print('matplotlib' in sys.modules)"
    result = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "False"


# ------------------------------------------------------------------ a fake Prometheus


@dataclass
class FakePrometheus:
    """Answers query_range with canned matrices per query; records every request's parameters."""

    answers: dict[str, list[dict[str, Any]]]
    error: tuple[int, dict[str, Any]] | None = None
    requests: list[dict[str, str]] = field(default_factory=list)
    url: str = ""


@pytest.fixture
def prometheus() -> Iterator[FakePrometheus]:
    fake = FakePrometheus(answers={})

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            parsed = urllib.parse.urlparse(self.path)
            params = dict(urllib.parse.parse_qsl(parsed.query))
            fake.requests.append({"path": parsed.path, **params})
            code, body = fake.error or (
                200,
                {
                    "status": "success",
                    "data": {"resultType": "matrix", "result": fake.answers.get(params["query"], [])},
                },
            )
            data = json.dumps(body).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    fake.url = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        yield fake
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


def _matrix(labels: dict[str, str], values: list[tuple[float, str]]) -> dict[str, Any]:
    return {"metric": labels, "values": [[START + t, v] for t, v in values]}


def test_fetch_timeline_reads_every_series_from_prometheus(prometheus: FakePrometheus) -> None:
    q = TIMELINE_QUERIES
    prometheus.answers = {
        q["nodes_up"]: [_matrix({"pool": "cpu-c7i"}, [(0, "0"), (1, "2"), (2, "3")])],
        q["instances"]: [
            _matrix({"az": "us-east-1b"}, [(1, "1"), (2, "1")]),
            _matrix({"az": "us-east-1a"}, [(0, "0"), (1, "2"), (2, "NaN")]),
        ],
        q["jobs"]: [_matrix({"state": "pending"}, [(0, "3"), (2, "0")]), _matrix({"state": "running"}, [(2, "3")])],
        # counters: 1a existed at the start with 10 earlier launches; 1b appeared later (its first 2 count, from 0)
        q["launches"]: [
            _matrix({"az": "us-east-1a"}, [(0, "10"), (1, "12"), (2, "13")]),
            _matrix({"az": "us-east-1b"}, [(1, "2"), (2, "2")]),
        ],
        q["capacity_errors"]: [_matrix({"az": "us-east-1a"}, [(0, "1"), (1, "2"), (2, "1")])],  # reset at 2 s
        q["terminations"]: [_matrix({}, [(0, "5"), (1, "5"), (2, "8")])],
    }
    timeline = fetch_timeline(prometheus.url + "/", START, START + 2, 1, cluster="demo")

    assert (timeline.cluster, timeline.start, timeline.end, timeline.step) == ("demo", START, START + 2, 1)
    assert timeline.nodes_up == {"cpu-c7i": [(START, 0), (START + 1, 2), (START + 2, 3)]}
    assert list(timeline.instances) == ["us-east-1a", "us-east-1b"]  # sorted
    assert timeline.instances["us-east-1a"] == [(START, 0), (START + 1, 2)]  # NaN dropped
    assert timeline.jobs["running"] == [(START + 2, 3)]
    assert timeline.launches == {
        "us-east-1a": [(START, 0), (START + 1, 2), (START + 2, 3)],
        "us-east-1b": [(START, 0), (START + 1, 2), (START + 2, 2)],  # appeared later: 0 one step before
    }
    assert timeline.capacity_errors == {"us-east-1a": [(START, 0), (START + 1, 1), (START + 2, 2)]}
    assert timeline.terminations == {"total": [(START, 0), (START + 1, 0), (START + 2, 3)]}
    assert set(timeline.series()) == set(TIMELINE_QUERIES)

    assert sorted(r["query"] for r in prometheus.requests) == sorted(TIMELINE_QUERIES.values())
    first = prometheus.requests[0]
    assert first["path"] == "/api/v1/query_range"
    assert (float(first["start"]), float(first["end"]), float(first["step"])) == (START, START + 2, 1)


def test_prometheus_error_answer_is_one_line_naming_the_url(prometheus: FakePrometheus) -> None:
    prometheus.error = (400, {"status": "error", "errorType": "bad_data", "error": "parse error:\nunexpected }"})
    with pytest.raises(PrometheusError) as caught:
        fetch_timeline(prometheus.url, START, START + 60, 1)
    message = str(caught.value)
    assert "\n" not in message
    assert message == f"Prometheus at {prometheus.url} answered HTTP 400: bad_data: parse error: unexpected }}"


def test_unreachable_prometheus_is_one_line_naming_the_url() -> None:
    url = UNREACHABLE
    with pytest.raises(PrometheusError) as caught:
        fetch_timeline(url, START, START + 60, 1)
    message = str(caught.value)
    assert message.startswith(f"Prometheus at {url} is unreachable: ")
    assert "\n" not in message


# ------------------------------------------------------------------ the CLI


def test_local_report_without_a_cloud_fails_with_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["local", "report", "--state-dir", str(tmp_path / "nothing")])
    out, err = capsys.readouterr()
    assert code != 0
    assert out == ""
    assert len(err.strip().splitlines()) == 1
    assert "no local cloud" in err and str(tmp_path / "nothing") in err


def _cloud_json(state_dir: Path, **extra: Any) -> None:
    (state_dir / "state").mkdir(parents=True)
    info = {
        "cluster": "demo",
        "config_path": "demo.yaml",
        "aws_endpoint_url": "http://127.0.0.1:9",
        "regions": ["us-east-1"],
        "ports": {},
        "resume_timeout": 600,
        "suspend_time": 300,
        "accounting": False,
        **extra,
    }
    (state_dir / "state" / "cloud.json").write_text(json.dumps(info))


def test_local_report_draws_the_timeline_from_the_clouds_prometheus(
    tmp_path: Path, prometheus: FakePrometheus, capsys: pytest.CaptureFixture[str]
) -> None:
    _cloud_json(tmp_path, prometheus_url=prometheus.url)
    prometheus.answers = {TIMELINE_QUERIES["jobs"]: [_matrix({"state": "running"}, [(0, "1")])]}
    code = main(["local", "report", "--state-dir", str(tmp_path), "--since", "120"])
    out, err = capsys.readouterr()
    assert (code, err) == (0, "")
    assert out == f"timeline: {tmp_path / 'timeline.png'}\n"
    assert imread(tmp_path / "timeline.png").shape[1] >= 1000
    request = prometheus.requests[0]
    assert float(request["end"]) - float(request["start"]) == pytest.approx(120, abs=0.01)


def test_local_report_with_prometheus_down_fails_with_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = UNREACHABLE
    _cloud_json(tmp_path, prometheus_url=url)
    code = main(["local", "report", "--state-dir", str(tmp_path), "--out", str(tmp_path / "x.png")])
    out, err = capsys.readouterr()
    assert code != 0
    assert out == ""
    assert err.strip().splitlines() == [f"elastic-slurm local: Prometheus at {url} is unreachable: Connection refused"]
    assert not (tmp_path / "x.png").exists()
