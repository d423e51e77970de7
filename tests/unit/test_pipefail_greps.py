"""No `… | grep -q` in a shell script that sets pipefail: grep -q exits at the first match, the command writing into
the pipe dies of SIGPIPE on its next write, and pipefail makes the whole check fail — at random, depending on where
the match is and how much comes after it. The image build's `ldconfig -p | grep -q libnss_slurm` failed a fresh
`make test` that way (validate.sh). `grep … > /dev/null` reads to the end and keeps the same meaning."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PIPEFAIL = re.compile(r"^\s*set -[a-z]*o pipefail|^\s*set -o pipefail", re.MULTILINE)
QUITTING_GREP = re.compile(r"\|\s*grep\s+-[A-Za-z]*q")


def quitting_greps(text: str) -> list[str]:
    """The lines of a script that pipe into `grep -q` while pipefail is set (none when it is not)."""
    if not PIPEFAIL.search(text):
        return []
    return [
        line.strip() for line in text.splitlines() if QUITTING_GREP.search(line) and not line.lstrip().startswith("#")
    ]


def shell_scripts() -> list[Path]:
    """The image build steps and the boot programs (what runs on an image, with bash)."""
    found = [*(REPO / "assets" / "image-build").glob("*.sh"), *(REPO / "assets" / "bootstrap").iterdir()]
    return sorted(p for p in found if p.is_file() and p.read_text(errors="replace").startswith("#!/bin/bash"))


def test_the_mechanism_a_quitting_grep_fails_a_pipefail_pipeline() -> None:
    """Why the rule exists: with more output after the match than a pipe holds, the writer gets SIGPIPE (141)."""
    quitting = "set -o pipefail; seq 1 200000 | grep -q '^1$'"
    reading = "set -o pipefail; seq 1 200000 | grep '^1$' > /dev/null"
    assert subprocess.run(["bash", "-c", quitting], check=False).returncode == 141
    assert subprocess.run(["bash", "-c", reading], check=False).returncode == 0


def test_no_image_or_boot_script_pipes_into_a_quitting_grep_under_pipefail() -> None:
    scripts = shell_scripts()
    assert len(scripts) >= 10, [p.name for p in scripts]  # the steps and boot programs were found
    assert {p.name for p in scripts} >= {"validate.sh", "build-slurm.sh", "elastic-slurm-config-apply"}
    found = {p.name: hits for p in scripts if (hits := quitting_greps(p.read_text()))}
    assert found == {}


def test_the_check_finds_a_quitting_grep_only_under_pipefail() -> None:
    broken = "#!/bin/bash\nset -euo pipefail\nldconfig -p | grep -q 'libnss_slurm\\.so\\.2 ' || exit 1\n"
    assert quitting_greps(broken) == ["ldconfig -p | grep -q 'libnss_slurm\\.so\\.2 ' || exit 1"]
    assert quitting_greps(broken.replace("set -euo pipefail", "set -eu")) == []
    assert quitting_greps(broken.replace("grep -q", "grep")) == []
