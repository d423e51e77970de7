"""The image component is executed, not just synthesized: the local cloud's default root is the image its scripts
build (localcloud/image/image_root.py), and those scripts refuse what they must refuse.

- The component YAML calls exactly the scripts the image root ran, in the same order and with the same arguments
  (aws-tools.sh is the one step not run here: its downloads are AWS-hosted).
- The built root holds what validate.sh checks (run again here), every console script of pyproject.toml linked into
  /opt/elastic-slurm/bin, and Slurm with its cgroup/v2 plugin built from the pinned source.
- build-slurm.sh refuses a tarball whose sha256 differs before unpacking anything; validate.sh refuses an image of
  another Slurm release; a step that fails stops the build with one line naming the step and its log.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import tomllib
import uuid
from pathlib import Path

import pytest
import yaml

from cluster_config import slurm_release
from localcloud.image import image_root, slurm_root
from localcloud.instances import enter
from localcloud.layout import REPO_ROOT

pytestmark = pytest.mark.e2e
COMPONENT = REPO_ROOT / "assets" / "imagebuilder" / "slurm.yaml"
STEP = re.compile(r"image-build/([a-z-]+\.sh)((?:\s+'[^']*'|\s+\S+)*)")


@pytest.fixture(scope="module")
def root() -> Path:
    if os.geteuid() != 0:
        pytest.skip("needs root (chroot into the image root)")
    return slurm_root.root_path()


def _chroot(root: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    """`argv` as root on a machine view of `root` (the project source mounted, as on every local machine)."""
    command = enter.argv(enter.View(root), list(argv))
    return subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)


def _component_steps() -> list[tuple[str, list[str]]]:
    """(script, arguments) of every image-build script the component runs, in order."""
    document = yaml.safe_load(COMPONENT.read_text())
    steps = []
    for phase in document["phases"]:
        for step in phase["steps"]:
            if step["action"] != "ExecuteBash":
                continue
            for command in step["inputs"]["commands"]:
                for script, args in STEP.findall(command):
                    steps.append((script, shlex.split(args)))
    return steps


def test_component_runs_the_scripts_the_image_root_ran_in_the_same_order(root: Path) -> None:
    assert _component_steps() == [
        ("os-packages.sh", []),
        ("build-munge.sh", []),
        ("aws-tools.sh", []),
        ("build-slurm.sh", ["{{ SlurmSourceUrl }}", "{{ SlurmSourceSha256 }}", "{{ SlurmVersion }}"]),
        ("install-plugin.sh", ["/opt/elastic-slurm/assets", "/tmp/elastic-slurm-source"]),
        ("validate.sh", ["{{ SlurmVersion }}"]),
    ]
    # the build log of this root (localcloud.image.slurm_root.build) ends with the image layer's two steps, both green
    ran = re.findall(r"^==== ([a-z-]+\.sh): exit (\d+)", Path(f"{root}.log").read_text(), flags=re.M)
    assert ran[-2:] == [("install-plugin.sh", "0"), ("validate.sh", "0")]
    assert set(image_root.SLURM_STEPS) | set(image_root.PLUGIN_STEPS) == {s for s, _ in _component_steps()} - {
        "aws-tools.sh"
    }


def test_image_root_passes_the_components_validate_step_again(root: Path) -> None:
    result = _chroot(root, "bash", "/opt/elastic-slurm/assets/image-build/validate.sh", slurm_release.VERSION)
    assert result.returncode == 0, result.stderr
    assert f"image valid: Slurm {slurm_release.VERSION}" in result.stdout


def test_validate_refuses_an_image_of_another_release(root: Path) -> None:
    result = _chroot(root, "bash", "/opt/elastic-slurm/assets/image-build/validate.sh", "99.11.1")
    assert result.returncode == 1
    assert result.stderr.strip().splitlines() == [
        f"validate.sh: slurmctld is not Slurm 99.11.1: slurm {slurm_release.VERSION}"
    ]


def test_slurm_is_built_from_the_pinned_source_with_cgroup_v2_and_the_slurm_account(root: Path) -> None:
    info = (root / "etc/slurm/BUILD-INFO").read_text()
    assert info.strip() == (
        f"Slurm {slurm_release.VERSION} built from /tmp/{slurm_release.SOURCE_URL.rsplit('/', 1)[-1]}"
        f" (sha256 {slurm_release.SOURCE_SHA256})"
    )
    assert list(root.glob("usr/lib/slurm/cgroup_v2.so"))
    # shared objects only (--disable-static): no libslurm.a, no plugin archives (a node links nothing statically)
    assert (root / "usr/lib/libslurm.so").exists()
    assert sorted(p.name for p in [*root.glob("usr/lib/libslurm*.a"), *root.glob("usr/lib/slurm/*.a")]) == []
    assert _chroot(root, "id", "-u", "slurm").stdout.strip() == "64030"
    for unit in ("slurmctld", "slurmd", "slurmdbd"):
        text = (root / f"usr/lib/systemd/system/{unit}.service").read_text()
        assert f"ExecStart=/usr/sbin/{unit} " in text


def test_every_console_script_is_pip_installed_and_linked_into_the_image_bin(root: Path) -> None:
    scripts = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    for program in scripts:
        link = root / "opt/elastic-slurm/bin" / program
        assert os.readlink(link) == f"/opt/elastic-slurm/venv/bin/{program}", program
        assert (
            (root / "opt/elastic-slurm/venv/bin" / program)
            .read_text()
            .startswith("#!/opt/elastic-slurm/venv/bin/python")
        ), program
    for unit in ("slurm-clustermgr.service", "slurm-license-sync.timer", "slurm-longcheck.timer"):
        assert (root / "etc/systemd/system" / unit).read_bytes() == (REPO_ROOT / "assets/systemd" / unit).read_bytes()


def test_build_slurm_refuses_a_tarball_of_another_checksum_before_unpacking(root: Path) -> None:
    tarball = image_root.source_tarball(slurm_root.ROOT_CACHE)
    name = f"refused-{uuid.uuid4().hex}.tar.gz"
    shutil.copy(tarball, root / "tmp" / name)
    try:
        wrong = "0" * 64
        result = _chroot(
            root,
            "bash",
            "/opt/elastic-slurm/assets/image-build/build-slurm.sh",
            f"/tmp/{name}",
            wrong,
            slurm_release.VERSION,
        )
    finally:
        (root / "tmp" / name).unlink()
    assert result.returncode == 1
    assert result.stderr.strip().splitlines()[-1] == f"build-slurm.sh: /tmp/{name} does not match sha256 {wrong}"


def test_a_failing_step_stops_the_build_with_one_line_naming_it(root: Path, tmp_path: Path) -> None:
    log = tmp_path / "build.log"
    with pytest.raises(image_root.ImageBuildError) as raised:
        image_root.run_step(root, log, "validate.sh", "0.0.0")
    assert str(raised.value) == f"image step validate.sh failed (exit 1); see {log}"
    assert "validate.sh: slurmctld is not Slurm 0.0.0" in log.read_text()
