"""Every config synthesizes with the real CDK CLI; the templates pass cfn-lint with zero errors and warnings, cdk-nag
(AwsSolutions) with zero unacknowledged findings, and stay inside CloudFormation's limits."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.cdk.conftest import CONFIGS, REPO_ROOT, Assembly, offline_env, synth_once

pytestmark = pytest.mark.cdk

MAX_TEMPLATE_BYTES = 1_000_000  # CloudFormation's limit for a template uploaded through S3
MAX_RESOURCES = 500


@pytest.mark.parametrize("name", [c.stem for c in CONFIGS])
def test_config_synthesizes_with_the_cdk_cli(assemblies: dict[str, Assembly], name: str) -> None:
    assembly = assemblies[name]
    assert assembly.returncode == 0, assembly.output[-3000:]
    assert assembly.templates, f"no templates in {assembly.outdir}"
    assert "Traceback" not in assembly.output


def test_cfn_lint_finds_no_errors_and_no_warnings(all_templates: dict[str, Path]) -> None:
    # Exit code bits: 2 errors, 4 warnings, 8 informational (informational findings are allowed). The templates are
    # linted by one cfn-lint process per core, side by side (cfn-lint itself uses one core).
    cfn_lint = Path(sys.executable).parent / "cfn-lint"
    templates = [str(path) for path in all_templates.values()]
    chunks = [templates[i :: os.cpu_count() or 1] for i in range(os.cpu_count() or 1)]
    running = [
        subprocess.Popen(
            [str(cfn_lint), "--format", "parseable", *chunk],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for chunk in chunks
        if chunk
    ]
    outputs = [(process.communicate()[0], process.returncode) for process in running]
    assert sum(len(chunk) for chunk in chunks) == len(templates) > 0
    for output, code in outputs:
        assert code & 6 == 0, output


@pytest.mark.parametrize("name", [c.stem for c in CONFIGS])
def test_cdk_nag_leaves_no_unacknowledged_finding(assemblies: dict[str, Assembly], name: str) -> None:
    report = assemblies[name].validation_report()
    nag = [r for r in report["pluginReports"] if r["pluginName"] == "AwsSolutions"]
    assert len(nag) == 1
    assert nag[0]["violations"] == []
    assert nag[0]["conclusion"] == "success"


def test_every_acknowledged_nag_finding_carries_a_reason(assemblies: dict[str, Assembly]) -> None:
    acknowledged = [
        violation
        for assembly in assemblies.values()
        for report in assembly.validation_report()["pluginReports"]
        for violation in report.get("suppressedViolations", [])
    ]
    assert acknowledged
    for violation in acknowledged:
        assert len(violation["reason"].strip()) >= 20, violation["ruleName"]


def test_templates_stay_under_cloudformation_limits(all_templates: dict[str, Path]) -> None:
    for stack, path in all_templates.items():
        assert path.stat().st_size < MAX_TEMPLATE_BYTES, stack
        resources = json.loads(path.read_text(encoding="utf-8"))["Resources"]
        assert len(resources) < MAX_RESOURCES, f"{stack}: {len(resources)} resources"


def test_largest_example_is_the_one_checked_for_limits(assemblies: dict[str, Assembly]) -> None:
    sizes = {name: sum(p.stat().st_size for p in a.templates.values()) for name, a in assemblies.items()}
    largest = max(sizes, key=lambda n: sizes[n])
    assert all(p.stat().st_size < MAX_TEMPLATE_BYTES for p in assemblies[largest].templates.values())


def test_synth_of_an_invalid_config_prints_one_line_per_problem_and_exits_3(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("clusters:\n  - name: Bad_Name\n    region: us-east-1\n", encoding="utf-8")
    result = synth_once(bad, tmp_path / "out")
    assert result.returncode == 3  # invalid config (docs/cli.md)
    assert "Traceback" not in result.stderr
    assert "clusters[0].name" in result.stderr
    assert not (tmp_path / "out").exists()


def test_cdk_app_rejects_an_invalid_config_with_exit_2_and_no_traceback(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("clusters: []\n", encoding="utf-8")
    env = offline_env() | {"CDK_CONTEXT_JSON": json.dumps({"config": str(bad)}), "CDK_OUTDIR": str(tmp_path)}
    result = subprocess.run(
        [sys.executable, "app.py"], cwd=REPO_ROOT, env=env, capture_output=True, text=True, check=False
    )
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    assert f"{bad}: clusters" in result.stderr


def test_cdk_json_runs_app_py_with_the_venv_python() -> None:
    cdk_json = json.loads((REPO_ROOT / "cdk.json").read_text(encoding="utf-8"))
    assert cdk_json["app"] == ".venv/bin/python app.py"
    assert os.access(REPO_ROOT / "app.py", os.R_OK)
