"""What-if, not the plugin: an EC2 adapter that waits for launch tokens instead of giving the nodes back to Slurm.

The plugin today treats a launch answer's `RequestLimitExceeded` entries (the RunInstances resource bucket is short)
like any other error: the nodes it could not launch are powered down, their jobs requeued, and Slurm resumes them
again after max(SuspendTimeout, requeue delay), ~121 s. `PacedEc2` measures the change proposed in bench/README.md:
when a launch comes back short with `RequestLimitExceeded`, poll every `poll_s` for the rest, for at most `budget_s`
in all (one adapter per resume worker: a budget per ResumeProgram call), before answering the launcher. The budget
must keep the first instances' boot within ResumeTimeout, because the launcher binds a pool's nodes only after its
launch loop.
"""

from __future__ import annotations

import time
from dataclasses import replace

from bench.ec2_sim.ec2_model import THROTTLED, Ec2Model
from bench.ec2_sim.wire import SimEc2
from slurm_plugin.powersave.ec2 import LaunchRequest, LaunchResult


class PacedEc2(SimEc2):
    """SimEc2 whose `launch` keeps asking, every `poll_s`, while the answer is short for lack of launch tokens."""

    def __init__(self, model: Ec2Model, budget_s: float, poll_s: float, state_dir: str | None = None) -> None:
        super().__init__(model, state_dir=state_dir)
        self.budget_s = budget_s
        self.poll_s = poll_s
        self.waited_s = 0.0  # of the budget, used by every launch of this adapter

    def launch(self, request: LaunchRequest) -> LaunchResult:
        """Launch; while short with RequestLimitExceeded and within the budget, wait and launch the rest."""
        answer = super().launch(request)
        instances = list(answer.instances)
        errors = answer.errors
        attempt = 0
        while (
            len(instances) < request.count
            and any(e.code == THROTTLED for e in errors)
            and self.waited_s < self.budget_s
        ):
            pause = min(self.poll_s, self.budget_s - self.waited_s)
            time.sleep(pause)
            self.waited_s += pause
            attempt += 1
            rest = replace(request, count=request.count - len(instances), token=f"{request.token}-w{attempt}")
            more = super().launch(rest)
            instances.extend(more.instances)
            errors = more.errors
        return LaunchResult(tuple(instances), errors if len(instances) < request.count else (), answer.api)
