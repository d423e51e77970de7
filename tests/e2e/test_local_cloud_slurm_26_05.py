"""Forward-compatibility run on Slurm 26.05 (Debian unstable's packages; the images build the pinned 24.11.5): a
cluster config with `images.slurm_version: 26.05.5` gets a local cloud on that release; one job powers up a node,
runs as an ordinary user and completes; the node scales down and no instance is left running.

The config must name a source for an unpinned release (`images.slurm_source`); the local cloud's packaged 26.05 root
does not use it (docs/local-cloud.md), so the checksum here is a placeholder the images stack would build against.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from localcloud import slurm_root
from localcloud.cloud import LocalCloud
from localcloud.ops import LIVE
from tests.e2e.conftest import CONFIG, missing_prereqs

pytestmark = pytest.mark.e2e
RELEASE = "26.05"
SOURCE = {"url": "https://download.schedmd.com/slurm/slurm-26.05.5.tar.bz2", "sha256": "0" * 64}


@pytest.fixture(scope="module")
def cloud_26_05() -> Iterator[LocalCloud]:
    reason = missing_prereqs()
    if reason:
        pytest.skip(f"Slurm {RELEASE} smoke: {reason}")
    if not slurm_root.is_built(RELEASE):
        pytest.skip(f"Slurm {RELEASE} smoke: its root is not built (scripts/setup.sh builds it)")
    state = Path(tempfile.mkdtemp(prefix="elastic-slurm-2605-", dir="/var/tmp"))
    data = yaml.safe_load(CONFIG.read_text())
    data["clusters"][0]["images"] = {"slurm_version": f"{RELEASE}.5", "slurm_source": SOURCE}
    data["clusters"][0].pop("rest_api", None)  # the REST API is refused on 26.05 (docs/rest-api.md)
    config = state.parent / f"{state.name}.yaml"
    config.write_text(yaml.safe_dump(data))
    local = LocalCloud(state)
    passed = False
    try:
        local.up(config, boot_delay=1.0)
        yield local
        passed = True
    finally:
        local.down()
        config.unlink(missing_ok=True)
        if passed:
            shutil.rmtree(state, ignore_errors=True)


def test_a_job_runs_on_slurm_26_05_as_an_ordinary_user(cloud_26_05: LocalCloud) -> None:
    info = cloud_26_05.info()
    assert info.slurm_version.startswith(RELEASE + ".")
    shown = cloud_26_05.slurm("scontrol", "show", "config")
    assert any(line.split()[:3] == ["SLURM_VERSION", "=", info.slurm_version] for line in shown.splitlines())
    job = cloud_26_05.sbatch("-w", "cpu-small-1", wrap="id -un", user=slurm_root.JOB_USER)
    (record,) = cloud_26_05.wait_jobs_done([job], timeout=150)
    assert record.state == "COMPLETED"
    assert (cloud_26_05.layout.jobs / f"{job}.out").read_text().strip() == slurm_root.JOB_USER
    assert len(cloud_26_05.instances()) == 1
    cloud_26_05.wait_all_powered_down(timeout=150)
    assert not cloud_26_05.instances(LIVE)
