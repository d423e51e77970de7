"""Pure decisions of the instance runner: which emulated instances to boot, fail, or stop, given EC2 and local state.

`decide(observed, tracked, control, now, draw)` returns the actions; the daemon (instance_runner.py) applies them.
`draw` is a random number in [0, 1) per new instance, so boot failures are reproducible in tests.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum

LIVE_STATES = frozenset({"pending", "running"})


@dataclass(frozen=True)
class Observed:
    """One instance of the cluster as DescribeInstances shows it."""

    instance_id: str
    state: str
    private_ip: str
    region: str
    availability_zone: str
    instance_type: str
    pool: str = ""  # its pool tag (partition-pool), as the launch template tagged it
    login_pool: str = ""  # a login node's login pool tag (launched by its Auto Scaling group, never a Slurm node)


@dataclass(frozen=True)
class Control:
    """Knobs read from runner-control.json every loop."""

    boot_delay: float = 2.0
    boot_failure_rate: float = 0.0
    fail_boots: int = 0  # total number of boots that must fail (on top of the rate), counted from runner start


@dataclass
class Tracked:
    """What the runner knows about an instance it has seen."""

    observed: Observed
    first_seen: float
    boot_at: float
    fail: bool
    booted: bool = False
    stopped: bool = False


class Kind(StrEnum):
    """What to do with an instance."""

    TRACK = "track"  # new instance: remember it (boot later or never)
    BOOT = "boot"  # start its bootstrap now
    STOP = "stop"  # EC2 says it is gone: stop everything it runs


@dataclass(frozen=True)
class Action:
    """One decision."""

    kind: Kind
    instance_id: str
    fail: bool = False
    boot_at: float = 0.0


@dataclass
class Decisions:
    """All actions of one loop, and how many requested failures they use up."""

    actions: list[Action] = field(default_factory=list)
    requested_failures_used: int = 0


def decide(
    observed: list[Observed],
    tracked: dict[str, Tracked],
    control: Control,
    failures_used: int,
    now: float,
    draw: dict[str, float],
) -> Decisions:
    """The runner's actions for one loop (pure)."""
    result = Decisions()
    seen = {o.instance_id: o for o in observed}
    for inst in observed:
        if inst.instance_id in tracked or inst.state not in LIVE_STATES:
            continue
        fail = False
        if inst.login_pool:
            pass  # boot failures stand for a broken compute image under the plugin's launches: login nodes boot
        elif failures_used + result.requested_failures_used < control.fail_boots:
            fail = True
            result.requested_failures_used += 1
        elif draw.get(inst.instance_id, 1.0) < control.boot_failure_rate:
            fail = True
        result.actions.append(Action(Kind.TRACK, inst.instance_id, fail=fail, boot_at=now + control.boot_delay))
    for instance_id, item in tracked.items():
        current = seen.get(instance_id)
        gone = current is None or current.state not in LIVE_STATES
        if gone and not item.stopped:
            result.actions.append(Action(Kind.STOP, instance_id))
        elif not gone and not item.booted and not item.fail and now >= item.boot_at:
            result.actions.append(Action(Kind.BOOT, instance_id))
    return result
