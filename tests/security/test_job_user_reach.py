"""The attacker's view from inside the local cloud: an ordinary job user (uid 2001, no Slurm privileges) on the
controller and in a job on a compute node cannot read the cluster's secrets — the munge key, the JWT signing key,
slurmdbd.conf (the database password), the database secret's copy, the boot's env files — and, with the site's
`PrivateData=jobs,...`, cannot see other users' jobs, while root still does (issue 30).

IMDS is guarded by elastic-slurm-imds-guard, executed in a network namespace of its own by
tests/e2e/test_imds_guard.py (the local cloud's instances share the host's network namespace).
"""

from __future__ import annotations

import re
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from localcloud.cloud import LocalCloud
from localcloud.image.slurm_root import JOB_USER
from tests.e2e.conftest import module_cloud

pytestmark = pytest.mark.e2e

CONFIG = Path(__file__).with_name("configs") / "private-data.yaml"
# what a controller holds that a job user must not read: the munge key, the database password, the boot's env files
# (resource ARNs and names) and the JWT key, whose path is read from rest-api.env (which holds no secret, as
# prolog-wait-for-boot.env holds none: the prolog runs as slurm and reads it)
CONTROLLER_SECRETS = [
    "/etc/munge/munge.key",
    "/etc/slurm/slurmdbd.conf",
    "/etc/elastic-slurm/env",
    "/etc/elastic-slurm/facts.env",
]


@pytest.fixture(scope="module")
def cloud(request: pytest.FixtureRequest) -> Iterator[LocalCloud]:
    state = Path(tempfile.mkdtemp(prefix="elastic-slurm-private-", dir="/var/tmp"))
    with module_cloud(request, CONFIG, state, "private-data cloud") as local:
        yield local


def _secret_files(cloud: LocalCloud) -> list[str]:
    """The controller's secret files that exist: the fixed ones, the JWT key, the database secret's copy."""
    db_secret = cloud.on_controller(["sh", "-c", "ls -d /run/elastic-slurm*secret* 2>/dev/null"])
    jwt = cloud.on_controller(["sed", "-n", "s/^ES_JWT_KEY=//p", "/etc/slurm/rest-api.env"]).stdout.strip()
    found = [*CONTROLLER_SECRETS, *db_secret.stdout.split(), *([jwt] if jwt else [])]
    present = cloud.on_controller(["sh", "-c", 'for f in "$@"; do [ -e "$f" ] && echo "$f"; done', "-", *found])
    return present.stdout.split()


def test_a_job_user_on_the_controller_reads_no_secret(cloud: LocalCloud) -> None:
    files = _secret_files(cloud)
    assert set(CONTROLLER_SECRETS) <= set(files)  # all on this controller
    assert any(f.endswith("jwt_hs256.key") for f in files)
    for path in files:
        result = cloud.on_controller(["cat", "--", path], user=JOB_USER)
        assert result.returncode != 0 and "Permission denied" in result.stderr, f"{JOB_USER} read {path}"
        assert cloud.on_controller(["test", "-r", path]).returncode == 0  # root does: the check can succeed


def test_a_job_on_a_compute_node_reads_no_munge_key(cloud: LocalCloud) -> None:
    job = cloud.sbatch("-N1", wrap="cat /etc/munge/munge.key; echo exit=$?", user=JOB_USER)
    cloud.wait_until(lambda: job not in cloud.queue(), 120, f"job {job} done")
    output = Path(cloud.layout.jobs / f"{job}.out").read_text(encoding="utf-8", errors="replace")
    assert "Permission denied" in output and re.search(r"exit=[1-9]", output), output


def test_with_private_data_a_job_user_does_not_see_roots_job(cloud: LocalCloud) -> None:
    config = cloud.slurm("scontrol", "show", "config")
    assert re.search(r"^PrivateData\s*=\s*.*\bjobs\b", config, re.MULTILINE), "PrivateData is not in force"
    theirs = cloud.sbatch("-N1", wrap="sleep 60")  # root's
    mine = cloud.sbatch("-N1", wrap="sleep 60", user=JOB_USER)
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not {theirs, mine} <= set(cloud.queue()):
            time.sleep(0.5)
        assert {theirs, mine} <= set(cloud.queue())  # root sees both
        seen = cloud.slurm("squeue", "-h", "-o", "%i", user=JOB_USER).split()
        assert mine in seen and theirs not in seen
        shown = cloud.slurm("scontrol", "show", "job", theirs, user=JOB_USER, check=False)
        assert f"JobId={theirs}" not in shown
    finally:
        cloud.slurm("scancel", theirs, mine, check=False)
