"""The `elastic-slurm` CLI: exit codes, one line per problem on stderr, never a traceback.

Most cases call `main([...])` in-process (fast); a few run the real console script to prove the installed entry point
behaves the same.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from elastic_slurm.cli import main
from tests.unit.test_config_invalid import INVALID_CASES, Case, broken

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "cluster_config" / "examples"
CONSOLE_SCRIPT = Path(sys.executable).with_name("elastic-slurm")


def write_case(tmp_path: Path, case: Case) -> Path:
    path = tmp_path / f"{case.id}.yaml"
    path.write_text(yaml.safe_dump(broken(case), sort_keys=False), encoding="utf-8")
    return path


def run_script(*args: str) -> subprocess.CompletedProcess[str]:
    """Run the installed console script, as a user would."""
    return subprocess.run([str(CONSOLE_SCRIPT), *args], capture_output=True, text=True, timeout=60, cwd=ROOT)


@pytest.mark.parametrize("case", INVALID_CASES, ids=lambda c: c.id)
def test_validate_prints_one_line_per_problem_and_exits_3(
    case: Case, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write_case(tmp_path, case)
    assert main(["validate", str(path)]) == 3
    out, err = capsys.readouterr()
    lines = err.splitlines()
    assert out == ""
    assert len(lines) == len(case.expected), err
    for line, (want_path, want_message) in zip(lines, case.expected, strict=True):
        assert line.startswith(f"{path}: {want_path}: {want_message}"), line
    assert "Traceback" not in err


def test_console_script_reports_bad_config_without_traceback(tmp_path: Path) -> None:
    case = next(c for c in INVALID_CASES if c.id == "two_problems_two_lines")
    path = write_case(tmp_path, case)
    result = run_script("validate", str(path))
    assert result.returncode == 3
    assert result.stdout == ""
    assert result.stderr.splitlines() == [f"{path}: {p}: {m}" for p, m in case.expected]


def test_console_script_validates_every_example() -> None:
    paths = sorted(str(p.relative_to(ROOT)) for p in EXAMPLES.glob("*.yaml"))
    result = run_script("validate", *paths)
    assert (result.returncode, result.stderr) == (0, "")
    for path in paths:
        assert f"{path}: valid" in result.stdout.splitlines()


def test_console_script_names_the_line_of_malformed_yaml(tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text("clusters:\n  - name: a\n    region: us-east-1: x\n", encoding="utf-8")
    result = run_script("validate", str(path))
    assert result.returncode == 3
    assert result.stderr.splitlines() == [f"{path}: line 3: not valid YAML: mapping values are not allowed here"]


def test_console_script_unknown_subcommand_is_one_line() -> None:
    result = run_script("frobnicate")
    assert result.returncode == 2
    assert len(result.stderr.splitlines()) == 1
    assert result.stderr.startswith("elastic-slurm: error: argument command: invalid choice: 'frobnicate'")


def test_valid_file_prints_a_summary_and_exits_0(capsys: pytest.CaptureFixture[str]) -> None:
    path = EXAMPLES / "minimal.yaml"
    assert main(["validate", str(path)]) == 0
    out, err = capsys.readouterr()
    assert err == ""
    assert out.splitlines()[:4] == [
        f"{path}: valid",
        "  cluster minimal (us-east-1): 1 partition(s), 1 pool(s), 0 always-on / 16 max nodes",
        "  accounting=create",
        "  estimated idle cost: at least $60/month (no jobs running; list prices, us-east-1)",
    ]


def test_federation_summary_names_licenses_and_federation(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["validate", str(EXAMPLES / "federation.yaml")]) == 0
    assert "  accounting=create licenses=vcs,xcelium federation=eda" in capsys.readouterr().out.splitlines()


def test_one_bad_file_among_good_ones_fails_but_all_are_reported(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = write_case(tmp_path, INVALID_CASES[0])
    good = EXAMPLES / "minimal.yaml"
    assert main(["validate", str(good), str(bad)]) == 3
    out, err = capsys.readouterr()
    assert f"{good}: valid" in out
    assert err.splitlines() == [f"{bad}: clusters[1].name: duplicate cluster name 'alpha'"]


def test_missing_file_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "missing.yaml"
    assert main(["validate", str(path)]) == 3
    assert capsys.readouterr().err.splitlines() == [f"{path}: (file): cannot read: No such file or directory"]


def test_directory_instead_of_file_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["validate", str(tmp_path)]) == 3
    assert capsys.readouterr().err.splitlines() == [f"{tmp_path}: (file): cannot read: Is a directory"]


def test_binary_file_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "image.yaml"
    path.write_bytes(b"\x89PNG\r\n\x1a\n\x00\xff")
    assert main(["validate", str(path)]) == 3
    [line] = capsys.readouterr().err.splitlines()
    assert line.startswith(f"{path}: (file): not UTF-8 text:")


def test_duplicate_yaml_key_is_one_line_with_its_line_number(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text = (
        (EXAMPLES / "minimal.yaml")
        .read_text(encoding="utf-8")
        .replace("max_nodes: 16", "max_nodes: 16\n            max_nodes: 8")
    )
    path = tmp_path / "dup.yaml"
    path.write_text(text, encoding="utf-8")
    assert main(["validate", str(path)]) == 3
    [line] = capsys.readouterr().err.splitlines()
    assert line.startswith(f"{path}: line ") and line.endswith(": not valid YAML: duplicate key 'max_nodes'")


def test_schema_out_writes_the_same_json_as_stdout(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out_file = tmp_path / "schema.json"
    assert main(["schema", "--out", str(out_file)]) == 0
    assert capsys.readouterr().out == ""
    assert main(["schema"]) == 0
    printed = capsys.readouterr().out
    assert out_file.read_text(encoding="utf-8") == printed
    schema = json.loads(printed)
    assert schema["title"] == "Elastic Slurm cluster configuration"
    assert schema["required"] == ["clusters"]


def test_schema_out_to_a_missing_directory_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    target = tmp_path / "no" / "such" / "schema.json"
    assert main(["schema", "--out", str(target)]) == 2
    assert capsys.readouterr().err.splitlines() == [
        f"elastic-slurm schema: --out {target}: cannot write: No such file or directory"
    ]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["validate"], "elastic-slurm validate: error: the following arguments are required: FILE"),
        ([], "elastic-slurm: error: the following arguments are required: command"),
        (["frobnicate"], "elastic-slurm: error: argument command: invalid choice: 'frobnicate'"),
        (["schema", "--out"], "elastic-slurm schema: error: argument --out: expected one argument"),
        (["validate", "--bogus", "x.yaml"], "elastic-slurm: error: unrecognized arguments: --bogus"),
    ],
    ids=["validate_without_file", "no_command", "unknown_command", "out_without_value", "unknown_option"],
)
def test_usage_errors_exit_2_with_one_line(argv: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(argv)
    assert exited.value.code == 2
    [line] = capsys.readouterr().err.splitlines()
    assert line.startswith(message)


def test_help_exits_0(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["validate", "--help"])
    assert exited.value.code == 0
    assert "FILE" in capsys.readouterr().out


@pytest.mark.skipif(os.geteuid() == 0, reason="root can read any file")
def test_unreadable_file_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "secret.yaml"
    path.write_text("clusters: []\n", encoding="utf-8")
    path.chmod(0)
    assert main(["validate", str(path)]) == 3
    assert capsys.readouterr().err.splitlines() == [f"{path}: (file): cannot read: Permission denied"]
