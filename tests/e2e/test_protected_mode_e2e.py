"""Protected mode against the real slurmctld (issue 14, defect 10): a pool whose boots keep failing stops launching.

One module-scoped local cloud of configs/protected.yaml (boot_failure_limit 2): the cheap `cpu-bad` pool is the
scheduler's first choice; its instances fail to boot (the instance runner never starts slurmd), Slurm's ResumeTimeout
runs slurm-resume-fail, and after the second failure the pool is protected: its nodes DOWN with the reason, the jobs
run on `cpu-good`, nothing more is launched for `bad` until `slurm-pool-protection --clear cpu-bad`.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from localcloud.cloud import LocalCloud
from localcloud.ops import Instance
from tests.e2e.conftest import assert_no_orphans, module_cloud, replaced_boots

pytestmark = pytest.mark.e2e

CONFIG = Path(__file__).resolve().parent / "configs" / "protected.yaml"
STATE_DIR = Path("/var/tmp/elastic-slurm-protected-e2e")


@pytest.fixture(scope="module")
def prot(request: pytest.FixtureRequest) -> Iterator[LocalCloud]:
    """A local cloud of the protected-mode config, always torn down; logs kept only after a failure."""
    with module_cloud(request, CONFIG, STATE_DIR, "protected-mode e2e") as cloud:
        yield cloud


def _bad_launches(cloud: LocalCloud) -> int:
    return sum(1 for i in cloud.instances() if i.pool == "cpu-bad")


def _good(cloud: LocalCloud) -> list[Instance]:
    return [i for i in cloud.instances() if i.pool == "cpu-good"]


def _bad_nodes(cloud: LocalCloud) -> dict[str, tuple[str, str]]:
    out = cloud.slurm("sinfo", "-h", "-N", "-o", "%N|%t|%E", check=False)
    rows = (line.split("|", 2) for line in out.splitlines() if line.startswith("cpu-bad-"))
    return {name: (state, reason) for name, state, reason in rows}


def test_a_pool_whose_boots_keep_failing_stops_launching_and_the_job_runs_elsewhere(prot: LocalCloud) -> None:
    # two jobs at once: both go to the cheaper pool, both boots fail within one ResumeTimeout (two failures in a row
    # for the pool, as two jobs one after the other would make them, in half the time), both jobs run on cpu-good
    prot.fail_next_boots(2)
    jobs = [prot.sbatch("-N1", wrap="echo ran-on=$SLURMD_NODENAME") for _ in range(2)]
    records = prot.wait_jobs_done(jobs, timeout=300)
    assert all(r.state == "COMPLETED" and r.nodes.startswith("cpu-good-") and r.restarts >= 1 for r in records), records
    # one requeue each from its failed cpu-bad boot, and one more per cpu-good boot Slurm gave up on (a busy machine)
    assert sum(r.restarts for r in records) == 2 + len(replaced_boots(prot, _good(prot))), records
    assert _bad_launches(prot) == 2
    table = _bad_nodes(prot)
    assert all(s.startswith("down") and r.startswith("(Code:ProtectedMode) pool cpu-bad") for s, r in table.values())
    # the next job goes straight to the good pool: nothing is launched for the protected one
    good_before = {i.instance_id for i in _good(prot)}
    (again,) = prot.wait_jobs_done([prot.sbatch("-N1", wrap="true")], timeout=120)
    assert again.state == "COMPLETED" and again.nodes.startswith("cpu-good-")
    assert again.restarts == len(replaced_boots(prot, [i for i in _good(prot) if i.instance_id not in good_before]))
    assert _bad_launches(prot) == 2
    assert_no_orphans(prot)


def test_an_admin_clears_protected_mode_and_the_pool_launches_again(prot: LocalCloud) -> None:
    done = prot.on_controller([str(prot.layout.bin / "slurm-pool-protection"), "--clear", "cpu-bad"], user="slurm")
    assert done.returncode == 0 and "protected mode cleared" in done.stdout, done.stderr
    prot.wait_until(lambda: all(s == "idle~" for s, _ in _bad_nodes(prot).values()), 60, "cpu-bad back to idle~")
    # resumed with state=IDLE (Scontrol.resume): RESUME would have left them NOT_RESPONDING, never available after a
    # slurmctld restart (reconcile's REFRESH)
    shown = [line for line in prot.slurm("scontrol", "-o", "show", "node").splitlines() if "NodeName=cpu-bad-" in line]
    assert shown and not [line for line in shown if "NOT_RESPONDING" in line.split(" State=", 1)[1].split()[0]]
    (record,) = prot.wait_jobs_done([prot.sbatch("-w", "cpu-bad-3", wrap="true")], timeout=120)
    assert record.state == "COMPLETED"
    assert_no_orphans(prot)
