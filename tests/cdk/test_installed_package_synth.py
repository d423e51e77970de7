"""`elastic-slurm synth` of a pip-installed package, run outside the checkout (one synth of the minimal example): the
templates come out, and the images stack ships what the image build needs — the project source install-plugin.sh
pip-installs and the assets it installs — with the same files (hence asset hashes) as a synth from the checkout.

The CDK CLI is the checkout's pinned one through $ELASTIC_SLURM_CDK (the npx fallback would download it)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest

from stacks.image_source import ASSETS_NOT_SHIPPED
from tests.cdk.conftest import offline_env, run_synth
from tests.installed_package import NODE_PACKAGES, REPO_ROOT, Installed, build_and_install, build_wheel, tree

pytestmark = pytest.mark.cdk

EXAMPLE = "cluster_config/examples/minimal.yaml"
STACKS = {
    "es-minimal-network",
    "es-minimal-storage",
    "es-minimal-images",
    "es-minimal-accounting",
    "es-minimal-cluster",
}
IMAGES = "es-minimal-images"
CDK = REPO_ROOT / "node_modules" / ".bin" / "cdk"


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Installed:
    return build_and_install(tmp_path_factory.mktemp("installed"))


@pytest.fixture(scope="module")
def synthesized(installed: Installed, tmp_path_factory: pytest.TempPathFactory) -> Path:
    if not CDK.exists():
        pytest.skip("no node_modules/.bin/cdk (make setup)")
    elsewhere = tmp_path_factory.mktemp("elsewhere")
    out = elsewhere / "out"
    env = installed.env(offline_env(), ELASTIC_SLURM_CDK=str(CDK))
    result = run_synth(
        [str(installed.venv / "bin" / "elastic-slurm"), "synth", str(installed.site / EXAMPLE), "--out", str(out)],
        cwd=elsewhere,
        env=env,
    )
    assert result.returncode == 0, (result.stdout + result.stderr)[-4000:]
    assert "5 template(s)" in result.stdout
    return out


def _assets(out: Path) -> dict[str, Path]:
    """The images stack's directory assets: "source" (holds pyproject.toml) and "node" (holds image-build/)."""
    manifest = json.loads((out / f"{IMAGES}.assets.json").read_text(encoding="utf-8"))
    found: dict[str, Path] = {}
    for asset in manifest["files"].values():
        staged = out / asset["source"]["path"]
        if (staged / "pyproject.toml").is_file():
            found["source"] = staged
        elif (staged / "image-build").is_dir():
            found["node"] = staged
    assert set(found) == {"source", "node"}, manifest
    return found


def test_installed_package_synthesizes_every_stack_outside_the_checkout(synthesized: Path) -> None:
    assert {p.name.removesuffix(".template.json") for p in synthesized.glob("*.template.json")} == STACKS
    images = json.loads((synthesized / f"{IMAGES}.template.json").read_text(encoding="utf-8"))
    assert any(r["Type"] == "AWS::ImageBuilder::ImageRecipe" for r in images["Resources"].values())


def test_images_asset_holds_what_install_plugin_sh_installs(synthesized: Path) -> None:
    node = _assets(synthesized)["node"]
    install = (node / "image-build" / "install-plugin.sh").read_text(encoding="utf-8")
    loop = install[install.index("for program in ") : install.index("; do", install.index("for program in "))]
    programs = loop.replace("\\", " ").split()[3:]
    assert "bootstrap/elastic-slurm-config-apply" in programs
    for program in [*programs, "health/elastic-slurm-longcheck.sbatch"]:
        assert (node / program).is_file(), program
    assert list((node / "systemd").glob("*.service")) and list((node / "systemd").glob("*.timer"))
    steps = re.findall(r"image-build/[\w-]+\.sh", (REPO_ROOT / "assets" / "imagebuilder" / "slurm.yaml").read_text())
    assert steps and all((node / step).is_file() for step in steps)
    assert not any((node / name).exists() for name in ASSETS_NOT_SHIPPED)


def test_images_source_asset_is_a_pip_installable_project_with_every_console_script(
    synthesized: Path, tmp_path: Path
) -> None:
    source = _assets(synthesized)["source"]
    assert {p.name for p in source.iterdir()} == {"pyproject.toml", "requirements.txt", "LICENSE", *NODE_PACKAGES}
    scripts = tomllib.loads((source / "pyproject.toml").read_text(encoding="utf-8"))["project"]["scripts"]
    # what `pip install "$source_dir"` builds on the build instance (from a copy: the build writes into its source)
    wheel = build_wheel(Path(shutil.copytree(source, tmp_path / "source")), tmp_path / "wheel")
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        entry_points = archive.read(next(n for n in names if n.endswith("entry_points.txt"))).decode()
    for name, target in scripts.items():
        assert f"{name} = {target}" in entry_points
        module = target.split(":")[0].replace(".", "/") + ".py"
        assert module in names, module
    assert {n.split("/")[0] for n in names if not n.split("/")[0].endswith(".dist-info")} == set(NODE_PACKAGES)


def test_installed_and_checkout_synths_ship_the_same_asset_files(
    synthesized: Path, installed: Installed, tmp_path: Path
) -> None:
    # The CDK hashes a directory asset from its files' relative paths and contents: same files, same hash.
    assets = _assets(synthesized)
    checkout_assets = installed.source / "assets"
    expected = {k: v for k, v in tree(checkout_assets).items() if k.split("/")[0] not in ASSETS_NOT_SHIPPED}
    assert tree(assets["node"]) == expected
    staged = tmp_path / "checkout-source"
    code = "import sys; from pathlib import Path; from stacks.project import stage_project_source as s; s(Path(sys.argv[1]))"
    result = subprocess.run(
        [sys.executable, "-c", code, str(staged)],
        cwd=installed.source,  # the snapshot as a checkout
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert tree(assets["source"]) == tree(staged)
