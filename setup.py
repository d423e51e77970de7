"""setuptools' build_py plus the CDK app's non-Python files; the metadata is pyproject.toml's [project].

A wheel gets a copy of the checkout's cdk.json, pyproject.toml, requirements.txt, package.json, LICENSE and assets/ in
stacks/_project/ (stacks/project.py reads them there), so a pip-installed package validates, synthesizes and deploys
without the checkout. An editable install reads them from the checkout itself. MANIFEST.in puts them in an sdist.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

ROOT = Path(__file__).resolve().parent
PROJECT_FILES = ("cdk.json", "pyproject.toml", "requirements.txt", "package.json", "LICENSE")  # = stacks/project.py's
PROJECT_DIRS = ("assets",)


class BuildPyWithProjectFiles(build_py):  # type: ignore[misc]  # setuptools is untyped here
    """build_py, then the project files into <build_lib>/stacks/_project (replacing an older copy)."""

    def run(self) -> None:
        super().run()
        if getattr(self, "editable_mode", False):
            return
        missing = [name for name in (*PROJECT_FILES, *PROJECT_DIRS) if not (ROOT / name).exists()]
        if missing:
            raise FileNotFoundError(f"setup.py: {', '.join(missing)} missing in {ROOT} (see MANIFEST.in)")
        target = Path(self.build_lib) / "stacks" / "_project"
        shutil.rmtree(target, ignore_errors=True)
        target.mkdir(parents=True)
        for name in PROJECT_FILES:
            shutil.copy2(ROOT / name, target / name)
        for name in PROJECT_DIRS:
            shutil.copytree(ROOT / name, target / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))


setup(cmdclass={"build_py": BuildPyWithProjectFiles})
