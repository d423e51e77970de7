"""Start a requeued job at slurmctld's next backfill pass once its requeue hold is over, not at its next full pass.

slurmctld holds a job requeued for a node failure until begin_time = now + cred_expire + 1 (src/slurmctld/job_mgr.c;
the local cloud's cred_expire is 20 s). When that time passes nothing changes in slurmctld's tables, so backfill
(`bf_interval` 10 s in local-demo.yaml) skips its passes (backfill.c `_more_work`) and the job starts only at the
next full-queue pass, every `sched_interval` (60 s by default) since slurmctld started: up to 60 s of waiting that
says nothing about the product. `start_after_requeue_hold` waits for the hold to end, then updates the job with
`StartTime=now` — no change to when it may start (that time has passed) — which counts as a job change, so backfill
considers it at its next pass. The scheduler still picks the nodes: every assertion about where it runs stands.
"""

from __future__ import annotations

from datetime import datetime

from localcloud.cloud import LocalCloud
from localcloud.conf import CRED_EXPIRE

REQUEUE_HOLD = CRED_EXPIRE + 1  # seconds slurmctld holds a requeued job


def _job_fields(cloud: LocalCloud, job: str) -> dict[str, str]:
    out = cloud.slurm("scontrol", "show", "job", job, "--oneliner", check=False)
    return dict(word.split("=", 1) for word in out.split() if "=" in word)


def start_after_requeue_hold(cloud: LocalCloud, job: str, timeout: float) -> None:
    """Once `job` was requeued and its hold (EligibleTime) is over, nudge the scheduler (see the module docstring).
    Returns without a nudge when the job left the queue or started again first."""

    def hold_over() -> bool:
        fields = _job_fields(cloud, job)
        if not fields:
            return True  # slurmctld forgot the job: nothing to start
        if int(fields.get("Restarts", "0")) < 1:
            return False  # not requeued yet
        if fields.get("JobState") != "PENDING":
            return True
        eligible = fields.get("EligibleTime", "")
        # scontrol prints local time; this process and the controller share the machine's clock and zone
        return eligible[:1].isdigit() and datetime.fromisoformat(eligible) <= datetime.now()

    cloud.wait_until(hold_over, timeout, f"job {job} requeued and its requeue hold over")
    if _job_fields(cloud, job).get("JobState") == "PENDING":
        cloud.slurm("scontrol", "update", f"jobid={job}", "StartTime=now", check=False)
