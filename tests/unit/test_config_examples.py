"""Every example config loads, survives a dump/load round trip, and is valid against `elastic-slurm schema`'s output.

The examples are found by glob, so a newly added example is covered without touching this file.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from cluster_config import ElasticSlurmConfig, load
from cluster_config.loader import parse_yaml
from elastic_slurm.cli import main

EXAMPLES = sorted((Path(__file__).resolve().parents[2] / "cluster_config" / "examples").glob("*.yaml"))


@pytest.fixture(scope="module")
def cli_schema(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The JSON Schema exactly as `elastic-slurm schema --out FILE` writes it."""
    out = tmp_path_factory.mktemp("schema") / "cluster.schema.json"
    assert main(["schema", "--out", str(out)]) == 0
    return json.loads(out.read_text(encoding="utf-8"))  # type: ignore[no-any-return]


def test_the_three_required_examples_exist() -> None:
    assert {"minimal.yaml", "multi-az-gpu.yaml", "federation.yaml"} <= {p.name for p in EXAMPLES}


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.stem)
def test_example_loads(path: Path) -> None:
    assert isinstance(load(path), ElasticSlurmConfig)


@pytest.mark.parametrize("exclude_defaults", [False, True], ids=["full", "without_defaults"])
@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.stem)
def test_example_round_trips_through_yaml(path: Path, exclude_defaults: bool) -> None:
    config = load(path)
    dumped = yaml.safe_dump(config.model_dump(mode="json", exclude_defaults=exclude_defaults), sort_keys=False)
    assert parse_yaml(dumped, f"{path.name} (dumped)") == config


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.stem)
def test_example_is_valid_against_the_cli_json_schema(path: Path, cli_schema: dict[str, Any]) -> None:
    jsonschema = pytest.importorskip("jsonschema")
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    jsonschema.Draft202012Validator(cli_schema).validate(data)


def test_cli_json_schema_is_a_valid_draft_2020_12_schema(cli_schema: dict[str, Any]) -> None:
    jsonschema = pytest.importorskip("jsonschema")
    jsonschema.Draft202012Validator.check_schema(cli_schema)
    assert cli_schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"


def test_json_schema_flags_a_misspelt_key_like_the_loader_does(cli_schema: dict[str, Any]) -> None:
    jsonschema = pytest.importorskip("jsonschema")
    data = yaml.safe_load(EXAMPLES[0].read_text(encoding="utf-8"))
    data["clusters"][0]["partitons"] = data["clusters"][0].pop("partitions")
    errors = list(jsonschema.Draft202012Validator(cli_schema).iter_errors(data))
    assert any("partitons" in e.message for e in errors)


def test_every_schema_property_has_a_description(cli_schema: dict[str, Any]) -> None:
    undocumented = [
        f"{name}.{key}"
        for name, node in cli_schema["$defs"].items()
        for key, prop in node.get("properties", {}).items()
        if not prop.get("description")
    ]
    undocumented += [key for key, prop in cli_schema["properties"].items() if not prop.get("description")]
    assert undocumented == []
