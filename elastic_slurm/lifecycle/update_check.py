"""The check `cluster update` runs before deploying: diff the edit against the deployed config (or a local file),
print one line per change with its policy and a summary naming the worst, and refuse `not allowed` changes."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from pydantic import BaseModel

from cluster_config import ElasticSlurmConfig, load
from cluster_config.config_diff import ABSENT, Change, diff, worst
from cluster_config.config_paths import format_path
from cluster_config.update_policy import Policy
from elastic_slurm.errors import UserError
from elastic_slurm.lifecycle.deployed import read_deployed


@dataclass(frozen=True)
class UpdatePlan:
    """The changes from the old config to the new one, and where the old one came from."""

    source: str  # the deployed object's s3:// URL, or the --against file
    changes: list[Change]

    @property
    def worst(self) -> Policy | None:
        """The most disruptive policy (None: no change)."""
        return worst(self.changes)

    def lines(self) -> list[str]:
        """One line per change, then the summary."""
        out = [c.text() for c in self.changes]
        policy = self.worst
        if policy is None:
            out.append(f"no changes against {self.source}")
        else:
            out.append(f"{len(self.changes)} change(s) against {self.source}; worst: {policy.label} — {policy.meaning}")
        return out

    def disruptive(self) -> list[Change]:
        """Changes a deploy would act on at once against running work: a pool or partition removed (its nodes leave
        Slurm and their instances are terminated), launch templates changed, controllers replaced."""
        removed = [c for c in self.changes if c.new is ABSENT and isinstance(c.old, BaseModel)]
        return removed + [c for c in self.changes if c.policy >= Policy.DRAIN_AND_REPLACE and c not in removed]

    def refusal(self) -> str | None:
        """One line naming the first `not allowed` change and why (None when every change may be applied)."""
        refused = [c for c in self.changes if c.policy is Policy.NOT_ALLOWED]
        if not refused:
            return None
        first = refused[0]
        more = f" (and {len(refused) - 1} more not-allowed change(s) listed above)" if len(refused) > 1 else ""
        return f"{format_path(first.path)}: not allowed: {first.reason}{more}"


def plan_update(new: ElasticSlurmConfig, against: Path | None) -> UpdatePlan:
    """Diff `new` against the `against` file, or (None) against the config its cluster runs (SSM + S3)."""
    if against is not None:
        return UpdatePlan(str(against), diff(load(against), new))
    deployed = read_deployed(new)
    return UpdatePlan(f"the deployed config of {deployed.cluster} ({deployed.url})", diff(deployed.config, new))


def check_update(new: ElasticSlurmConfig, against: Path | None) -> UpdatePlan:
    """Plan, print the lines, and raise UserError (exit 2) when a change is not allowed."""
    plan = plan_update(new, against)
    for line in plan.lines():
        print(line)
    refusal = plan.refusal()
    if refusal is not None:
        raise UserError(refusal)
    return plan
