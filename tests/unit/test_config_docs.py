"""docs/configuration.md is generated from the schema (`make docs`) and must match what the generator prints now."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from elastic_slurm import docs_gen
from elastic_slurm.commands.config_cmds import json_schema

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "configuration.md"


def test_configuration_page_is_up_to_date_with_the_schema() -> None:
    assert PAGE.read_text(encoding="utf-8") == docs_gen.render(), "docs/configuration.md is stale: run `make docs`"


def test_generator_module_prints_the_page() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "elastic_slurm.docs_gen"], capture_output=True, text=True, timeout=60, cwd=ROOT
    )
    assert (result.returncode, result.stderr) == (0, "")
    assert result.stdout == docs_gen.render()


def test_every_key_of_every_section_is_documented() -> None:
    page = docs_gen.render()
    schema = json_schema()
    sections = {"ElasticSlurmConfig": schema, **schema["$defs"]}
    for name, node in sections.items():
        assert f"### {name}\n" in page
        body = page.split(f"### {name}\n", 1)[1].split("\n### ", 1)[0]
        for key, prop in node.get("properties", {}).items():
            assert f"| `{key}` |" in body, f"{name}.{key} missing"
            assert prop["description"] in body


def test_page_explains_each_example() -> None:
    page = docs_gen.render()
    for example in ("minimal.yaml", "multi-az-gpu.yaml", "federation.yaml"):
        assert f"### `{example}`" in page


def test_defaults_and_required_keys_are_shown() -> None:
    pool = docs_gen.render().split("### Pool\n", 1)[1].split("\n### ", 1)[0]
    assert "| `max_nodes` | integer | **required** |" in pool
    assert "| `min_nodes` | integer | `0` |" in pool
    assert '| `purchase_option` | [PurchaseOption](#purchaseoption) | `"on_demand"` |' in pool


def test_type_of_renders_unions_lists_and_maps() -> None:
    assert docs_gen.type_of({"anyOf": [{"type": "integer"}, {"type": "null"}]}) == "integer or `null`"
    assert docs_gen.type_of({"type": "array", "items": {"$ref": "#/$defs/Pool"}}) == "list of [Pool](#pool)"
    assert (
        docs_gen.type_of({"type": "object", "additionalProperties": {"type": "integer"}}) == "map of string to integer"
    )
    assert docs_gen.type_of({"enum": ["a", "b"]}) == 'one of `"a"`, `"b"`'
