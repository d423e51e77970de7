"""The check `cluster update` runs before deploying: diff the edit against the deployed config (or a local file), one
line (or one JSON object) per change with its policy and a summary naming the worst; refuse `not allowed` changes,
and name the changes a deploy may run only with `--yes`.

What each policy of docs/updates.md makes `cluster update` do (`needs_yes`, `refusal`):

| policy                                                            | `cluster update`                  |
|-------------------------------------------------------------------|-----------------------------------|
| none, reconfigure                                                 | deploys                           |
| drain-and-replace a pool, replace login nodes, replace controllers | deploys with `--yes` only         |
| not allowed                                                       | refuses (also with `--dryrun`)    |

and, whatever the policy: a pool or partition removed, or a `max_nodes` lowered (nodes above the new maximum leave
Slurm at the reconfigure and the manager terminates their instances, also under running jobs), needs `--yes` too.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from cluster_config import ElasticSlurmConfig, load
from cluster_config.config_diff import ABSENT, Change, diff, worst
from cluster_config.config_paths import format_path
from cluster_config.update_policy import Policy
from elastic_slurm.errors import UserError
from elastic_slurm.lifecycle.deployed import read_deployed

NEEDS_YES = frozenset({Policy.DRAIN_AND_REPLACE, Policy.REPLACE_LOGIN_NODES, Policy.REPLACE_CONTROLLERS})


def lowers_capacity(change: Change) -> bool:
    """A pool's `max_nodes` made smaller."""
    old, new = change.old, change.new
    numbers = isinstance(old, int) and isinstance(new, int) and not isinstance(old, bool | Enum)
    return bool(change.path) and change.path[-1] == "max_nodes" and numbers and new < old


def removes_item(change: Change) -> bool:
    """A named section (pool, partition, ...) removed."""
    return change.new is ABSENT and isinstance(change.old, BaseModel)


def why_yes(change: Change) -> str:
    """Why the change needs `--yes` ("" when it does not)."""
    if lowers_capacity(change):
        return (
            "lowers max_nodes: the nodes above the new maximum leave Slurm and their instances are terminated, "
            "also under running jobs: drain them first"
        )
    if removes_item(change):
        return "removes it: its nodes leave Slurm and their instances are terminated, also under running jobs"
    if change.policy in NEEDS_YES:
        return f"{change.policy.label}: acts on running nodes or controllers (docs/updates.md)"
    return ""


def _jsonable(value: Any) -> Any:
    if value is ABSENT:
        return None
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    if isinstance(value, Enum):
        return value.value
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    return value


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
        """The changes a deploy may run only with `--yes` (the module docstring's table), in diff order."""
        return [c for c in self.changes if why_yes(c)]

    def refusal(self) -> str | None:
        """One line naming the first `not allowed` change and why (None when every change may be applied)."""
        refused = [c for c in self.changes if c.policy is Policy.NOT_ALLOWED]
        if not refused:
            return None
        first = refused[0]
        more = f" (and {len(refused) - 1} more not-allowed change(s) listed above)" if len(refused) > 1 else ""
        return f"{format_path(first.path)}: not allowed: {first.reason}{more}"

    def as_json(self) -> dict[str, Any]:
        """`cluster update --dryrun --output json`: stable keys, documented in docs/cluster-lifecycle.md."""
        worst_policy = self.worst
        return {
            "source": self.source,
            "changes": [
                {
                    "path": format_path(c.path),
                    "old": _jsonable(c.old),
                    "new": _jsonable(c.new),
                    "policy": c.policy.label,
                    "reason": c.reason,
                    "needs_yes": why_yes(c) or None,
                }
                for c in self.changes
            ],
            "worst": worst_policy.label if worst_policy is not None else None,
            "refused": self.refusal(),
            "needs_yes": bool(self.disruptive()),
        }


def plan_update(new: ElasticSlurmConfig, against: Path | None) -> UpdatePlan:
    """Diff `new` against the `against` file, or (None) against the config its cluster runs (SSM + S3)."""
    if against is not None:
        return UpdatePlan(str(against), diff(load(against), new))
    deployed = read_deployed(new)
    return UpdatePlan(f"the deployed config of {deployed.cluster} ({deployed.url})", diff(deployed.config, new))


def refuse_not_allowed(plan: UpdatePlan) -> None:
    """UserError (exit 2) when a change is not allowed."""
    refusal = plan.refusal()
    if refusal is not None:
        raise UserError(refusal)


def require_yes(plan: UpdatePlan, yes: bool) -> list[str]:
    """The warning lines of the changes that need `--yes`; UserError without it (before the CDK CLI starts)."""
    needing = plan.disruptive()
    warnings = [f"warning: {format_path(c.path)}: {why_yes(c)}" for c in needing]
    if needing and not yes:
        raise UserError(
            f"--yes: {len(needing)} change(s) act on running work (first: {needing[0].text()} — "
            f"{why_yes(needing[0])}); read the lines above (docs/updates.md), drain what they name, then run again "
            "with --yes"
        )
    return warnings
