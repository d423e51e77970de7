"""nss_slurm (clusters[].nss_slurm, on in the session cloud's local-demo.yaml): a job resolves its own user on a compute
node that has no account for it — the "I have no name!" problem, solved.

Every emulated instance has its own /etc/passwd and /etc/group, copied from the image when it boots
(localcloud/instances/machines.py), so a user added to the submit host afterwards is unknown on an instance already running,
as on EC2. The test powers up a node with a job of the cloud's job user, then adds `ghost` (uid 2002) to the submit
host only — the image root's /etc/passwd and /etc/group, which the controller sees, edited in place — with its Slurm
association, and runs a job as ghost on that node: `id -un` and `whoami` print ghost, though the node's own files do
not know it (in the job: `getent -s files`; outside any job, in the instance's view: plain `getent`, even while
ghost's job runs there).
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from localcloud.cloud import LocalCloud
from localcloud.image import slurm_root
from localcloud.instances import enter
from localcloud.ops import OpsError
from tests.e2e.conftest import assert_no_orphans, cold_nodes

pytestmark = pytest.mark.e2e

GHOST, GHOST_ID = "ghost", 2002
PASSWD_LINE = f"{GHOST}:x:{GHOST_ID}:{GHOST_ID}:nss_slurm test user:/nonexistent:/bin/sh"
GROUP_LINE = f"{GHOST}:x:{GHOST_ID}:"


def _edit_in_place(path: Path, add: str | None) -> None:
    """`path` without ghost's line (plus `add`), written into the same inode: renaming a new file over the root's
    /etc/passwd (as useradd does) would detach every running instance's own copy (localcloud/instances/machines.py)."""
    kept = [line for line in path.read_text().splitlines() if not line.startswith(f"{GHOST}:")]
    with path.open("r+") as handle:
        handle.write("".join(f"{line}\n" for line in [*kept, *([add] if add else [])]))
        handle.truncate()


def _forget_ghost(cloud: LocalCloud) -> None:
    cloud.slurm("sacctmgr", "-i", "delete", "user", GHOST, check=False)
    _edit_in_place(cloud.root() / "etc" / "passwd", None)
    _edit_in_place(cloud.root() / "etc" / "group", None)


@contextmanager
def ghost_on_submit_host(cloud: LocalCloud) -> Iterator[None]:
    """ghost in the submit host's accounts (the image root's files, which the controller sees) and in Slurm's
    accounting, for the block; removed afterwards."""
    _edit_in_place(cloud.root() / "etc" / "passwd", PASSWD_LINE)
    _edit_in_place(cloud.root() / "etc" / "group", GROUP_LINE)
    try:
        cloud.slurm("sacctmgr", "-i", "add", "user", GHOST, "Account=local", "DefaultAccount=local")
        yield
    finally:
        _forget_ghost(cloud)


def _sbatch_as_ghost(cloud: LocalCloud, *args: str, wrap: str, timeout: float = 60) -> str:
    """sbatch as ghost; slurmctld learns the new association from slurmdbd a moment after sacctmgr returns."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            return cloud.sbatch(*args, wrap=wrap, user=GHOST)
        except OpsError as exc:
            if "Invalid account" not in str(exc) or time.monotonic() > deadline:
                raise
        time.sleep(0.5)


def test_a_job_resolves_its_user_on_a_node_that_has_no_account_for_it(cloud: LocalCloud) -> None:
    _forget_ghost(cloud)  # a run that died half-way must not have given the instance a copy with ghost in it
    (node,) = cold_nodes(cloud, 1)
    # the node boots for a job of the cloud's job user, which keeps it up while ghost's job runs beside it (2 CPUs)
    warm = cloud.sbatch("-w", node, "-n1", wrap="id -un; sleep 40", user=slurm_root.JOB_USER)
    cloud.wait_until(lambda: cloud.queue().get(warm) == "RUNNING", 120, f"job {warm} running on {node}")
    instance = cloud.instance_of_node(node)
    own_etc = cloud.layout.machine_dir(instance.instance_id) / "etc"
    # the bootstrap pointed the node's name service at nss_slurm, naming the node and the spool dir its slurmd uses
    assert (own_etc / "nss_slurm.conf").read_text().splitlines()[1:] == [
        f"NodeName={node}",
        f"SlurmdSpoolDir={cloud.layout.spool / node}",
    ]
    switch = [line.split() for line in (own_etc / "nsswitch.conf").read_text().splitlines()]
    assert [words for words in switch if words[:1] in (["passwd:"], ["group:"])] == [
        ["passwd:", "slurm", "files", "sss"],  # sss: the image's own, for clusters[].directory
        ["group:", "slurm", "files", "sss"],
    ]
    with ghost_on_submit_host(cloud):
        probe = f"id -un; whoami; id -gn; getent -s files passwd {GHOST} || echo files:unknown; sleep 10"
        job = _sbatch_as_ghost(cloud, "-w", node, "-n1", wrap=probe)
        cloud.wait_until(lambda: cloud.queue().get(job) == "RUNNING", 60, f"job {job} of {GHOST} running on {node}")
        # the counterfactual on the same instance, outside any job (a process of its own view): no such user, even
        # while ghost's job runs there (nss_slurm answers a job's own processes only); the image's users resolve
        outside = subprocess.run(
            enter.argv(
                cloud.instance_view(instance.instance_id),
                ["/bin/sh", "-c", f"getent passwd {GHOST}; echo rc=$?; id -un {slurm_root.JOB_USER}"],
            ),
            env=enter.user_env(enter.user(cloud.root(), "root")),
            capture_output=True,
            text=True,
            timeout=30,
        )
        assert outside.stdout.split() == ["rc=2", slurm_root.JOB_USER], outside.stdout + outside.stderr
        records = cloud.wait_jobs_done([job, warm], timeout=120)
    assert {r.job_id: r.state for r in records} == {job: "COMPLETED", warm: "COMPLETED"}
    assert {r.nodes for r in records} == {node}
    # inside the job: its user and group by name, though the node's own files (getent -s files) do not have them
    out = (cloud.layout.jobs / f"{job}.out").read_text().splitlines()
    assert out == [GHOST, GHOST, GHOST, "files:unknown"], out
    assert (cloud.layout.jobs / f"{warm}.out").read_text().split() == [slurm_root.JOB_USER]
    assert_no_orphans(cloud)
