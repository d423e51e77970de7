"""Where the CDK app's non-Python files are, in a checkout and in a pip-installed package (pure, no CDK).

A checkout holds them at its root: cdk.json (the app's context: feature flags), pyproject.toml and requirements.txt
(what the image build pip-installs), package.json (the pinned CDK CLI), LICENSE and assets/. A wheel carries a copy of
the same files in `stacks/_project/` (setup.py's build_py adds them), so an installed package has the checkout's
layout there: PROJECT_DIR is that copy when it exists, else the checkout.

`stage_project_source(dest)` assembles the source the image build installs (`install-plugin.sh ASSETS SOURCE` runs
`pip install SOURCE` and links SOURCE/pyproject.toml's console scripts): PROJECT_SOURCE's files from PROJECT_DIR, its
packages from where this installation imports them, holding what a wheel of them holds (modules and package data,
no bytecode). A checkout and a package installed from it stage the same files, so their asset hashes are equal.
"""

from __future__ import annotations

import json
import shutil
import tomllib
from pathlib import Path
from typing import Any

from stacks.image_source import PROJECT_SOURCE

PACKAGED = Path(__file__).resolve().parent / "_project"
# Where this installation's top-level packages are: the checkout's root, or site-packages.
PACKAGES_ROOT = Path(__file__).resolve().parent.parent
# The files and directories of the checkout's root the wheel copies into stacks/_project (setup.py lists the same).
PROJECT_FILES = ("cdk.json", "pyproject.toml", "requirements.txt", "package.json", "LICENSE")
PROJECT_DIRS = ("assets",)


def project_dir() -> Path:
    """The packaged copy (pip-installed) when there is one, else the checkout."""
    return PACKAGED if (PACKAGED / "cdk.json").is_file() else PACKAGES_ROOT


PROJECT_DIR = project_dir()
ASSETS_DIR = PROJECT_DIR / "assets"


def cdk_context() -> dict[str, Any]:
    """cdk.json's context (the feature flags the app is built with)."""
    context: dict[str, Any] = json.loads((PROJECT_DIR / "cdk.json").read_text(encoding="utf-8"))["context"]
    return context


def cdk_cli_version() -> str:
    """The CDK CLI version package.json pins."""
    package = json.loads((PROJECT_DIR / "package.json").read_text(encoding="utf-8"))
    return str(package["devDependencies"]["aws-cdk"])


def package_files(root: Path, name: str, package_data: dict[str, list[str]]) -> list[Path]:
    """The files (relative to `root`, the directory of package `name`) a wheel holds of it: every module (setuptools
    finds packages with namespaces, so every directory's .py files) and the package data's globs."""
    files = {p.relative_to(root) for p in root.rglob("*.py") if "__pycache__" not in p.relative_to(root).parts}
    directories = [root, *(d for d in root.rglob("*") if d.is_dir() and "__pycache__" not in d.relative_to(root).parts)]
    for directory in directories:
        dotted = ".".join((name, *directory.relative_to(root).parts))
        for key in (dotted, "", "*"):
            for pattern in package_data.get(key, []):
                files.update(p.relative_to(root) for p in directory.glob(pattern) if p.is_file())
    return sorted(f for f in files if f.suffix != ".pyc")


def stage_project_source(dest: Path) -> Path:
    """Copy the project source the image build installs into the empty or new directory `dest`; returns `dest`."""
    dest.mkdir(parents=True, exist_ok=True)
    pyproject = tomllib.loads((PROJECT_DIR / "pyproject.toml").read_text(encoding="utf-8"))
    package_data: dict[str, list[str]] = pyproject.get("tool", {}).get("setuptools", {}).get("package-data", {})
    for name in PROJECT_SOURCE:
        source = PACKAGES_ROOT / name
        if source.is_dir() and (source / "__init__.py").is_file():
            for relative in package_files(source, name, package_data):
                target = dest / name / relative
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(source / relative, target)
        else:
            shutil.copyfile(PROJECT_DIR / name, dest / name)
    return dest
