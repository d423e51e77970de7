"""Plain data the manager decides over: a Slurm node, an EC2 instance, the settings, and the actions it takes.

Node reasons carry the manager's memory (stateless across restarts): a `(Code:...)` prefix is a capacity error
written by the resume worker, `(Health:...)` a failed health check, `(EC2:...)`, `(Spot:...)` and `(Manager:...)`
are written by the manager itself. Slurm's own `ResumeTimeout reached` / `Not responding` are recognised too.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Literal

from slurm_plugin.manifest import PoolManifest

CAPACITY_PREFIX = "(Code:"
HEALTH_PREFIX = "(Health:"
EC2_PREFIX = "(EC2:"
SPOT_PREFIX = "(Spot:"
MANAGER_PREFIX = "(Manager:"
# Reasons after which a drained, idle node is powered down (its instance replaced on the next power-up).
REPLACE_PREFIXES = (HEALTH_PREFIX, EC2_PREFIX, SPOT_PREFIX, MANAGER_PREFIX)
# Slurm's own reasons for nodes whose instance failed (22.05 wording).
SLURM_FAILURE_REASONS = ("ResumeTimeout reached", "Not responding")
# Slurm's own drain reasons (26.05 wording) for a job that failed on the node: its prolog failed (slurmd's
# registration: `Prolog error`, `Job env setup error`; the launch's reply: `Prolog/Epilog failure`), its epilog failed,
# slurmd already ran the job it was sent (a launch repeated after a controller takeover), a step could not be killed,
# the batch job's completion failed. Once idle the node is powered down and its instance replaced, as for
# REPLACE_PREFIXES (ParallelCluster replaces every drained node; an administrator's own drain reason is left alone).
SLURM_DRAIN_REASONS = (
    "Prolog error", "Job env setup error", "Prolog/Epilog failure", "Epilog error", "Duplicate jobid",
    "Kill task failed", "batch job complete failure",
)  # fmt: skip

LIVE_INSTANCE_STATES = frozenset({"pending", "running"})
GONE_INSTANCE_STATES = frozenset({"shutting-down", "terminated", "stopping", "stopped"})


@dataclass(frozen=True)
class Node:
    """A Slurm node: base state (IDLE, ALLOCATED, MIXED, DOWN, ...), flags (CLOUD, POWERED_DOWN, DRAIN, ...)."""

    name: str
    state: str
    flags: frozenset[str] = frozenset()
    addr: str | None = None
    reason: str = ""
    reason_time: datetime | None = None

    @property
    def powering_up(self) -> bool:
        """ResumeProgram is (or is about to be) starting its instance (POWER_UP: requested, not yet started)."""
        return bool(self.flags & {"POWERING_UP", "POWER_UP"})

    @property
    def powering_down(self) -> bool:
        """SuspendProgram is stopping its instance (or a power-down is queued)."""
        return bool(self.flags & {"POWERING_DOWN", "POWER_DOWN"})

    @property
    def powered_down(self) -> bool:
        """Powered down and staying so (idle~ / down~)."""
        return "POWERED_DOWN" in self.flags and not self.powering_up and not self.powering_down

    @property
    def up(self) -> bool:
        """Powered up: it should have a running instance."""
        return not (self.powering_up or self.powering_down or "POWERED_DOWN" in self.flags)

    @property
    def busy(self) -> bool:
        """Runs (or is finishing) jobs."""
        return self.state in {"ALLOCATED", "MIXED", "COMPLETING"} or "COMPLETING" in self.flags

    @property
    def drain(self) -> bool:
        """Drained or draining."""
        return "DRAIN" in self.flags or self.state in {"DRAINED", "DRAINING"}

    @property
    def down(self) -> bool:
        """Base state DOWN."""
        return self.state == "DOWN"

    @property
    def not_responding(self) -> bool:
        """slurmd stopped answering."""
        return "NOT_RESPONDING" in self.flags


@dataclass(frozen=True)
class ScheduledEvent:
    """An EC2 scheduled event of an instance (DescribeInstanceStatus Events[])."""

    code: str
    description: str = ""
    not_before: datetime | None = None

    @property
    def active(self) -> bool:
        """Not completed or canceled (EC2 marks those in the description)."""
        return not self.description.startswith(("[Completed]", "[Canceled]"))


@dataclass(frozen=True)
class Instance:
    """An EC2 instance of (or claiming to be of) the cluster."""

    instance_id: str
    region: str
    state: str
    private_ip: str | None
    launch_time: datetime
    cluster: str
    pool: str = ""
    instance_type: str = ""
    availability_zone: str = ""
    spot: bool = False
    impaired_since: datetime | None = None
    events: tuple[ScheduledEvent, ...] = ()

    @property
    def live(self) -> bool:
        """pending or running."""
        return self.state in LIVE_INSTANCE_STATES


@dataclass(frozen=True)
class Settings:
    """What reconcile needs to know about the cluster and its timers."""

    cluster: str
    pools: tuple[PoolManifest, ...]
    resume_timeout: timedelta | None = None  # None: each pool's ResumeTimeout from the manifest
    orphan_grace: timedelta = timedelta(seconds=300)
    capacity_cooldown: timedelta = timedelta(seconds=600)
    impaired_threshold: timedelta = timedelta(seconds=300)
    drain_mode: Literal["finish", "requeue"] = "finish"
    fleet_stopped: bool = False  # `elastic-slurm fleet stop`: power idle nodes down, start none (manager/fleet.py)
    # pools in protected mode (powersave/protection.py): their DOWN nodes stay down until the pool is cleared
    protected_pools: frozenset[str] = frozenset()


class Kind(StrEnum):
    """What an action does."""

    TERMINATE = "terminate"  # TerminateInstances (target: instance id)
    POWER_DOWN = "power_down"  # scontrol update state=POWER_DOWN_FORCE reason=... (jobs requeued)
    DRAIN = "drain"  # scontrol update state=DRAIN reason=...
    RESUME = "resume"  # scontrol update state=IDLE (DOWN~/drained~ back to idle~; slurm.py Scontrol.resume)
    REFRESH = "refresh"  # scontrol update state=POWER_DOWN on an idle~ NOT_RESPONDING node (clears the flag)
    POWER_UP = "power_up"  # scontrol update state=POWER_UP
    IGNORE = "ignore"  # nothing: logged only


@dataclass(frozen=True)
class Action:
    """One thing to do, with why (logged) and the metrics counter it bumps once done."""

    kind: Kind
    target: str
    why: str
    reason: str = ""
    region: str = ""
    counter: str = ""
