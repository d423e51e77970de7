"""The job templates the page offers: a one-node hello job first, then every `*.sbatch` of the templates directory
(the image installs assets/job-templates into /opt/elastic-slurm/job-templates, docs/job-templates.md)."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

MAX_TEMPLATE_BYTES = 64 * 1024
HELLO = """#!/bin/bash
#SBATCH -J hello-web
#SBATCH -n 1
#SBATCH -t 5
# A one-task job: where it ran, as whom, then a short sleep so the page shows it RUNNING.
echo "hello from $(hostname) (node $SLURMD_NODENAME) as $(id -un), job $SLURM_JOB_ID"
sleep 5
"""


@dataclass(frozen=True)
class Template:
    """One job template: its name, its first comment line, the script."""

    name: str
    summary: str
    script: str


def summary_of(script: str) -> str:
    """The first comment line after the shebang and the `#SBATCH` lines (without `# `), or ''."""
    for line in script.splitlines()[1:]:
        if line.startswith("#SBATCH"):
            continue
        if line.startswith("#"):
            return line.lstrip("#").strip()
        if line.strip():
            break
    return ""


def load(directory: str | Path | None) -> list[Template]:
    """The hello template, then the directory's `*.sbatch` files by name (an unreadable or huge one is skipped)."""
    found = [Template("hello", summary_of(HELLO), HELLO)]
    if directory is None:
        return found
    for path in sorted(Path(directory).glob("*.sbatch")):
        try:
            if path.stat().st_size > MAX_TEMPLATE_BYTES:
                continue
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            continue
        found.append(Template(path.stem, summary_of(text), text))
    return found


def as_json(templates: list[Template]) -> list[dict[str, Any]]:
    """The templates as the page reads them."""
    return [asdict(t) for t in templates]
