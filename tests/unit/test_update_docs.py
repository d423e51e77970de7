"""docs/updates.md and the policy table in docs/deploy.md ("Updating a cluster") are generated from the update-policy
table (`python -m elastic_slurm.update_docs --write`) and must match what the generator prints now."""

from __future__ import annotations

import subprocess
import sys

import pytest

from cluster_config.config_paths import format_path, model_paths
from cluster_config.update_policy import Policy
from elastic_slurm import update_docs

STALE = "stale: run `python -m elastic_slurm.update_docs --write`"


def _deploy_section() -> str:
    text = update_docs.DEPLOY.read_text(encoding="utf-8")
    return text.split("## Updating a cluster\n", 1)[1].split("\n## ", 1)[0]


def test_updates_page_is_up_to_date() -> None:
    assert update_docs.PAGE.read_text(encoding="utf-8") == update_docs.render_page(), f"docs/updates.md is {STALE}"


def test_deploy_policy_table_is_up_to_date() -> None:
    text = update_docs.DEPLOY.read_text(encoding="utf-8")
    assert text == update_docs.render_deploy(text), f"the policy table of docs/deploy.md is {STALE}"
    section = _deploy_section()
    assert update_docs.BEGIN in section and update_docs.END in section  # in "Updating a cluster"
    for policy in Policy:
        assert f"| **{policy.label}** | {policy.meaning} |" in section


def test_deploy_section_points_at_the_command_and_the_page() -> None:
    section = _deploy_section()
    assert "elastic-slurm cluster update my-cluster.yaml --dryrun" in section
    assert "will print" not in section  # the command exists now
    assert "(updates.md)" in section and "(cluster-lifecycle.md)" in section


def test_page_lists_every_field_with_its_policy() -> None:
    page = update_docs.render_page()
    for path in model_paths():
        assert f"| `{format_path(path)}` |" in page
    assert "| `clusters[].partitions[].pools[].instance_types[0]` | drain-and-replace a pool |" in page
    assert "Shrinking: not allowed." in page


def test_examples_name_real_fields_under_every_policy() -> None:
    known = {format_path(p) for p in model_paths()} | {"clusters[].partitions[].pools[].instance_types[0]"}
    assert set(update_docs.EXAMPLES) <= known
    table = "\n".join(update_docs.render_policies())
    for policy in Policy:
        row = next(line for line in table.splitlines() if line.startswith(f"| **{policy.label}** |"))
        assert row.rstrip().endswith("` |"), f"no example for {policy.label}"


def test_missing_markers_are_an_error() -> None:
    with pytest.raises(ValueError, match="markers"):
        update_docs.render_deploy("## Updating a cluster\nno table here\n")


def test_module_prints_the_page() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "elastic_slurm.update_docs"], capture_output=True, text=True, timeout=60, check=False
    )
    assert (result.returncode, result.stderr) == (0, "")
    assert result.stdout == update_docs.render_page()


def test_lifecycle_page_names_every_policy_and_links_the_generated_page() -> None:
    page = (update_docs.DOCS / "cluster-lifecycle.md").read_text(encoding="utf-8")
    for policy in Policy:
        assert f"| `{policy.label}` |" in page
    assert "(updates.md)" in page
