"""The Grafana dashboards: the files in assets/dashboards/ are what elastic_slurm/dashboards builds, every query
selects the dashboard's cluster, and names only metrics the exporter serves (the e2e test then runs them all)."""

from __future__ import annotations

import json
import re
from pathlib import Path

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from elastic_slurm.dashboards import grafana
from elastic_slurm.dashboards.definitions import DASHBOARDS
from slurm_plugin.exporter.collector import ClusterCollector
from slurm_plugin.exporter.plugin_source import PluginReader
from slurm_plugin.telemetry import events
from tests.unit.test_exporter import CountingSlurm, _manifest

METRIC = re.compile(r"\b((?:elastic_)?slurm_[a-z_]+)\b")


def test_dashboard_files_are_up_to_date() -> None:
    assert grafana.main([]) == 0, "run: python -m elastic_slurm.dashboards.grafana --write"
    names = sorted(p.name for p in grafana.DIRECTORY.glob("*.json"))
    assert names == sorted(f"{d.uid}.json" for d in DASHBOARDS)


def test_every_query_selects_the_dashboards_cluster_and_panels_do_not_overlap() -> None:
    for path in sorted(grafana.DIRECTORY.glob("*.json")):
        model = json.loads(path.read_text())
        exprs = grafana.expressions(model)
        assert exprs, path.name
        for title, expr in exprs:
            assert expr.count('instance=~"$instance"') == len(METRIC.findall(expr)), (path.name, title)
        cells = set()
        for panel in model["panels"]:
            pos = panel["gridPos"]
            for x in range(pos["x"], pos["x"] + pos["w"]):
                for y in range(pos["y"], pos["y"] + pos["h"]):
                    assert (x, y) not in cells, (path.name, panel["title"])
                    cells.add((x, y))
        assert len({p["id"] for p in model["panels"]}) == len(model["panels"])


def test_dashboards_name_only_metrics_the_exporter_serves(tmp_path: Path) -> None:
    manifest = _manifest(tmp_path)
    where = {"pool": "cpu-small", "az": "us-east-1a", "region": "us-east-1", "market": "spot"}
    events.record(tmp_path, [  # one record of each kind: a counter shows up once it has counted something
        {"event": "launch_call", **where, "azs": {"us-east-1a": 1}},
        {"event": "capacity_error", **where, "code": "InsufficientInstanceCapacity"},
        {"event": "node_launched", **where, "instance_id": "i-1", "seconds": 1.0},
        {"event": "terminated", **where, "instance_id": "i-1", "reason": "suspend"},
    ])  # fmt: skip
    collector = ClusterCollector(manifest, CountingSlurm(4), PluginReader(manifest, tmp_path), accounting=True)
    registry = CollectorRegistry(auto_describe=False)
    registry.register(collector)
    served = {s.name for f in text_string_to_metric_families(generate_latest(registry).decode()) for s in f.samples}
    served |= {
        "slurm_license_total",
        "slurm_license_used",
        "elastic_slurm_license_sync_age_seconds",
        "elastic_slurm_license_sync_failures",
    }  # with licenses only (the federation e2e test runs those)
    used = {
        name for d in DASHBOARDS for r in d.rows for p in r.panels for _, q in p.queries for name in METRIC.findall(q)
    }
    assert used - served == set()
    assert len(used) >= 30


def test_the_e2e_tests_run_every_query_of_the_dashboard_files_once() -> None:
    every = [expr for path in sorted(grafana.DIRECTORY.glob("*.json"))
             for _, expr in grafana.expressions(json.loads(path.read_text()))]  # fmt: skip
    split = [expr for needs in ("", "licenses") for _, expr in grafana.file_expressions(needs)]
    assert sorted(split) == sorted(every)
    assert len(grafana.file_expressions("licenses")) == 4
