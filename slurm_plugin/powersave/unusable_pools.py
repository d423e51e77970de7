"""Tell Slurm what a resume could not launch and which pools cannot launch at all, so jobs go elsewhere.

Every node a resume could not give an instance is powered down (POWER_DOWN_FORCE: its job is requeued at once, not
after ResumeTimeout) with a `(Code:<error>)` reason. When the cause is capacity and *every* location of the node's pool
is now in cool-down, the pool is unusable until the first cool-down ends, so its nodes are also set DOWN with the same
reason and `ResumeAfter` = the rest of the cool-down, and so are the pool's other idle~ nodes. The scheduler then
skips the whole pool: a requeued job that fits another pool or partition starts there at once, instead of bouncing
through every node of the empty pool. Slurm itself returns the nodes to idle~ when ResumeAfter expires (the cluster
manager does the same from the reason time: either is enough). A pool in protected mode (slurm_plugin/powersave/protection.py)
is treated the same way, without ResumeAfter: its nodes stay DOWN until an admin clears it.

DOWN comes only after slurmctld has started the power-down (the node shows POWERING_DOWN or POWERED_DOWN): with
`SlurmctldParameters=idle_on_node_suspend`, slurmctld makes a node IDLE when it suspends it, which would erase an
earlier DOWN (measured on Slurm 26.05; on 24.11 also a repeated power-down of a node already powered down, which shows
POWER_DOWN until it starts).
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable, Mapping, Sequence

from slurm_plugin.hostlists import compress
from slurm_plugin.manifest import Manifest, PoolManifest
from slurm_plugin.powersave import capacity, protection
from slurm_plugin.powersave.planner import CAPACITY_ERROR_CODES, node_pools, pool_of, power_down_reason
from slurm_plugin.powersave.slurm import Slurm, SlurmError, SlurmNode

log = logging.getLogger("slurm-resume")
COOLDOWN_CODE = "CapacityCooldown"
CAPACITY_CODES = CAPACITY_ERROR_CODES | {COOLDOWN_CODE}
POWER_DOWN_STARTED = ("POWERING_DOWN", "POWERED_DOWN")
BUSY_FLAGS = ("DRAIN", "POWERING_UP", "POWER_UP", "POWERING_DOWN", "COMPLETING", "MAINTENANCE", "RESERVED")


def report_failures(
    manifest: Manifest,
    slurm: Slurm,
    failed: Mapping[str, str],
    request_id: str,
    now: float,
    wait: float = 30.0,
    sleep: Callable[[float], None] = time.sleep,
) -> dict[str, int]:
    """Power the failed nodes down; set DOWN every idle or failed node of a pool with no location left (ResumeAfter:
    the rest of the cool-down) or in protected mode. Returns node -> ResumeAfter seconds of the nodes set DOWN."""
    unusable: dict[str, tuple[PoolManifest, str, int]] = {}  # pool key -> (pool, reason, ResumeAfter)
    short = [n for n, c in failed.items() if c in CAPACITY_CODES]
    for key, (pool, available_at) in _empty_pools(manifest, short, now).items():
        code = next(failed[n] for n in short if n.startswith(pool.node_prefix))
        why = f"(Code:{code}) no capacity in any location of pool {key} [request {request_id}]"
        unusable[key] = (pool, why, max(1, math.ceil(available_at - now)))
    by_prefix = node_pools(manifest.pools)
    for node, code in failed.items():
        owner = pool_of(node, by_prefix)
        if code == protection.PROTECTED_CODE and owner is not None:
            why = protection.reason(owner.key, protection.failures_of(manifest.state_dir, owner))
            unusable[owner.key] = (owner, why, 0)

    def power_down() -> None:
        by_code: dict[str, list[str]] = {}
        for node, code in failed.items():
            by_code.setdefault(code, []).append(node)
        for code, group in by_code.items():
            reason = power_down_reason(code, request_id)
            try:
                slurm.power_down(group, reason)
                log.warning("request %s: powered down %s: %s", request_id, compress(group), reason)
            except SlurmError as exc:
                log.error("request %s: could not power down %s: %s", request_id, compress(group), exc)

    return mark_pools_down(manifest, slurm, unusable, list(failed), f"request {request_id}", wait, sleep, power_down)


def mark_pools_down(
    manifest: Manifest,
    slurm: Slurm,
    unusable: Mapping[str, tuple[PoolManifest, str, int]],
    powered_down: Sequence[str],
    label: str,
    wait: float = 30.0,
    sleep: Callable[[float], None] = time.sleep,
    power_down: Callable[[], None] | None = None,
) -> dict[str, int]:
    """Set DOWN (reason, ResumeAfter when > 0) every idle~ node of the `unusable` pools first, then — after
    `power_down()` (which powers `powered_down` down and requeues their jobs), once that power-down started — the
    pools' nodes among `powered_down`. In that order a requeued job finds no node of those pools to bounce to.
    Returns node -> ResumeAfter of the nodes set DOWN."""
    if not unusable:
        if power_down is not None:
            power_down()
        return {}
    by_prefix = node_pools(manifest.pools)
    members: dict[str, list[str]] = {}
    for node in powered_down:
        pool = pool_of(node, by_prefix)
        if pool is not None and pool.key in unusable:
            members.setdefault(pool.key, []).append(node)
    try:
        known = slurm.show_nodes(None)
    except SlurmError as exc:
        log.warning("%s: %s", label, exc)
        known = {}
    idle: dict[str, list[str]] = {}
    for key, (pool, _, _) in unusable.items():
        free, queued = _idle_nodes(pool, known, by_prefix)
        idle[key] = [n for n in free if n not in members.get(key, [])]
        members.setdefault(key, []).extend(n for n in queued if n not in members[key])
    down = _set_down(slurm, unusable, idle, label)
    if power_down is not None:
        power_down()
    _wait_power_down_started(slurm, [n for group in members.values() for n in group], wait, sleep, label)
    down.update(_set_down(slurm, unusable, members, label))
    return down


def _set_down(
    slurm: Slurm, unusable: Mapping[str, tuple[PoolManifest, str, int]], nodes: Mapping[str, list[str]], label: str
) -> dict[str, int]:
    """DOWN each pool's `nodes` with its reason and ResumeAfter; node -> ResumeAfter of those set."""
    done: dict[str, int] = {}
    for key, group in nodes.items():
        if not group:
            continue
        _pool, why, after = unusable[key]
        try:
            slurm.set_down(group, why, after)
            log.warning("%s: %s DOWN%s: %s", label, compress(group), f" for {after} s" if after else "", why)
            done.update(dict.fromkeys(group, after))
        except SlurmError as exc:
            log.error("%s: could not set %s DOWN: %s", label, compress(group), exc)
    return done


