"""`pip install` of the project is enough to validate, synthesize and deploy: the wheel carries the CLI, the CDK app,
cdk.json's context, assets/ and the files the image build installs, and the installed package runs without the
checkout. The wheel is built once per module from a snapshot of the checkout (tests/installed_package.py); the synth
from the installed package is tests/cdk/test_installed_package_synth.py."""

from __future__ import annotations

import json
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest

from stacks.project import PROJECT_DIRS, PROJECT_FILES, package_files
from tests.installed_package import NODE_PACKAGES, REPO_ROOT, Installed, build_and_install, tree

EXAMPLE = "cluster_config/examples/minimal.yaml"
STAGE = (
    "import sys; from pathlib import Path; from stacks.project import stage_project_source as s; s(Path(sys.argv[1]))"
)


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Installed:
    return build_and_install(tmp_path_factory.mktemp("installed"))


@pytest.fixture(scope="module")
def wheel_names(installed: Installed) -> set[str]:
    with zipfile.ZipFile(installed.wheel) as wheel:
        return set(wheel.namelist())


def _run(installed: Installed, args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, cwd=cwd, env=installed.env(), capture_output=True, text=True, timeout=120, check=False)


def test_installed_cli_validates_an_example_outside_the_checkout(installed: Installed, tmp_path: Path) -> None:
    example = installed.site / EXAMPLE
    for command in (
        [str(installed.python), "-m", "elastic_slurm.cli"],
        [str(installed.venv / "bin" / "elastic-slurm")],
    ):
        result = _run(installed, [*command, "validate", str(example)], tmp_path)
        assert result.returncode == 0, result.stderr
        assert f"{example}: valid" in result.stdout


def test_installed_package_imports_from_its_install_not_the_checkout(installed: Installed, tmp_path: Path) -> None:
    code = (
        "import json, cluster_config, elastic_slurm.cli, slurm_plugin, stacks.cdk_app, stacks.project as p\n"
        "from elastic_slurm.commands import synth_cmd\n"
        "print(json.dumps({'modules': [m.__file__ for m in (cluster_config, elastic_slurm.cli, slurm_plugin,"
        " stacks.cdk_app)], 'project': str(p.PROJECT_DIR), 'workdir': str(synth_cmd.cdk_workdir()),"
        " 'app': synth_cmd.cdk_app_command()}))"
    )
    result = _run(installed, [str(installed.python), "-c", code], tmp_path)
    assert result.returncode == 0, result.stderr
    found = json.loads(result.stdout)
    site = installed.site
    for module in found["modules"]:
        assert Path(module).is_relative_to(site), module
        assert not Path(module).is_relative_to(REPO_ROOT), module
    assert found["project"] == found["workdir"] == str(site / "stacks" / "_project")
    assert found["app"] == f"{installed.python} -m stacks.cdk_app"


def test_wheel_holds_the_cdk_app_its_context_the_assets_and_the_license(
    installed: Installed, wheel_names: set[str]
) -> None:
    assert {"stacks/cdk_app.py", "stacks/project.py", "stacks/app_builder.py", "lambdas/deconfigure/handler.py"} <= (
        wheel_names
    )
    for name in PROJECT_FILES:
        assert f"stacks/_project/{name}" in wheel_names
    for directory in PROJECT_DIRS:
        files = {f"stacks/_project/{directory}/{p}" for p in tree(installed.source / directory)}
        assert files and files <= wheel_names
    assert "stacks/_project/assets/bootstrap/elastic-slurm-config-apply" in wheel_names
    assert {"stacks/_project/assets/imagebuilder/slurm.yaml", "stacks/_project/assets/imagebuilder/gpu.yaml"} <= (
        wheel_names
    )
    assert any(n.endswith(".dist-info/licenses/LICENSE") for n in wheel_names)
    with zipfile.ZipFile(installed.wheel) as wheel:
        packaged = json.loads(wheel.read("stacks/_project/cdk.json"))
        entry_points = wheel.read(next(n for n in wheel_names if n.endswith(".dist-info/entry_points.txt"))).decode()
    assert packaged["context"] == json.loads((installed.source / "cdk.json").read_text(encoding="utf-8"))["context"]
    assert "elastic-slurm = elastic_slurm.cli:main" in entry_points


def test_stager_picks_exactly_the_files_the_wheel_holds_of_the_node_packages(
    installed: Installed, wheel_names: set[str]
) -> None:
    pyproject = tomllib.loads((installed.source / "pyproject.toml").read_text(encoding="utf-8"))
    package_data = pyproject["tool"]["setuptools"]["package-data"]
    for name in NODE_PACKAGES:
        staged = {f"{name}/{p.as_posix()}" for p in package_files(installed.source / name, name, package_data)}
        assert staged == {n for n in wheel_names if n.startswith(f"{name}/")}


def test_installed_package_and_checkout_stage_the_same_image_source(installed: Installed, tmp_path: Path) -> None:
    # Same files → same CDK asset hash: the AMI of a pip-installed package is the AMI of its checkout.
    from_install, from_checkout = tmp_path / "install", tmp_path / "checkout"
    result = _run(installed, [str(installed.python), "-c", STAGE, str(from_install)], tmp_path)
    assert result.returncode == 0, result.stderr
    # the snapshot as a checkout: `python -c` imports the packages of its working directory first
    result = subprocess.run(
        [sys.executable, "-c", STAGE + "; import stacks; print(stacks.__file__)", str(from_checkout)],
        cwd=installed.source,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert Path(result.stdout.strip()).is_relative_to(installed.source)
    staged = tree(from_install)
    assert staged == tree(from_checkout)
    assert {name.split("/")[0] for name in staged} == {"pyproject.toml", "requirements.txt", "LICENSE", *NODE_PACKAGES}
    assert not [name for name in staged if "__pycache__" in name or name.endswith(".pyc")]
    assert staged["pyproject.toml"] == (installed.source / "pyproject.toml").read_bytes()
