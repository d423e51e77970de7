"""A minimal client of the Prometheus HTTP API: one range query, one-line errors that name the server.

`api` GETs any `/api/v1/` endpoint (https://prometheus.io/docs/prometheus/latest/querying/api/), `query_range` reads
a range query's series (the local cloud's tests use `api` for instant queries and targets); stdlib urllib, so the CLI
needs no HTTP library on a controller.
"""

from __future__ import annotations

import json
import math
import urllib.error
import urllib.parse
import urllib.request
from typing import Any

TIMEOUT_S = 10.0

Points = list[tuple[float, float]]


class PrometheusError(RuntimeError):
    """Prometheus is unreachable or answered an error (one line naming its URL)."""


def _one_line(text: str) -> str:
    return " ".join(str(text).split())


def _error_of(body: bytes) -> str:
    """The `error` of a Prometheus error answer, else the start of the body."""
    try:
        answer = json.loads(body)
        return _one_line(f"{answer.get('errorType', 'error')}: {answer.get('error', '')}")
    except (ValueError, AttributeError):
        return _one_line(body[:200].decode("utf-8", "replace")) or "(empty answer)"


def api(base_url: str, endpoint: str, params: dict[str, str], timeout: float = TIMEOUT_S) -> dict[str, Any]:
    """GET `/api/v1/<endpoint>` with `params`; the answer's `data` (PrometheusError, one line, otherwise)."""
    base = base_url.rstrip("/")
    url = f"{base}/api/v1/{endpoint}" + (f"?{urllib.parse.urlencode(params)}" if params else "")
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:
            body = response.read()
    except urllib.error.HTTPError as exc:
        raise PrometheusError(f"Prometheus at {base} answered HTTP {exc.code}: {_error_of(exc.read())}") from None
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        text = reason.strerror if isinstance(reason, OSError) and reason.strerror else str(reason)  # no "[Errno n]"
        raise PrometheusError(f"Prometheus at {base} is unreachable: {_one_line(text)}") from None
    try:
        answer: Any = json.loads(body)
    except ValueError:
        raise PrometheusError(f"Prometheus at {base} answered something that is not JSON: {_error_of(body)}") from None
    if not isinstance(answer, dict) or answer.get("status") != "success":
        raise PrometheusError(f"Prometheus at {base} answered an error: {_error_of(body)}")
    data = answer.get("data")
    return data if isinstance(data, dict) else {}


def query_range(
    base_url: str, query: str, start: float, end: float, step: float, timeout: float = TIMEOUT_S
) -> list[tuple[dict[str, str], Points]]:
    """Run one range query; returns (labels, [(unix time, value), ...]) per series. NaN samples are dropped."""
    params = {"query": query, "start": f"{start:.3f}", "end": f"{end:.3f}", "step": f"{step:g}"}
    data = api(base_url, "query_range", params, timeout)
    if data.get("resultType") != "matrix":
        base = base_url.rstrip("/")
        raise PrometheusError(f"Prometheus at {base} answered a {data.get('resultType')!r}, not a matrix, for {query}")
    series = []
    for item in data.get("result") or []:
        points = [(float(t), float(v)) for t, v in item.get("values") or []]
        series.append((dict(item.get("metric") or {}), [(t, v) for t, v in points if not math.isnan(v)]))
    return series
