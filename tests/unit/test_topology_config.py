"""`network_topology` in the config and `elastic-slurm render`: the field, its conflict with a user's TopologyPlugin
(one line naming the field), and topology.conf written beside the fragment, given to SlurmUser on a controller."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest

from cluster_config import ConfigInvalid, parse
from elastic_slurm.cli import main
from tests.unit.cache_fixture import write_fixture_cache
from tests.unit.test_config_invalid import base, set_path
from tests.unit.topology_answers import switches

EXAMPLES = Path(__file__).parents[2] / "cluster_config" / "examples"
POOL = "clusters[0].partitions[0].pools[0]"


def _topology_yaml(tmp_path: Path) -> Path:
    text = (EXAMPLES / "minimal.yaml").read_text()
    path = tmp_path / "topology.yaml"
    path.write_text(re.sub(r"( +)max_nodes:", r"\1network_topology: true\n\1max_nodes:", text, count=1))
    return path


def test_network_topology_is_off_unless_asked() -> None:
    data = base()
    assert parse(data).clusters[0].partitions[0].pools[0].network_topology is False
    set_path(data, f"{POOL}.network_topology", True)
    assert parse(data).clusters[0].partitions[0].pools[0].network_topology is True


def test_a_user_topology_plugin_next_to_network_topology_is_one_error_naming_it() -> None:
    data = base()
    set_path(data, f"{POOL}.network_topology", True)
    set_path(data, "clusters[0].slurm_settings", {"TopologyPlugin": "topology/block"})
    with pytest.raises(ConfigInvalid) as caught:
        parse(data)
    assert [(e.path, e.message) for e in caught.value.errors] == [
        (
            "clusters[0].slurm_settings.TopologyPlugin",
            "a pool has network_topology, which sets TopologyPlugin=topology/tree: remove one of them",
        )
    ]
    set_path(data, f"{POOL}.network_topology", False)  # without it, the user's plugin is theirs
    assert parse(data).clusters[0].slurm_settings == {"TopologyPlugin": "topology/block"}


def test_the_cli_refuses_the_conflict_in_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _topology_yaml(tmp_path)
    text = path.read_text().replace(
        "    partitions:", '    slurm_settings: {TopologyPlugin: "topology/tree"}\n    partitions:'
    )
    path.write_text(text)
    assert main(["validate", str(path)]) != 0
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert "clusters[0].slurm_settings.TopologyPlugin: a pool has network_topology" in err


def test_render_writes_topology_conf_beside_the_fragment_and_removes_a_stale_one(tmp_path: Path) -> None:
    cache = str(write_fixture_cache(tmp_path / "cache.json"))
    out = tmp_path / "out"
    assert main(["render", str(_topology_yaml(tmp_path)), "--out", str(out), "--cache", cache]) == 0
    assert "TopologyPlugin=topology/tree" in (out / "slurm-elastic.conf").read_text()
    tree = switches((out / "topology.conf").read_text())
    assert tree["cpu-c7i"] == ("Nodes", [f"cpu-c7i-{i}" for i in range(1, 17)])
    assert tree["ec2"] == ("Switches", ["cpu-c7i"])
    assert json.loads((out / "manifest.json").read_text())["pools"][0]["network_topology"] is True
    assert main(["render", str(EXAMPLES / "minimal.yaml"), "--out", str(out), "--cache", cache]) == 0
    assert not (out / "topology.conf").exists()
    assert "TopologyPlugin" not in (out / "slurm-elastic.conf").read_text()


@pytest.mark.skipif(os.geteuid() != 0, reason="giving a file to another user needs root")
def test_on_a_controller_render_gives_topology_conf_to_slurm_user(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache = str(write_fixture_cache(tmp_path / "cache.json"))
    overrides = tmp_path / "overrides.json"
    overrides.write_text(json.dumps({"base": {"slurm_user": "nobody"}}))
    monkeypatch.setenv("ES_RENDER_OVERRIDES", str(overrides))
    out = tmp_path / "out"
    hosts = ["--controller-hosts", "ip-a(127.0.0.10)", "--slurmdbd-host", "127.0.0.10"]
    assert main(["render", str(_topology_yaml(tmp_path)), "--out", str(out), "--cache", cache, *hosts]) == 0
    assert (out / "topology.conf").stat().st_uid == 65534  # nobody: the manager, as SlurmUser, rewrites it in place
    assert (out / "slurm.conf").stat().st_uid == 0
