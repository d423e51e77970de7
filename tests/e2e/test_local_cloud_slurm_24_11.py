"""Compatibility run on the older release a site may still run, Slurm 24.11 (Debian 13's own packages; the images
build the pinned 26.05.3): a cluster config with `images.slurm_version: 24.11.5` gets a local cloud on that release;
one job powers up a node, runs as an ordinary user and completes; the node scales down and no instance is left
running. Its partitions are rendered with 24.11's spelling of whole-node allocation (`OverSubscribe=EXCLUSIVE`, no
`Exclusive` key), which its slurmctld must accept.

The config must name a source for an unpinned release (`images.slurm_source`): here Debian's copy of the 24.11.5
release, whose sha256 Debian 13's signed Sources index lists; the local cloud's packaged 24.11 root does not use it
(docs/local-cloud.md).
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from localcloud.cloud import LocalCloud
from localcloud.image import slurm_root
from localcloud.ops import LIVE
from tests.e2e.conftest import CONFIG, missing_prereqs

RELEASE = slurm_root.OLDER_SLURM
pytestmark = [pytest.mark.e2e, pytest.mark.slurm_root(RELEASE)]
VERSION = f"{RELEASE}.5"
SOURCE = {
    "url": f"https://deb.debian.org/debian/pool/main/s/slurm-wlm/slurm-wlm_{VERSION}.orig.tar.gz",
    "sha256": "e1a5547edd212c38b5e3230a284133f777b32746551f094aaa81cc4af375e332",
}


@pytest.fixture(scope="module")
def cloud_older() -> Iterator[LocalCloud]:
    reason = missing_prereqs()
    if reason:
        pytest.skip(f"Slurm {RELEASE} compatibility run: {reason}")
    state = Path(tempfile.mkdtemp(prefix="elastic-slurm-2411-", dir="/var/tmp"))
    data = yaml.safe_load(CONFIG.read_text())
    data["clusters"][0]["images"] = {"slurm_version": VERSION, "slurm_source": SOURCE}
    data["clusters"][0].pop("rest_api", None)  # the web page's data parser is newer than 24.11's (docs/rest-api.md)
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


def test_a_job_runs_on_the_older_slurm_24_11_as_an_ordinary_user(cloud_older: LocalCloud) -> None:
    info = cloud_older.info()
    assert info.slurm_version.startswith(RELEASE + ".")
    shown = cloud_older.slurm("scontrol", "show", "config")
    assert any(line.split()[:3] == ["SLURM_VERSION", "=", info.slurm_version] for line in shown.splitlines())
    partitions = cloud_older.slurm("scontrol", "show", "partition", "--oneliner")
    assert "OverSubscribe=EXCLUSIVE" in partitions  # local-demo.yaml has a whole-node partition
    job = cloud_older.sbatch("-w", "cpu-small-1", wrap="id -un", user=slurm_root.JOB_USER)
    (record,) = cloud_older.wait_jobs_done([job], timeout=150)
    assert record.state == "COMPLETED"
    assert (cloud_older.layout.jobs / f"{job}.out").read_text().strip() == slurm_root.JOB_USER
    # launched for it (two when a boot that ran past ResumeTimeout on a busy machine was replaced), all gone after
    assert {i.pool for i in cloud_older.instances()} == {"cpu-small"}
    cloud_older.wait_all_powered_down(timeout=150)
    assert not cloud_older.instances(LIVE)
