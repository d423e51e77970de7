"""A pip-installed elastic-slurm for the packaging tests: `pip wheel` of a snapshot of the checkout (concurrent edits
of the checkout do not change what a test compares), installed with --no-deps into a fresh venv.

The venv gets the dev venv's dependencies through a .pth line naming the dev venv's site-packages: that directory
joins sys.path, but its own .pth files (the editable install's finder, which maps the packages to the checkout) are
not processed. So the installed venv imports elastic-slurm from its own site-packages only, and nothing is downloaded
but the build backend (setuptools, pyproject.toml's build-system).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
NOT_COPIED = {".git", ".venv", "node_modules", "cdk.out", "build", "out", ".stamps", ".ci"}
NEVER_COPIED = ("__pycache__", "*.pyc", "*.egg-info", ".mypy_cache", ".ruff_cache", ".pytest_cache")
NODE_PACKAGES = ("cluster_config", "elastic_slurm", "slurm_plugin")
BUILD_TIMEOUT = 300


@dataclass(frozen=True)
class Installed:
    """The snapshot the wheel was built from, the wheel and the venv it is installed in."""

    source: Path
    wheel: Path
    venv: Path

    @property
    def python(self) -> Path:
        return self.venv / "bin" / "python"

    @property
    def site(self) -> Path:
        """The venv's site-packages (where the wheel's packages are)."""
        out = subprocess.run(
            [str(self.python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        return Path(out.strip())

    def env(self, base: Mapping[str, str] | None = None, **extra: str) -> dict[str, str]:
        """The environment (`base`, default os.environ) of a command run with the venv: no PYTHONPATH (it could name
        the checkout), plus `extra`."""
        source = os.environ if base is None else base
        env = {k: v for k, v in source.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME")}
        return env | extra


def snapshot(dest: Path) -> Path:
    """A copy of the checkout as `pip install <checkout>` reads it, less what no build needs (venvs, node_modules,
    caches); returns `dest`."""

    def ignore(directory: str, names: list[str]) -> set[str]:
        ignored = set(shutil.ignore_patterns(*NEVER_COPIED)(directory, names))
        if Path(directory) == REPO_ROOT:
            ignored |= NOT_COPIED & set(names)
        return ignored

    shutil.copytree(REPO_ROOT, dest, ignore=ignore, symlinks=True)
    return dest


def build_wheel(source: Path, out: Path) -> Path:
    """`pip wheel --no-deps` of `source` into `out` (pip fetches the build backend when it has no copy)."""
    result = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", "-w", str(out), str(source.resolve())],
        capture_output=True,
        text=True,
        timeout=BUILD_TIMEOUT,
        check=False,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    (wheel,) = out.glob("elastic_slurm-*.whl")
    return wheel


def install_wheel(wheel: Path, venv: Path) -> None:
    """A venv with the wheel (--no-deps) and, through a .pth, the dev venv's site-packages for the dependencies."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    site = subprocess.run(
        [str(venv / "bin" / "python"), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    (Path(site) / "dev-dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n", encoding="utf-8")
    pip = [sys.executable, "-m", "pip", "--python", str(venv / "bin" / "python")]
    result = subprocess.run(
        [*pip, "install", "--no-deps", "--no-index", "--quiet", str(wheel)],
        capture_output=True,
        text=True,
        timeout=BUILD_TIMEOUT,
        check=False,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]


def build_and_install(base: Path) -> Installed:
    """Snapshot → wheel → venv under `base`."""
    source = snapshot(base / "source")
    wheel = build_wheel(source, base / "wheel")
    install_wheel(wheel, base / "venv")
    return Installed(source=source, wheel=wheel, venv=base / "venv")


def tree(root: Path) -> dict[str, bytes]:
    """Relative path → content of every file under `root` (what a CDK directory asset's hash is computed from)."""
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}
