"""Grafana dashboard JSON from definitions.py: `python -m elastic_slurm.dashboards.grafana --write` regenerates
assets/dashboards/*.json (a unit test keeps them equal to what this module builds).

Written by hand rather than with grafanalib (last release early 2024, behind current Grafana's panel model): the
model needed is small — rows, time-series and stat panels, a Prometheus datasource variable and an `instance`
variable. The files import into self-hosted Grafana or Amazon Managed Grafana (Dashboards → Import) and work against
any Prometheus that scrapes the exporter, including Amazon Managed Service for Prometheus.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from elastic_slurm.dashboards.definitions import DASHBOARDS, Dashboard, Panel

DIRECTORY = Path(__file__).resolve().parents[2] / "assets" / "dashboards"
DATASOURCE = {"type": "prometheus", "uid": "${datasource}"}
WIDTH = 24
PANEL_WIDTH = 8
PANEL_HEIGHT = 8


def _panel(panel: Panel, panel_id: int, x: int, y: int) -> dict[str, Any]:
    custom: dict[str, Any] = {"fillOpacity": 20 if panel.stacked else 0, "showPoints": "never"}
    if panel.stacked:
        custom["stacking"] = {"mode": "normal", "group": "A"}
    defaults: dict[str, Any] = {"unit": panel.unit, **({"custom": custom} if panel.kind == "timeseries" else {})}
    return {
        "id": panel_id,
        "type": panel.kind,
        "title": panel.title,
        "description": panel.description,
        "datasource": DATASOURCE,
        "gridPos": {"h": PANEL_HEIGHT, "w": PANEL_WIDTH, "x": x, "y": y},
        "fieldConfig": {"defaults": defaults, "overrides": []},
        "options": {"legend": {"displayMode": "list", "placement": "bottom"}} if panel.kind == "timeseries" else {},
        "targets": [
            {"refId": chr(ord("A") + index), "datasource": DATASOURCE, "expr": expr, "legendFormat": legend}
            for index, (legend, expr) in enumerate(panel.queries)
        ],
    }


def build(dashboard: Dashboard) -> dict[str, Any]:
    """The dashboard's JSON model."""
    panels: list[dict[str, Any]] = []
    next_id, y = 1, 0
    for row in dashboard.rows:
        panels.append({"id": next_id, "type": "row", "title": row.title, "collapsed": False, "panels": [],
                       "gridPos": {"h": 1, "w": WIDTH, "x": 0, "y": y}})  # fmt: skip
        next_id, y = next_id + 1, y + 1
        for index, panel in enumerate(row.panels):
            x = (index * PANEL_WIDTH) % WIDTH
            if index and x == 0:
                y += PANEL_HEIGHT
            panels.append(_panel(panel, next_id, x, y))
            next_id += 1
        y += PANEL_HEIGHT
    return {
        "uid": dashboard.uid,
        "title": dashboard.title,
        "description": dashboard.description,
        "tags": ["elastic-slurm", "slurm"],
        "timezone": "utc",
        "editable": True,
        "schemaVersion": 39,
        "refresh": "30s",
        "time": {"from": "now-6h", "to": "now"},
        "templating": {
            "list": [
                {"name": "datasource", "type": "datasource", "query": "prometheus", "label": "Prometheus"},
                {
                    "name": "instance",
                    "type": "query",
                    "label": "Cluster (exporter)",
                    "datasource": DATASOURCE,
                    "query": {"query": "label_values(slurm_up, instance)", "refId": "instance"},
                    "definition": "label_values(slurm_up, instance)",
                    "refresh": 2,
                    "includeAll": True,
                    "multi": True,
                    "allValue": ".+",
                },
            ]
        },
        "panels": panels,
    }


def expressions(model: dict[str, Any]) -> list[tuple[str, str]]:
    """(panel title, PromQL) of every target of a dashboard JSON model."""
    return [(p["title"], t["expr"]) for p in model["panels"] if p["type"] != "row" for t in p["targets"]]


def file_expressions(needs: str = "") -> list[tuple[str, str]]:
    """(file / panel title, PromQL) of every target in the dashboard files of assets/dashboards/ whose row needs
    `needs` (a cluster feature such as "licenses"; "" = none): what a Grafana that imported them would run."""
    wanted = {q: row.needs for d in DASHBOARDS for row in d.rows for p in row.panels for _, q in p.queries}
    return [
        (f"{path.name} / {title}", expr)
        for path in sorted(DIRECTORY.glob("*.json"))
        for title, expr in expressions(json.loads(path.read_text()))
        if wanted.get(expr, "") == needs
    ]


def rendered() -> dict[str, str]:
    """File name → the text each dashboard file must have."""
    return {f"{d.uid}.json": json.dumps(build(d), indent=2) + "\n" for d in DASHBOARDS}


def main(argv: Sequence[str] | None = None) -> int:
    """Write (--write) or check the dashboard files."""
    parser = argparse.ArgumentParser(prog="python -m elastic_slurm.dashboards.grafana", description=__doc__)
    parser.add_argument("--write", action="store_true", help="write assets/dashboards/*.json")
    args = parser.parse_args(argv)
    stale = []
    for name, text in rendered().items():
        path = DIRECTORY / name
        if args.write:
            DIRECTORY.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
        elif not path.exists() or path.read_text() != text:
            stale.append(name)
    if stale:
        print(f"dashboards out of date: {', '.join(stale)} (run with --write)", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
