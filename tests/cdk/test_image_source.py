"""The AMI gets the elastic-slurm package from the deployment itself (it is not on PyPI): the images stack ships the
project source as a CDK asset, the Image Builder component pip-installs it into /opt/elastic-slurm/venv and links the
console scripts into /opt/elastic-slurm/bin, where render's production defaults and the boot script expect them."""

from __future__ import annotations

import configparser
import json
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest
import yaml
from aws_cdk.assertions import Match, Template
from setuptools import find_packages

from cluster_config import slurm_release
from localcloud.image import slurm_root
from slurm_plugin.render.cluster import RenderOptions
from stacks.user_data import boot_commands
from tests.cdk.conftest import REPO_ROOT, Assembly

pytestmark = pytest.mark.cdk

CONFIG = "minimal"
IMAGES = "es-minimal-images"
COMPONENT = REPO_ROOT / "assets" / "imagebuilder" / "slurm.yaml"
CLUSTERMGR_UNIT = REPO_ROOT / "assets" / "systemd" / "slurm-clustermgr.service"
CONFIG_APPLY = REPO_ROOT / "assets" / "bootstrap" / "elastic-slurm-config-apply"
BIN = "/opt/elastic-slurm/bin"
NOT_SHIPPED = ("localcloud", "tests", "stacks", "lambdas", ".venv", "node_modules", "cdk.out", ".git", "bench")


def _scripts() -> dict[str, str]:
    data: dict[str, Any] = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    scripts: dict[str, str] = data["project"]["scripts"]
    return scripts


def _component_commands() -> str:
    document = yaml.safe_load(COMPONENT.read_text(encoding="utf-8"))
    commands = [
        command
        for phase in document["phases"]
        for step in phase["steps"]
        if step["action"] == "ExecuteBash"
        for command in step["inputs"]["commands"]
    ]
    return "\n".join(commands)


def _source_asset(assembly: Assembly) -> tuple[str, Path]:
    """(S3 object key, staged directory) of the images stack's project source asset."""
    assets = json.loads((assembly.outdir / f"{IMAGES}.assets.json").read_text(encoding="utf-8"))
    for asset in assets["files"].values():
        staged = assembly.outdir / asset["source"]["path"]
        if staged.is_dir() and (staged / "pyproject.toml").is_file():
            destination = next(iter(asset["destinations"].values()))
            return str(destination["objectKey"]), staged
    raise AssertionError(f"{IMAGES}: no asset holds pyproject.toml")


@pytest.fixture(scope="module")
def source(assemblies: dict[str, Assembly]) -> tuple[str, Path]:
    return _source_asset(assemblies[CONFIG])


@pytest.fixture(scope="module")
def images(assemblies: dict[str, Assembly]) -> Template:
    return Template.from_json(assemblies[CONFIG].template_json(IMAGES))


def test_source_asset_holds_only_the_installable_project(source: tuple[str, Path]) -> None:
    _, staged = source
    shipped = {p.name for p in staged.iterdir()}
    assert shipped == {
        "pyproject.toml",
        "requirements.txt",
        "LICENSE",
        "cluster_config",
        "elastic_slurm",
        "slurm_plugin",
    }
    assert not [p for p in staged.rglob("*") if p.name == "__pycache__" or p.suffix == ".pyc"]
    assert not shipped & set(NOT_SHIPPED)


def test_packaging_of_the_shipped_source_finds_exactly_the_runtime_packages(source: tuple[str, Path]) -> None:
    _, staged = source
    pyproject: dict[str, Any] = tomllib.loads((staged / "pyproject.toml").read_text(encoding="utf-8"))
    include = pyproject["tool"]["setuptools"]["packages"]["find"]["include"]
    packages = find_packages(where=str(staged), include=include)
    assert {p.split(".")[0] for p in packages} == {"cluster_config", "elastic_slurm", "slurm_plugin"}
    assert list((staged / "cluster_config" / "examples").glob("*.yaml"))  # package-data of cluster_config


