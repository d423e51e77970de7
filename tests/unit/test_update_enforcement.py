"""Every row of docs/updates.md's field table is enforced as written: the row's policy is the one the code gives the
field, and `cluster update` does what the policy says (deploy; deploy only with --yes; refuse) — through the same
plan functions `cluster update` runs. Plus the `--yes` cases outside the table (a lowered `max_nodes`, a removed
pool) and `update --dryrun --output json`."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from cluster_config.config_diff import ABSENT, _change
from cluster_config.config_paths import ANY_INDEX, ANY_KEY, Key, parse_pattern
from cluster_config.update_policy import Policy, rule_for
from elastic_slurm import cli
from elastic_slurm.commands import cluster_cmd
from elastic_slurm.lifecycle import cdk
from elastic_slurm.lifecycle.update_check import NEEDS_YES, UpdatePlan

REPO = Path(__file__).resolve().parents[2]
MINIMAL = REPO / "cluster_config" / "examples" / "minimal.yaml"
ROW = re.compile(r"^\| `([^`]+)` \| ([a-z -]+) \| (.*) \|$")
BY_LABEL = {p.label: p for p in Policy}


def _table() -> list[tuple[str, Policy, str]]:
    text = (REPO / "docs" / "updates.md").read_text(encoding="utf-8")
    rows = text[text.index("## Every field") :].splitlines()
    return [(m[1], BY_LABEL[m[2]], m[3]) for line in rows if (m := ROW.match(line))]


TABLE = _table()


def _concrete(field: str) -> Any:
    """A concrete path of a table field: `[]` → `[1]` (a row for `[0]` is its own row), `<key>` → the key `k`."""
    return tuple(Key("k") if s == ANY_KEY else 1 if s == ANY_INDEX else s for s in parse_pattern(field))


def test_the_table_is_read_whole() -> None:
    assert len(TABLE) > 100
    assert {p for _, p, _ in TABLE} == set(Policy)


@pytest.mark.parametrize(("field", "policy", "why"), TABLE, ids=[f for f, _, _ in TABLE])
def test_each_row_is_enforced_as_written(field: str, policy: Policy, why: str) -> None:
    path = _concrete(field)
    assert rule_for(path).policy is policy, f"{field}: docs say {policy.label}, the code {rule_for(path).policy.label}"
    change = _change(path, "old-value", "new-value")
    plan = UpdatePlan("old.yaml", [change])
    if policy is Policy.NOT_ALLOWED:
        assert plan.refusal() is not None and field.split(".")[-1].split("[")[0] in plan.refusal()  # type: ignore[operator]
    else:
        assert plan.refusal() is None
        assert bool(plan.disruptive()) == (policy in NEEDS_YES)
    if why.endswith("Shrinking: not allowed."):
        shrink = _change(path, 2000, 1200)
        assert shrink.policy is Policy.NOT_ALLOWED and UpdatePlan("old.yaml", [shrink]).refusal() is not None
        assert _change(path, 1200, 2000).policy is policy


def test_a_removed_pool_needs_yes_whatever_its_policy() -> None:
    path = _concrete("clusters[].partitions[].pools[]")
    removed = UpdatePlan("old.yaml", [_change(path, object(), ABSENT)])
    assert removed.disruptive() == []  # not a section: nothing to remove
    from cluster_config import load

    pool = load(MINIMAL).clusters[0].partitions[0].pools[0]
    assert UpdatePlan("old.yaml", [_change(path, pool, ABSENT)]).disruptive()


@pytest.fixture
def deploys(monkeypatch: pytest.MonkeyPatch) -> list[list[str]]:
    calls: list[list[str]] = []

    def run(command: list[str]) -> int:
        calls.append(command)
        return 0

    monkeypatch.setattr(cdk, "run_cdk", run)
    monkeypatch.setattr(cluster_cmd, "caller_account", lambda region: "111122223333")
    return calls


def _with_max_nodes(tmp_path: Path, name: str, value: int) -> Path:
    data = yaml.safe_load(MINIMAL.read_text())
    data["clusters"][0]["partitions"][0]["pools"][0]["max_nodes"] = value
    path = tmp_path / name
    path.write_text(yaml.safe_dump(data))
    return path


def test_lowering_max_nodes_needs_yes_and_warns(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], deploys: list[list[str]]
) -> None:
    old, new = _with_max_nodes(tmp_path, "old.yaml", 16), _with_max_nodes(tmp_path, "new.yaml", 4)
    assert cli.main(["cluster", "update", str(new), "--against", str(old)]) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith("elastic-slurm cluster: --yes: 1 change(s) act on running work (first: clusters[0]")
    assert "lowers max_nodes" in line and deploys == []
    assert cli.main(["cluster", "update", str(new), "--against", str(old), "--yes"]) == 0
    err = capsys.readouterr().err
    assert "warning: clusters[0].partitions[0].pools[0].max_nodes: lowers max_nodes" in err
    assert deploys == [cdk.deploy_command(new, yes=True)]
    # raising it needs nothing, and the deploy keeps CDK's approval of broadening changes
    assert cli.main(["cluster", "update", str(old), "--against", str(new)]) == 0
    assert deploys[-1] == cdk.deploy_command(old) and "broadening" in deploys[-1]


def test_update_dryrun_json_has_stable_keys(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], deploys: list[list[str]]
) -> None:
    old, new = _with_max_nodes(tmp_path, "old.yaml", 16), _with_max_nodes(tmp_path, "new.yaml", 4)
    assert cli.main(["cluster", "update", str(new), "--against", str(old), "--dryrun", "--output", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert set(doc) == {"source", "changes", "worst", "refused", "needs_yes"}
    (change,) = doc["changes"]
    assert change == {
        "path": "clusters[0].partitions[0].pools[0].max_nodes",
        "old": 16,
        "new": 4,
        "policy": "reconfigure",
        "reason": change["reason"],
        "needs_yes": change["needs_yes"],
    }
    assert change["needs_yes"].startswith("lowers max_nodes") and doc["needs_yes"] is True
    assert doc["worst"] == "reconfigure" and doc["refused"] is None and deploys == []


def test_update_dryrun_json_of_a_refused_change_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = yaml.safe_load(MINIMAL.read_text())
    data["clusters"][0]["network"]["vpc_cidr"] = "100.65.0.0/16"
    new = tmp_path / "new.yaml"
    new.write_text(yaml.safe_dump(data))
    assert cli.main(["cluster", "update", str(new), "--against", str(MINIMAL), "--dryrun", "--output", "json"]) == 2
    captured = capsys.readouterr()
    doc = json.loads(captured.out)
    assert doc["worst"] == "not allowed" and doc["refused"].startswith("clusters[0].network.vpc_cidr: not allowed")
    assert len(captured.err.splitlines()) == 1
