"""The manager's decisions, as one pure function: `reconcile(slurm_nodes, instances, now, settings) -> list[Action]`.

A node is linked to its instance by NodeAddr = the instance's private IP (set by the resume worker). Rules, per node
(first match wins), then per instance:

| node                                             | instance                        | action                             |
|--------------------------------------------------|---------------------------------|------------------------------------|
| name not in the manifest                         | -                               | ignore (logged)                    |
| powering down                                    | any                             | nothing (SuspendProgram's job)     |
| powering up                                      | live, launched > ResumeTimeout  | terminate + power down (requeue)   |
| powering up                                      | shutting-down / terminated      | power down                         |
| powering up                                      | none yet / live                 | nothing (resume in flight)         |
| powered down, DOWN `(Code:ProtectedMode)`        | -                               | resume once the pool is cleared    |
| powered down, DOWN/DRAIN `(Code:...)`            | -                               | resume once the cool-down expired  |
| powered down, DOWN/DRAIN by us / Slurm's failure | -                               | resume (back to idle~)             |
| powered down, always-on (not cooling down)       | -                               | power up (not while fleet stopped) |
| powered down, IDLE + NOT_RESPONDING (no FAIL/REBOOT) | -                           | power down again (clears the flag) |
| up (idle/alloc/mixed/down)                       | gone / shutting-down / stopped  | power down, reason, job requeued   |
| up, DOWN + not responding                        | live                            | power down (instance replaced)     |
| up, DOWN by us or for capacity                   | live                            | power down, reason kept            |
| up, drained by `(Health:`/`(EC2:`/... and idle   | any                             | power down (replaced on demand)    |
| up, drained by Slurm for a job failure, idle     | any                             | power down (`Prolog/Epilog failure`, `Duplicate jobid`, ...) |
| up, draining by those, drain_mode=requeue        | any                             | power down now                     |
| up, idle, fleet stopped                          | live                            | power down `(Manager:FleetStopped)`|
| up                                               | status impaired > threshold     | drain `(EC2:Impaired)`             |
| up                                               | active scheduled event          | drain `(EC2:Scheduled)`            |
| -                                                | of another cluster / unknown pool | ignore (logged)                  |
| no node claims its IP (powered-down nodes don't) | live/stopped, older than grace  | terminate (orphan)                 |
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime, timedelta

from slurm_plugin.hostlists import compress
from slurm_plugin.manager.model import (
    CAPACITY_PREFIX,
    EC2_PREFIX,
    GONE_INSTANCE_STATES,
    MANAGER_PREFIX,
    REPLACE_PREFIXES,
    SLURM_DRAIN_REASONS,
    SLURM_FAILURE_REASONS,
    Action,
    Instance,
    Kind,
    Node,
    Settings,
)
from slurm_plugin.manifest import PoolManifest
from slurm_plugin.powersave.planner import node_pools, pool_of
from slurm_plugin.powersave.protection import PROTECTED_CODE

ORPHAN_STATES = frozenset({"pending", "running", "stopping", "stopped"})
# Slurm reasons are shared by every node of a kind (one scontrol call per reason); details go to the log.
REASON_GONE = f"{MANAGER_PREFIX}InstanceGone) instance terminated or lost"
REASON_RESUME_TIMEOUT = f"{MANAGER_PREFIX}ResumeTimeout) instance did not register in time"
REASON_NOT_RESPONDING = f"{MANAGER_PREFIX}NotResponding) slurmd not responding"
REASON_IMPAIRED = f"{EC2_PREFIX}Impaired) EC2 status check impaired"
REASON_FLEET_STOPPED = f"{MANAGER_PREFIX}FleetStopped) fleet stopped by the operator"
PROTECTED_PREFIX = f"(Code:{PROTECTED_CODE})"  # set by the resume of a protected pool


def always_on(node: str, pool: PoolManifest) -> bool:
    """The first `min_nodes` nodes of a pool are always on."""
    index = node[len(pool.node_prefix) :]
    return index.isdigit() and int(index) <= pool.min_nodes


def reconcile(
    slurm_nodes: Sequence[Node], instances: Sequence[Instance], now: datetime, settings: Settings
) -> list[Action]:
    """Every action needed to bring Slurm and EC2 back in agreement (empty when they agree)."""
    by_prefix = node_pools(settings.pools)
    by_ip: dict[str, Instance] = {}
    for inst in instances:
        # A live instance wins over a dying one that had the same address.
        if inst.cluster == settings.cluster and inst.private_ip and (inst.private_ip not in by_ip or inst.live):
            by_ip[inst.private_ip] = inst
    actions: list[Action] = []
    unknown: list[str] = []
    for node in slurm_nodes:
        pool = pool_of(node.name, by_prefix)
        if pool is None:
            unknown.append(node.name)
            continue
        linked = by_ip.get(node.addr) if node.addr else None
        actions.extend(_node_actions(node, linked, pool, now, settings))
    if unknown:
        why = "Slurm node(s) not in the manifest: never touched"
        actions.append(Action(Kind.IGNORE, compress(unknown), why))
    actions.extend(_instance_actions(slurm_nodes, instances, now, settings))
    return actions


def _node_actions(node: Node, inst: Instance | None, pool: PoolManifest, now: datetime, s: Settings) -> list[Action]:
    if node.powering_down:
        return []
    if node.powering_up:
        return _powering_up(node, inst, pool, now, s)
    if not node.up:
        return _powered_down(node, pool, now, s)
    return _powered_up(node, inst, now, s)


def _powering_up(node: Node, inst: Instance | None, pool: PoolManifest, now: datetime, s: Settings) -> list[Action]:
    if inst is None:
        return []  # launch in flight (or not yet addressed); Slurm's ResumeTimeout covers a lost resume
    if inst.state in GONE_INSTANCE_STATES:
        why = f"instance {inst.instance_id} at {node.addr} is {inst.state} while the node powers up"
        return [_power_down(node, REASON_GONE, why, "instances_lost")]
    timeout = s.resume_timeout or timedelta(seconds=pool.resume_timeout)
    if now - inst.launch_time > timeout:
        why = f"instance {inst.instance_id} did not register within {int(timeout.total_seconds())} s"
        return [
            Action(Kind.TERMINATE, inst.instance_id, why, region=inst.region, counter="resume_timeouts"),
            _power_down(node, REASON_RESUME_TIMEOUT, why, ""),
        ]
    return []


# a repeated power-down would clear these (idle_on_node_suspend) or cancel them: an admin's FAIL, a pending reboot;
# COMPLETING: a job is still finishing there
KEEP_FLAGS = frozenset({"FAIL", "REBOOT_REQUESTED", "REBOOT_ISSUED", "COMPLETING"})


def _powered_down(node: Node, pool: PoolManifest, now: datetime, s: Settings) -> list[Action]:
    if node.down or node.drain:
        if node.reason.startswith(PROTECTED_PREFIX):
            if pool.key in s.protected_pools:
                return []  # no launches until an admin clears the pool: a resume would only set it DOWN again
            why = f"pool {pool.key} left protected mode ({node.reason})"
            return [Action(Kind.RESUME, node.name, why)]
        if node.reason.startswith(CAPACITY_PREFIX):
            since = node.reason_time
            if since is None or now - since >= s.capacity_cooldown:
                why = f"capacity cool-down of {int(s.capacity_cooldown.total_seconds())} s expired ({node.reason})"
                return [Action(Kind.RESUME, node.name, why, counter="capacity_recovered")]
            return []
        if node.reason.startswith((*REPLACE_PREFIXES, *SLURM_FAILURE_REASONS, *SLURM_DRAIN_REASONS)):
            why = f"powered down after a failure ({node.reason or 'no reason'}): back to service"
            return [Action(Kind.RESUME, node.name, why)]
        return []  # DOWN/DRAIN by an administrator: theirs to undo
    if always_on(node.name, pool) and not s.fleet_stopped:
        since = node.reason_time if node.reason.startswith(CAPACITY_PREFIX) else None
        if since is not None and now - since < s.capacity_cooldown:
            return []  # its last launch hit a capacity error: retry when the cool-down is over
        return [
            Action(
                Kind.POWER_UP,
                node.name,
                f"always-on node (first {pool.min_nodes} of {pool.key}) is powered down",
                counter="always_on_started",
            )
        ]
    if node.not_responding and node.state == "IDLE" and not node.flags & KEEP_FLAGS:
        # slurmctld's RESUME of a DOWN node (Slurm's own ResumeAfter at the end of a capacity cool-down, or an
        # older manager's) sets NOT_RESPONDING until the node registers (node_mgr.c _require_node_reg), which a
        # powered-down node never does; nothing else clears it, and a slurmctld (re)start then leaves the node up but
        # never available (read_config.c _build_bitmaps): a job that needs it pends "ReqNodeNotAvail" for ever.
        # Starting a power-down clears the flag (power_save.c); the node is available again after SuspendTimeout.
        why = "idle~ but NOT_RESPONDING (left by a RESUME): unusable after a slurmctld restart; power-down repeated"
        return [Action(Kind.REFRESH, node.name, why, counter="stale_not_responding_cleared")]
    return []


def _powered_up(node: Node, inst: Instance | None, now: datetime, s: Settings) -> list[Action]:
    if node.addr is None:
        return []  # no link to an instance (never addressed): nothing we can check
    if inst is None or not inst.live:
        state = "gone" if inst is None else inst.state
        why = f"its instance at {node.addr} is {state}"
        return [_power_down(node, REASON_GONE, why, "instances_lost")]
    if node.down and (node.not_responding or node.reason.startswith(SLURM_FAILURE_REASONS)):
        why = f"slurmd on {inst.instance_id} is not responding ({node.reason or 'DOWN'})"
        return [_power_down(node, REASON_NOT_RESPONDING, why, "nodes_replaced")]
    if node.down and node.reason.startswith((CAPACITY_PREFIX, *REPLACE_PREFIXES)):
        return [_power_down(node, node.reason, f"DOWN while powered up ({node.reason})", "")]
    if node.drain and node.reason.startswith((*REPLACE_PREFIXES, *SLURM_DRAIN_REASONS)):
        if not node.busy or s.drain_mode == "requeue":
            counter = "health_check_failures" if node.reason.startswith("(Health:") else "nodes_replaced"
            why = f"drained ({node.reason}){'' if not node.busy else ', jobs requeued'}: replace the instance"
            return [_power_down(node, node.reason, why, counter)]
        return []
    if node.drain:
        return []
    if s.fleet_stopped and not node.busy:
        why = f"fleet stopped: idle node on {inst.instance_id} powered down"
        return [_power_down(node, REASON_FLEET_STOPPED, why, "fleet_stopped_nodes")]
    if inst.impaired_since is not None and now - inst.impaired_since > s.impaired_threshold:
        why = f"instance {inst.instance_id} status impaired since {inst.impaired_since.isoformat()}"
        return [Action(Kind.DRAIN, node.name, why, reason=REASON_IMPAIRED, counter="ec2_impaired")]
    for event in inst.events:
        if event.active:
            why = f"instance {inst.instance_id} has scheduled event {event.code}"
            reason = f"{EC2_PREFIX}Scheduled) {event.code}"
            return [Action(Kind.DRAIN, node.name, why, reason=reason, counter="ec2_scheduled_events")]
    return []


def _power_down(node: Node, reason: str, why: str, counter: str) -> Action:
    return Action(Kind.POWER_DOWN, node.name, why, reason=reason, counter=counter)


def claimed_ips(slurm_nodes: Iterable[Node]) -> set[str]:
    """Addresses nodes hold on to: every addressed node except those powered down for good."""
    return {n.addr for n in slurm_nodes if n.addr and not n.powered_down}


def _instance_actions(
    slurm_nodes: Sequence[Node], instances: Sequence[Instance], now: datetime, s: Settings
) -> list[Action]:
    claimed = claimed_ips(slurm_nodes)
    pool_keys = {p.key for p in s.pools}
    actions: list[Action] = []
    for inst in instances:
        if inst.cluster != s.cluster:
            why = f"instance of another cluster ({inst.cluster or 'untagged'}): never touched"
            actions.append(Action(Kind.IGNORE, inst.instance_id, why, region=inst.region))
            continue
        if inst.state not in ORPHAN_STATES or (inst.private_ip and inst.private_ip in claimed):
            continue
        if inst.pool not in pool_keys:
            why = f"instance of unknown pool {inst.pool or '(none)'}: never touched"
            actions.append(Action(Kind.IGNORE, inst.instance_id, why, region=inst.region))
            continue
        if now - inst.launch_time < s.orphan_grace:
            continue  # the resume worker may not have set NodeAddr yet
        why = f"orphan: no Slurm node claims {inst.private_ip or 'its address'} ({inst.pool}, {inst.state})"
        actions.append(Action(Kind.TERMINATE, inst.instance_id, why, region=inst.region, counter="orphans_terminated"))
    return actions