def test_every_console_script_imports_from_the_shipped_source_alone(source: tuple[str, Path]) -> None:
    # Modules of the repository that are not shipped (the local cloud, the CDK app, tests) must not be needed.
    _, staged = source
    blocked = sorted({"localcloud", "stacks", "lambdas", "tests", "moto", "aws_cdk", "cdk_nag"})
    code = f"""
import importlib, sys
class Block:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in {blocked!r}:
            raise ImportError(f"{{name}} is not shipped to the AMI")
        return None
sys.meta_path.insert(0, Block())
for target in {sorted(_scripts().values())!r}:
    module_name, func = target.split(":")
    module = importlib.import_module(module_name)
    assert module.__file__.startswith({str(staged)!r}), module.__file__
    assert callable(getattr(module, func)), target
"""
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=staged, capture_output=True, text=True, timeout=120, check=False
    )
    assert result.returncode == 0, result.stderr


def test_recipes_pass_the_source_asset_to_the_component_and_pypi_is_not_used(
    images: Template, source: tuple[str, Path]
) -> None:
    object_key, _ = source
    recipes = images.find_resources("AWS::ImageBuilder::ImageRecipe")
    assert recipes
    for recipe in recipes.values():
        parameters = {
            p["Name"]: json.dumps(p["Value"]) for c in recipe["Properties"]["Components"] for p in c["Parameters"]
        }
        assert object_key in parameters["SourceS3Uri"]
        assert "s3://" in parameters["SourceS3Uri"]
    images.has_resource_properties(
        "AWS::ImageBuilder::Component",
        {"Name": "minimal-slurm", "Data": Match.string_like_regexp(r"S3Download[\s\S]*\{\{ SourceS3Uri \}\}")},
    )
    for component in images.find_resources("AWS::ImageBuilder::Component").values():
        data = component["Properties"]["Data"]
        assert "elastic-slurm==" not in data
        assert "PluginVersion" not in data


def test_build_instance_role_may_read_the_source_asset(images: Template, source: tuple[str, Path]) -> None:
    policies = images.find_resources("AWS::IAM::Policy")
    statements = [s for p in policies.values() for s in p["Properties"]["PolicyDocument"]["Statement"]]
    readers = [s for s in statements if "s3:GetObject*" in s["Action"] and "cdk-hnb659fds-assets" in json.dumps(s)]
    assert readers, "the Image Builder role cannot download the source asset"
    reading_roles = {
        r["Ref"]
        for p in policies.values()
        if any(s in readers for s in p["Properties"]["PolicyDocument"]["Statement"])
        for r in p["Properties"]["Roles"]
    }
    profiles = images.find_resources("AWS::IAM::InstanceProfile")
    builder_roles = {r["Ref"] for profile in profiles.values() for r in profile["Properties"]["Roles"]}
    assert builder_roles and builder_roles <= reading_roles


def test_component_installs_the_unpacked_source_with_the_install_step() -> None:
    # what install-plugin.sh then does (venv, pip, every console script linked) is executed by the image root
    # build and checked in tests/e2e/test_image_build.py
    commands = _component_commands()
    assert "python3 -m zipfile -e /tmp/elastic-slurm-source.zip /tmp/elastic-slurm-source" in commands
    assert "image-build/install-plugin.sh /opt/elastic-slurm/assets /tmp/elastic-slurm-source" in commands
    install = (REPO_ROOT / "assets" / "image-build" / "install-plugin.sh").read_text(encoding="utf-8")
    assert '"$prefix/venv/bin/pip" install --quiet --no-cache-dir "$source_dir"' in install
    assert "prefix=/opt/elastic-slurm" in install and '["project"]["scripts"]' in install


def test_recipes_pass_the_pinned_slurm_source_to_the_component(images: Template) -> None:
    for recipe in images.find_resources("AWS::ImageBuilder::ImageRecipe").values():
        parameters = {
            p["Name"]: p["Value"] for c in recipe["Properties"]["Components"] for p in c.get("Parameters", [])
        }
        assert parameters["SlurmVersion"] == [slurm_release.VERSION]
        assert parameters["SlurmSourceUrl"] == [slurm_release.SOURCE_URL]
        assert parameters["SlurmSourceSha256"] == [slurm_release.SOURCE_SHA256]


