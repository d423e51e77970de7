"""Carry out reconcile's actions in batches: one TerminateInstances per region (≤1000 ids), one scontrol update per
(kind, reason) group. Every action is logged with its why; a failed batch is logged and counted, the rest go on.

Order matters: instances are terminated before their nodes are powered down (SuspendProgram then finds nothing left),
drains before power-downs of other nodes, resumes and power-ups last.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from botocore.exceptions import BotoCoreError, ClientError

from slurm_plugin.hostlists import compress
from slurm_plugin.manager.model import Action, Kind
from slurm_plugin.manager.slurm_port import ManagerSlurm
from slurm_plugin.powersave.slurm import SlurmError

LOG = logging.getLogger(__name__)


class Terminator(Protocol):
    """The part of the EC2 adapter apply uses (slurm_plugin.powersave.ec2.Ec2 satisfies it)."""

    def terminate(self, region: str, ids: Sequence[str]) -> None:
        """Terminate instances of one region, batched; raises ClientError/BotoCoreError on failure."""


@dataclass
class Outcome:
    """What happened: counters of the actions done, and the failures (one line each)."""

    done: list[Action] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)

    @property
    def counters(self) -> list[str]:
        """One counter name per successful action that has one, plus one `action_failures` per failed batch."""
        return [a.counter for a in self.done if a.counter] + ["action_failures"] * len(self.failures)


def _dedupe(actions: Sequence[Action]) -> list[Action]:
    """First action per (kind, target) wins (events and reconcile may both ask for the same thing)."""
    seen: set[tuple[Kind, str]] = set()
    result = []
    for action in actions:
        key = (action.kind, action.target)
        if key not in seen:
            seen.add(key)
            result.append(action)
    return result


def apply(actions: Sequence[Action], ec2: Terminator, slurm: ManagerSlurm, dry_run: bool = False) -> Outcome:
    """Apply every action (or only log them with dry_run); returns what was done and what failed."""
    outcome = Outcome()
    actions = _dedupe(actions)
    for action in actions:
        if action.kind is Kind.IGNORE:
            LOG.debug("ignore %s: %s", action.target, action.why)  # the daemon logs new ones at INFO
        else:
            LOG.info("%s %s: %s", action.kind.value, action.target, action.why)
    if dry_run:
        return outcome
    _terminate(actions, ec2, outcome)
    _slurm_groups(Kind.DRAIN, actions, lambda nodes, reason: slurm.drain(nodes, reason), outcome)
    _slurm_groups(Kind.POWER_DOWN, actions, lambda nodes, reason: slurm.power_down(nodes, reason), outcome)
    _slurm_groups(Kind.RESUME, actions, lambda nodes, _: slurm.resume(nodes), outcome)
    _slurm_groups(Kind.REFRESH, actions, lambda nodes, _: slurm.power_down_again(nodes), outcome)
    _slurm_groups(Kind.POWER_UP, actions, lambda nodes, _: slurm.power_up(nodes), outcome)
    return outcome


def _terminate(actions: Sequence[Action], ec2: Terminator, outcome: Outcome) -> None:
    by_region: dict[str, list[Action]] = {}
    for action in actions:
        if action.kind is Kind.TERMINATE:
            by_region.setdefault(action.region, []).append(action)
    for region, group in sorted(by_region.items()):
        ids = [a.target for a in group]
        try:
            ec2.terminate(region, ids)
        except (ClientError, BotoCoreError) as exc:
            message = f"terminate {len(ids)} instance(s) in {region}: {' '.join(str(exc).split())}"
            LOG.error("%s", message)
            outcome.failures.append(message)
            continue
        outcome.done.extend(group)


def _slurm_groups(
    kind: Kind, actions: Sequence[Action], run: Callable[[list[str], str], None], outcome: Outcome
) -> None:
    groups: dict[str, list[Action]] = {}
    for action in actions:
        if action.kind is kind:
            groups.setdefault(action.reason, []).append(action)
    for reason, group in groups.items():
        nodes = [a.target for a in group]
        try:
            run(nodes, reason)
        except SlurmError as exc:
            message = f"{kind.value} {compress(nodes)}: {exc}"
            LOG.error("%s", message)
            outcome.failures.append(message)
            continue
        outcome.done.extend(group)