def count_failed_boots(manifest: Manifest, slurm: Slurm, nodes: Sequence[str], label: str, now: float) -> list[str]:
    """ResumeFailProgram's part in protected mode: `nodes` failed to boot; a pool reaching the manifest's
    boot_failure_limit stops launching and its nodes go DOWN saying why. Returns the pools protected now."""
    if manifest.boot_failure_limit <= 0:
        return []
    by_prefix = node_pools(manifest.pools)
    pools: dict[str, PoolManifest] = {}
    counts: dict[str, int] = {}
    for node in nodes:
        pool = pool_of(node, by_prefix)
        if pool is not None:
            pools[pool.key] = pool
            counts[pool.key] = counts.get(pool.key, 0) + 1
    failures = [(pools[key], count) for key, count in counts.items()]
    newly = protection.record_failures(manifest.state_dir, failures, manifest.boot_failure_limit, now)
    unusable = {key: (pools[key], protection.reason(key, protection.failures_of(manifest.state_dir, pools[key])), 0)
                for key in newly}  # fmt: skip
    for key in newly:
        log.error("%s: pool %s is in protected mode: %s", label, key, unusable[key][1])
    mark_pools_down(manifest, slurm, unusable, nodes, label)
    return newly


def _empty_pools(manifest: Manifest, nodes: Sequence[str], now: float) -> dict[str, tuple[PoolManifest, float]]:
    """Pools of `nodes` whose every AZ is cooling: key -> (pool, when its first cool-down ends)."""
    by_prefix = node_pools(manifest.pools)
    result: dict[str, tuple[PoolManifest, float]] = {}
    for node in nodes:
        pool = pool_of(node, by_prefix)
        if pool is None or pool.key in result:
            continue
        azs = [loc.availability_zone for loc in pool.locations]
        available_at = capacity.pool_available_at(manifest.state_dir, pool.key, azs, now)
        if available_at is not None:
            result[pool.key] = (pool, available_at)
    return result


def _wait_power_down_started(
    slurm: Slurm, nodes: list[str], wait: float, sleep: Callable[[float], None], label: str
) -> dict[str, SlurmNode]:
    """Every node Slurm knows, once `nodes` show that their power-down started (or `wait` seconds passed)."""
    deadline = time.monotonic() + wait
    while True:
        try:
            known = slurm.show_nodes(None)
        except SlurmError as exc:
            log.warning("%s: %s", label, exc)
            known = {}
        pending = [n for n in nodes if not _power_down_started(known.get(n, _NONE).state)]
        if not pending or time.monotonic() >= deadline:
            if pending:
                log.warning("%s: power-down of %s not started in %.0f s", label, compress(pending), wait)
            return known
        sleep(0.5)


_NONE = SlurmNode("", "", "", "")


def _power_down_started(state: str) -> bool:
    """The node's power-down has begun: POWERING_DOWN or POWERED_DOWN, and no power-down still queued (POWER_DOWN).
    A node Slurm already powered down at ResumeTimeout (24.11: DOWN+POWERED_DOWN) whose ResumeFailProgram asked for a
    power-down again shows POWER_DOWN until that repeated power-down starts; a DOWN set before then is erased by
    `idle_on_node_suspend` when it does (seen on 24.11)."""
    flags = state.split("+")
    return any(f in flags for f in POWER_DOWN_STARTED) and "POWER_DOWN" not in flags


def _idle_nodes(
    pool: PoolManifest, known: Mapping[str, SlurmNode], by_prefix: Mapping[str, PoolManifest]
) -> tuple[list[str], list[str]]:
    """The pool's nodes the scheduler would pick once powered down: (idle ones whose power-down started — idle~, or
    POWERING_DOWN after an earlier request or the idle timer: DOWN now sticks —, those with a power-down still queued —
    POWER_DOWN: DOWN only once it started, or its start would erase it). A queued one may be DOWN already: a node
    slurmctld set DOWN at ResumeTimeout whose failed boot's power-down is repeated (reason `(Code:...)`, ours) turns
    IDLE when that starts (`idle_on_node_suspend`; seen on 26.05 under load: it then took a job the resume refused).
    Drained, reserved, ... nodes and an admin's DOWN are left."""
    free, queued = [], []
    for name, node in known.items():
        flags = node.state.split("+")
        if pool_of(name, by_prefix) != pool or any(f in flags for f in BUSY_FLAGS if f != "POWERING_DOWN"):
            continue
        if flags[0] == "IDLE" and _power_down_started(node.state):
            free.append(name)
        elif "POWER_DOWN" in flags and (
            flags[0] == "IDLE" or (flags[0] == "DOWN" and node.reason.startswith("(Code:"))
        ):
            queued.append(name)
    return free, queued