def test_render_defaults_point_at_programs_the_image_provides() -> None:
    commands = _component_commands()
    options = RenderOptions()
    for program in (options.resume_program, options.suspend_program, options.resume_fail_program):
        assert program.startswith(f"{BIN}/")
        assert program.removeprefix(f"{BIN}/") in _scripts()
    assert options.prolog_program is not None
    assert options.prolog_program.startswith(f"{BIN}/")
    install = (REPO_ROOT / "assets" / "image-build" / "install-plugin.sh").read_text(encoding="utf-8")
    assert "slurm/prolog-wait-for-boot.sh" in install and "image-build/install-plugin.sh" in commands


def test_cluster_manager_unit_runs_the_linked_script_on_the_default_manifest() -> None:
    unit = configparser.ConfigParser(strict=False, interpolation=None)
    unit.read_string(CLUSTERMGR_UNIT.read_text(encoding="utf-8"))
    exec_start = unit["Service"]["ExecStart"]
    assert exec_start.startswith(f"{BIN}/slurm-clustermgr --manifest /etc/elastic-slurm/manifest.json")
    assert unit["Service"]["Restart"] == "always"
    assert unit["Install"]["WantedBy"] == "multi-user.target"


def test_controller_boot_enables_the_cluster_manager_and_links_the_manifest() -> None:
    script = "\n".join(boot_commands("controller", {"ES_CLUSTER": "c1", "ES_REGION": "us-east-1"}))
    apply = CONFIG_APPLY.read_text(encoding="utf-8")  # the boot's render step, also run by slurm-config-sync
    assert "ETC=/etc/elastic-slurm\n" in apply and 'ln -sfn /etc/slurm/manifest.json "$ETC/manifest.json"' in apply
    assert "systemctl enable --now slurm-license-sync.timer" in apply
    assert apply.index('elastic-slurm" render') < apply.index("ln -sfn /etc/slurm/manifest.json")
    assert "systemctl enable --now slurm-clustermgr.service" in script
    assert "systemctl enable --now slurm-config-sync.timer" in script
    assert script.index(f"{BIN}/elastic-slurm-config-apply") < script.index("slurm-clustermgr.service")
    compute = "\n".join(boot_commands("compute", {"ES_CLUSTER": "c1"}))
    assert "slurm-clustermgr" not in compute


def _license_snippet(tmp_path: Path) -> str:
    """The Python the config apply script (run by the controller boot) runs for the license sync, writing under
    tmp_path instead of /etc."""
    lines = CONFIG_APPLY.read_text(encoding="utf-8").splitlines()
    start = next(i for i, line in enumerate(lines) if line.endswith("<<'PY'"))
    body = "\n".join(lines[start + 1 : lines.index("PY", start)])
    body = body.replace("/etc/elastic-slurm/license-sync.json", str(tmp_path / "license-sync.json"))
    patch = f"import slurm_plugin.licenses.units as units\nunits.DROPIN_PATH = {str(tmp_path / 'timer.d/schedule.conf')!r}\n"
    return patch + body


@pytest.mark.parametrize(("config", "cluster", "synced"), [("federation", "east", True), ("minimal", "minimal", False)])
def test_controller_boot_sets_up_the_license_sync_timer_only_when_licenses_are_synced(
    tmp_path: Path, config: str, cluster: str, synced: bool
) -> None:
    path = REPO_ROOT / "cluster_config" / "examples" / f"{config}.yaml"
    result = subprocess.run(
        [sys.executable, "-", str(path), cluster],
        input=_license_snippet(tmp_path),
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == ("yes" if synced else "no")
    assert (tmp_path / "license-sync.json").exists() is synced
    if synced:
        assert "OnCalendar=" in (tmp_path / "timer.d" / "schedule.conf").read_text(encoding="utf-8")
        assert json.loads((tmp_path / "license-sync.json").read_text(encoding="utf-8"))["local_cluster"] == cluster


def test_the_packaged_local_root_links_every_program_the_image_installs() -> None:
    install = (REPO_ROOT / "assets" / "image-build" / "install-plugin.sh").read_text(encoding="utf-8")
    loop = install[install.index("for program in ") : install.index("; do", install.index("for program in "))]
    installed = set(loop.replace("\\", " ").split()[3:])  # after "for program in"
    assert {path.removeprefix("assets/") for path in slurm_root.LINKED_PROGRAMS} == installed
