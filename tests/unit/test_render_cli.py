"""`elastic-slurm render`: files written, exit codes and one-line errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from elastic_slurm.cli import main
from slurm_plugin.manifest import load_manifest
from tests.unit.cache_fixture import write_fixture_cache

EXAMPLES = Path(__file__).parents[2] / "cluster_config" / "examples"
MINIMAL = str(EXAMPLES / "minimal.yaml")


@pytest.fixture
def cache(tmp_path: Path) -> str:
    return str(write_fixture_cache(tmp_path / "cache.json"))


def _err(capsys: pytest.CaptureFixture[str]) -> str:
    err = capsys.readouterr().err.strip()
    assert "Traceback" not in err
    return err


def test_render_writes_conf_manifest_and_prolog_env(tmp_path: Path, cache: str) -> None:
    out = tmp_path / "out"
    assert main(["render", MINIMAL, "--out", str(out), "--cache", cache]) == 0
    conf = (out / "slurm-elastic.conf").read_text()
    assert "NodeName=cpu-c7i-[1-16] CPUs=2 Sockets=1 CoresPerSocket=1 ThreadsPerCore=2 RealMemory=3584 " in conf
    assert not (out / "gres.conf").exists()
    manifest = load_manifest(out / "manifest.json")
    assert manifest.cluster == "minimal"
    assert manifest.pools[0].locations[0].subnet_id == "subnet-PLACEHOLDER-us-east-1a"
    assert "WAIT_LIMIT=600" in (out / "prolog-wait-for-boot.env").read_text()


def test_render_gpu_example_writes_gres_conf(tmp_path: Path, cache: str) -> None:
    assert main(["render", str(EXAMPLES / "multi-az-gpu.yaml"), "--out", str(tmp_path), "--cache", cache]) == 0
    assert "Name=gpu File=/dev/nvidia[0-7]" in (tmp_path / "gres.conf").read_text()


def test_several_clusters_go_to_one_directory_each(tmp_path: Path, cache: str) -> None:
    assert main(["render", str(EXAMPLES / "federation.yaml"), "--out", str(tmp_path), "--cache", cache]) == 0
    assert load_manifest(tmp_path / "east" / "manifest.json").cluster == "east"
    assert load_manifest(tmp_path / "west" / "manifest.json").cluster == "west"


def test_cluster_option_selects_one(tmp_path: Path, cache: str) -> None:
    args = ["render", str(EXAMPLES / "federation.yaml"), "--out", str(tmp_path), "--cache", cache, "--cluster", "west"]
    assert main(args) == 0
    assert load_manifest(tmp_path / "manifest.json").cluster == "west"


def test_infra_file_ids_reach_the_manifest(tmp_path: Path, cache: str) -> None:
    infra = {
        "subnets": {"us-east-1a": "subnet-0123456789abcdef0", "us-east-1b": "subnet-0123456789abcdef1"},
        "launch_templates": {"cpu-c7i@us-east-1": "lt-0123456789abcdef0"},
        "aws_endpoint_url": "http://127.0.0.1:4566",
    }
    (tmp_path / "infra.json").write_text(json.dumps(infra))
    args = ["render", MINIMAL, "--out", str(tmp_path / "o"), "--cache", cache, "--infra", str(tmp_path / "infra.json")]
    assert main(args) == 0
    manifest = load_manifest(tmp_path / "o" / "manifest.json")
    assert manifest.pools[0].locations[1].subnet_id == "subnet-0123456789abcdef1"
    assert manifest.aws_endpoint_url == "http://127.0.0.1:4566"


def test_without_cache_says_to_refresh_and_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["render", MINIMAL, "--out", str(tmp_path)]) == 2
    assert _err(capsys) == (
        "elastic-slurm render: --cache: an instance cache is needed; "
        "build one with `elastic-slurm instance-cache refresh`"
    )


@pytest.mark.parametrize(
    ("content", "fragment"),
    [
        (None, "not found"),
        ("{oops", "not valid JSON"),
        ('{"schema_version": 0}', "rebuild with `elastic-slurm instance-cache refresh`"),
    ],
    ids=["missing", "corrupt", "old-schema"],
)
def test_unusable_cache_exits_2_with_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: str | None, fragment: str
) -> None:
    path = tmp_path / "cache.json"
    if content is not None:
        path.write_text(content)
    assert main(["render", MINIMAL, "--out", str(tmp_path / "o"), "--cache", str(path)]) == 2
    err = _err(capsys)
    assert err.startswith("elastic-slurm render: --cache: instance cache ") and fragment in err
    assert len(err.splitlines()) == 1
    assert not (tmp_path / "o").exists()


def test_cache_lacking_a_config_type_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str], cache: str) -> None:
    data = json.loads(Path(cache).read_text())
    del data["regions"]["us-east-1"]["c7i.large"]
    Path(cache).write_text(json.dumps(data))
    assert main(["render", MINIMAL, "--out", str(tmp_path / "o"), "--cache", cache]) == 2
    assert "no c7i.large in us-east-1" in _err(capsys)


@pytest.mark.parametrize(
    ("extra", "fragment"),
    [
        (["--cluster", "nope"], "--cluster: no cluster 'nope'"),
        (["--infra", "/nonexistent/infra.json"], "--infra: cannot read /nonexistent/infra.json"),
    ],
    ids=["unknown-cluster", "missing-infra"],
)
def test_bad_arguments_exit_2_with_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], cache: str, extra: list[str], fragment: str
) -> None:
    assert main(["render", MINIMAL, "--out", str(tmp_path / "o"), "--cache", cache, *extra]) == 2
    err = _err(capsys)
    assert fragment in err and len(err.splitlines()) == 1


def test_infra_missing_a_launch_template_exits_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], cache: str
) -> None:
    (tmp_path / "infra.json").write_text(
        json.dumps({"subnets": {"us-east-1a": "s", "us-east-1b": "s"}, "launch_templates": {}})
    )
    args = ["render", MINIMAL, "--out", str(tmp_path / "o"), "--cache", cache, "--infra", str(tmp_path / "infra.json")]
    assert main(args) == 2
    assert "no launch template 'cpu-c7i@us-east-1'" in _err(capsys)


def test_malformed_infra_file_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str], cache: str) -> None:
    (tmp_path / "infra.json").write_text('{"subnets": 3}')
    args = ["render", MINIMAL, "--out", str(tmp_path / "o"), "--cache", cache, "--infra", str(tmp_path / "infra.json")]
    assert main(args) == 2
    assert "--infra: " in _err(capsys)


def test_infra_with_several_clusters_needs_cluster(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], cache: str
) -> None:
    (tmp_path / "infra.json").write_text("{}")
    fed = str(EXAMPLES / "federation.yaml")
    assert main(["render", fed, "--out", str(tmp_path), "--cache", cache, "--infra", str(tmp_path / "infra.json")]) == 2
    assert "choose one with --cluster" in _err(capsys)
