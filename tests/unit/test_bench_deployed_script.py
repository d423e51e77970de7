"""The bench measures ResumeProgram's foreground as the image installs it (bench/run.py deployed_console_script): a
venv importing the project from its directory, without the development checkout's editable-install hook."""

from __future__ import annotations

import subprocess
from pathlib import Path

from bench.run import deployed_console_script

REPO = Path(__file__).resolve().parents[2]
PROBE = (
    "import sys, slurm_plugin, boto3; "
    "print(slurm_plugin.__file__); print(any('__editable__' in name for name in sys.modules))"
)


def test_the_script_runs_the_entry_point_from_the_project_without_the_editable_hook(tmp_path: Path) -> None:
    script = deployed_console_script(tmp_path / "deployed", "slurm-resume")
    assert script.read_text().splitlines()[0] == f"#!{tmp_path / 'deployed' / 'bin' / 'python'}"
    assert "from slurm_plugin.powersave.resume import main" in script.read_text()
    usage = subprocess.run([str(script), "--help"], capture_output=True, text=True, check=True, timeout=60)
    assert usage.stdout.startswith("usage: ")
    probe = subprocess.run(
        [str(tmp_path / "deployed" / "bin" / "python"), "-c", PROBE],
        capture_output=True, text=True, check=True, timeout=60,
    )  # fmt: skip
    module, editable = probe.stdout.split()
    assert Path(module) == REPO / "slurm_plugin" / "__init__.py"  # this checkout's code, as a plain path
    assert editable == "False"
    assert deployed_console_script(tmp_path / "deployed", "slurm-resume") == script  # again: the venv is reused
