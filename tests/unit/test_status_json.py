"""`elastic-slurm status --manifest M --output json` (on a controller): the manager's metrics and the node ↔ instance
matching of the text table as one JSON object with the keys docs/cli.md lists."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from elastic_slurm import cli
from elastic_slurm.commands.status_cmd import nodes_json
from slurm_plugin.manager import metrics
from slurm_plugin.manager.model import Instance, Node
from slurm_plugin.manager.observe import parse_state
from slurm_plugin.manifest import Manifest, write_manifest
from tests.unit.test_reconcile_daemon import NOW, POOL


def test_nodes_json_matches_nodes_to_instances_like_the_table() -> None:
    nodes = [
        Node("cpu-c7i-1", *parse_state("ALLOCATED+CLOUD"), "127.1.0.1"),
        Node("cpu-c7i-2", *parse_state("IDLE+CLOUD+POWERED_DOWN")),
        Node("cpu-c7i-3", *parse_state("DOWN+CLOUD+POWERED_DOWN"), None, "(Code:InsufficientInstanceCapacity) x"),
        Node("login-1", *parse_state("IDLE")),
    ]
    instances = [
        Instance("i-1", "us-east-1", "running", "127.1.0.1", NOW, "alpha", "cpu-c7i"),
        Instance("i-9", "us-east-1", "running", "127.1.0.9", NOW, "alpha", "cpu-c7i"),
    ]
    doc = nodes_json(nodes, instances, [POOL])
    by_name = {n["name"]: n for n in doc["nodes"]}
    assert set(by_name) == {"cpu-c7i-1", "cpu-c7i-2", "cpu-c7i-3"}  # login-1 is no pool's node
    assert by_name["cpu-c7i-1"] == {
        "name": "cpu-c7i-1",
        "state": "ALLOCATED",
        "flags": ["CLOUD"],
        "address": "127.1.0.1",
        "instance_id": "i-1",
        "ec2_state": "running",
        "reason": None,
    }
    assert by_name["cpu-c7i-3"]["reason"] == "(Code:InsufficientInstanceCapacity) x"
    assert by_name["cpu-c7i-3"]["instance_id"] is None
    assert [i["instance_id"] for i in doc["unclaimed_instances"]] == ["i-9"]
    assert doc["unclaimed_instances"][0]["launched"] == NOW.isoformat("T", "seconds")


def test_counters_only_as_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    manifest = Manifest(
        cluster="alpha",
        home_region="us-east-1",
        instance_cache_path=str(tmp_path / "c.json"),
        state_dir=str(tmp_path / "state"),
        log_file=str(tmp_path / "plugin.log"),
        pools=[POOL],
    )
    write_manifest(manifest, tmp_path / "manifest.json")
    metrics.update(tmp_path / "state", ["orphans_terminated"], NOW, 1)
    argv = ["status", "--manifest", str(tmp_path / "manifest.json"), "--counters-only", "--output", "json"]
    assert cli.main(argv) == 0
    doc = json.loads(capsys.readouterr().out)
    assert set(doc) == {"cluster", "region", "metrics", "nodes", "unclaimed_instances", "unavailable"}
    assert (doc["cluster"], doc["region"], doc["nodes"], doc["unavailable"]) == ("alpha", "us-east-1", None, None)
    assert doc["metrics"]["counters"]["orphans_terminated"] == 1 and doc["metrics"]["last_actions"] == 1
