"""The resume worker's core: claim nodes, plan, launch with capacity failover, hand instances to nodes, tell Slurm.

Decisions come from slurm_plugin.powersave.planner (pure); EC2 and Slurm are reached only through their adapters, so tests run
this against the emulated AWS with a fake Slurm adapter. One log line per decision, each with the request id.
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from slurm_plugin.hostlists import compress
from slurm_plugin.manifest import TAG_CLUSTER, TAG_POOL, Manifest
from slurm_plugin.powersave import capacity, node_names, protection, state
from slurm_plugin.powersave.ec2 import Ec2, Instance, LaunchRequest, LaunchResult
from slurm_plugin.powersave.planner import (
    CAPACITY_ERROR_CODES,
    CREATE_FLEET_MAX_TARGET,
    Attempt,
    PoolLaunch,
    assign,
    cooldown_azs,
    node_pools,
    plan_launch,
    pool_of,
    ready_to_bind,
    remaining_overrides,
)
from slurm_plugin.powersave.slurm import Slurm, SlurmError
from slurm_plugin.powersave.unusable_pools import COOLDOWN_CODE, report_failures
from slurm_plugin.telemetry import events

log = logging.getLogger("slurm-resume")
NAME_ATTEMPTS, NAME_PAUSE = 3, 1.0  # writing the node-name files (node_names.py): tries, seconds between


@dataclass
class PoolResult:
    """What one pool's launch produced."""

    instances: list[Instance] = field(default_factory=list)
    failed_keys: set[tuple[str, str, str]] = field(default_factory=set)
    code: str = "InsufficientInstanceCapacity"
    markets: dict[str, str] = field(default_factory=dict)  # instance id -> market it was launched in


@dataclass
class ResumeOutcome:
    """What a resume did (for the log summary, tests and the benchmark)."""

    request_id: str
    launched: dict[str, Instance] = field(default_factory=dict)
    failed: dict[str, str] = field(default_factory=dict)  # node -> error code
    busy: list[str] = field(default_factory=list)
    unknown: list[str] = field(default_factory=list)
    terminated: list[str] = field(default_factory=list)
    down: dict[str, int] = field(default_factory=dict)  # node -> ResumeAfter seconds (its pool has no capacity)


def _launch_pool(manifest: Manifest, launch: PoolLaunch, ec2: Ec2, request_id: str, seq: int) -> PoolResult:
    """Run the pool's attempts in order until every node has an instance or nothing is left to try."""
    result = PoolResult()
    need = len(launch.nodes)
    tags = {**manifest.tags, TAG_CLUSTER: manifest.cluster, TAG_POOL: launch.pool}
    calls = 0
    for attempt in launch.attempts:
        while len(result.instances) < need:
            active = remaining_overrides(attempt, result.failed_keys)
            if not active:
                break
            calls += 1
            count = min(need - len(result.instances), CREATE_FLEET_MAX_TARGET)
            request = LaunchRequest(
                region=attempt.region,
                launch_template_id=attempt.launch_template_id,
                market=attempt.market,
                overrides=active,
                count=count,
                token=f"{request_id}-p{seq}-c{calls}",
                tags=tags,
                placement_group=attempt.placement_group,
                all_in_one_az=attempt.single_availability_zone,
                capacity_reservation_id=attempt.capacity_reservation_id,
                capacity_block=attempt.capacity_block,
                efa=attempt.efa,
            )
            started = time.monotonic()
            answer = ec2.launch(request)
            result.instances.extend(answer.instances)
            result.markets.update(dict.fromkeys((i.instance_id for i in answer.instances), attempt.market))
            _record_call(manifest, launch, attempt, request_id, answer, count, time.monotonic() - started)
            where = sorted({f"{i.instance_type}@{i.availability_zone}" for i in answer.instances})
            log.info(
                "request %s pool %s: %s %s %s x%d -> %d instances %s",
                request_id, launch.pool, answer.api, attempt.region, attempt.market, count,
                len(answer.instances), ",".join(where),
            )  # fmt: skip
            capacity_error = False
            other_error = False
            for error in answer.errors:
                result.code = error.code
                if error.code in CAPACITY_ERROR_CODES:
                    capacity_error = True
                    hit = [
                        o
                        for o in active
                        if (error.instance_type in (None, o.instance_type)) and (error.subnet_id in (None, o.subnet_id))
                    ]
                    result.failed_keys.update((attempt.market, o.instance_type, o.subnet_id) for o in hit)
                else:
                    other_error = True
                log.warning(
                    "request %s pool %s: %s %s %s %s: %s",
                    request_id, launch.pool, attempt.region, attempt.market,
                    f"{error.instance_type or '*'}@{error.subnet_id or '*'}", error.code, error.message,
                )  # fmt: skip
            if not answer.instances and (other_error or not capacity_error):
                break  # nothing launched and nothing to fail over from within this attempt
    return result


def _record_call(
    manifest: Manifest,
    launch: PoolLaunch,
    attempt: Attempt,
    request_id: str,
    answer: LaunchResult,
    count: int,
    seconds: float,
) -> None:
    """The event log's lines for one launch call: the call, and each capacity error with its AZ."""
    where = {"request": request_id, "pool": launch.pool, "region": attempt.region, "market": attempt.market}
    azs = {o.subnet_id: o.availability_zone for o in attempt.overrides}
    records: list[dict[str, Any]] = [
        {"event": "launch_call", **where, "api": answer.api, "requested": count,
         "launched": len(answer.instances), "azs": dict(Counter(i.availability_zone for i in answer.instances)),
         "seconds": round(seconds, 3)},
    ]  # fmt: skip
    records.extend(
        {"event": "capacity_error", **where, "az": azs.get(error.subnet_id or "", ""),
         "instance_type": error.instance_type or "", "code": error.code}
        for error in answer.errors
        if error.code in CAPACITY_ERROR_CODES
    )  # fmt: skip
    events.record(manifest.state_dir, records)


def _terminate(ec2: Ec2, instances: Sequence[Instance], request_id: str, why: str, state_dir: str) -> list[str]:
    by_region: dict[str, list[str]] = {}
    for instance in instances:
        by_region.setdefault(instance.region, []).append(instance.instance_id)
    done: list[str] = []
    for region, ids in by_region.items():
        try:
            ec2.terminate(region, ids)
            done.extend(ids)
            log.info("request %s: terminated %d %s instances in %s", request_id, len(ids), why, region)
            events.record(
                state_dir,
                [{"event": "terminated", "node": "", "pool": i.tags.get(TAG_POOL, ""), "instance_id": i.instance_id,
                  "region": region, "reason": why} for i in instances if i.instance_id in ids],
            )  # fmt: skip
        except Exception as exc:
            log.error("request %s: could not terminate %s in %s: %s", request_id, ids, region, exc)
    return done


def resume_nodes(
    manifest: Manifest,
    nodes: Sequence[str],
    job_groups: Sequence[Sequence[str]],
    ec2: Ec2,
    slurm: Slurm,
    request_id: str,
    clock: Callable[[], float] = time.time,
) -> ResumeOutcome:
    """Launch instances for `nodes` and point Slurm at them; nodes that cannot be had are powered down."""
    outcome = ResumeOutcome(request_id)
    mine, outcome.busy = state.claim(manifest.state_dir, nodes, request_id)
    if outcome.busy:
        log.info(
            "request %s: %d nodes already being resumed: %s", request_id, len(outcome.busy), compress(outcome.busy)
        )
    try:
        _resume_claimed(manifest, mine, job_groups, ec2, slurm, outcome, clock)
    finally:
        state.release(manifest.state_dir, mine, request_id)
    log.info(
        "request %s done: %d launched, %d failed, %d skipped (busy), %d extra instances terminated",
        request_id, len(outcome.launched), len(outcome.failed), len(outcome.busy), len(outcome.terminated),
    )  # fmt: skip
    return outcome


def _resume_claimed(
    manifest: Manifest,
    nodes: Sequence[str],
    job_groups: Sequence[Sequence[str]],
    ec2: Ec2,
    slurm: Slurm,
    outcome: ResumeOutcome,
    clock: Callable[[], float],
) -> None:
    request_id = outcome.request_id
    now = clock()
    bind = _Binder(manifest, ec2, slurm, outcome, clock=clock, started=now)
    wanted = list(nodes)
    nodes = bind.already_running(nodes)
    held = _protected(manifest, nodes, slurm, request_id)
    nodes = [n for n in nodes if n not in held]
    cooling = capacity.load_cooling(manifest.state_dir, now)
    spread = {pool.key for pool in manifest.pools if pool.spread_jobs_across_azs}
    plan = plan_launch(nodes, manifest.pools, cooling, job_groups, spread)
    outcome.unknown = list(plan.unknown_nodes)
    if plan.unknown_nodes:
        log.error("request %s: not nodes of this cluster (ignored): %s", request_id, compress(plan.unknown_nodes))
    codes: dict[str, str] = {**dict.fromkeys(plan.cooling_nodes, COOLDOWN_CODE), **held}
    if plan.cooling_nodes:
        log.warning("request %s: every location in capacity cool-down for %s", request_id, compress(plan.cooling_nodes))
    undecided = {n for launch in plan.launches for n in launch.nodes}
    new_cooling: list[tuple[str, str]] = []
    for seq, launch in enumerate(plan.launches, start=1):
        log.info(
            "request %s pool %s: %d nodes (%d all-or-nothing jobs) %s",
            request_id, launch.pool, len(launch.nodes), len(launch.groups), compress(launch.nodes),
        )  # fmt: skip
        result = _launch_pool(manifest, launch, ec2, request_id, seq)
        bind.known.update({i.instance_id: i for i in result.instances})
        bind.launched_in.update({iid: (launch.pool, market) for iid, market in result.markets.items()})
        share = assign(launch, [i.instance_id for i in result.instances if i.private_ip])
        bind.unbound.update(share.assigned)
        bind.extras.extend(share.extra)
        bind.extras.extend(i.instance_id for i in result.instances if not i.private_ip)  # could not learn its address
        codes.update(dict.fromkeys(share.failed, result.code))
        undecided.difference_update(launch.nodes)
        if not any(a.single_availability_zone for a in launch.attempts):
            # a job's all-or-nothing minimum missed in an AZ says little about single nodes there: no cool-down
            new_cooling.extend((launch.pool, az) for az in cooldown_azs(launch.attempts, result.failed_keys))
        bind.settle(job_groups, codes, undecided)  # bind this pool now: the manager's orphan grace keeps running
    outcome.failed = {node: codes[node] for node in wanted if node in codes and node not in outcome.launched}
    if new_cooling:
        capacity.add_cooling(manifest.state_dir, new_cooling, now, manifest.capacity_cooldown_seconds)
        for pool, az in new_cooling:
            log.warning(
                "request %s: pool %s AZ %s in capacity cool-down for %d s",
                request_id, pool, az, manifest.capacity_cooldown_seconds,
            )  # fmt: skip
    outcome.down = report_failures(manifest, slurm, outcome.failed, request_id, now)


def _protected(manifest: Manifest, nodes: Sequence[str], slurm: Slurm, request_id: str) -> dict[str, str]:
    """Nodes of pools in protected mode (node -> ProtectedMode); first, a pool with failed boots whose node is up in
    Slurm has booted fine since: its count starts again."""
    by_prefix = node_pools(manifest.pools)
    pools = {p.key: p for p in (pool_of(n, by_prefix) for n in nodes) if p is not None}
    counting = [p for p in pools.values() if protection.failures_of(manifest.state_dir, p) > 0]
    if counting:
        try:
            known = slurm.show_nodes(None)
        except SlurmError as exc:
            log.warning("request %s: %s", request_id, exc)
            known = {}
        up = {p.key for n in known.values() if protection.is_up(n.state) and (p := pool_of(n.name, by_prefix))}
        protection.record_success(manifest.state_dir, [p for p in counting if p.key in up])
    held = protection.protected(manifest.state_dir, pools.values())
    skipped = {n: protection.PROTECTED_CODE for n in nodes if (p := pool_of(n, by_prefix)) and p.key in held}
    if skipped:
        log.error("request %s: pools in protected mode, not launched: %s", request_id, compress(skipped))
    return skipped


@dataclass
class _Binder:
    """Hands launched instances to nodes: nodes.json first (so suspend and the manager know the instance by id), then
    Slurm's NodeAddr; terminates what no node may keep."""

    manifest: Manifest
    ec2: Ec2
    slurm: Slurm
    outcome: ResumeOutcome
    known: dict[str, Instance] = field(default_factory=dict)  # instance id -> instance
    unbound: dict[str, str] = field(default_factory=dict)  # node -> instance id, launched, not yet bound
    extras: list[str] = field(default_factory=list)  # instance ids to terminate
    clock: Callable[[], float] = time.time
    started: float = 0.0  # when the resume began (the event log's launch latency)
    launched_in: dict[str, tuple[str, str]] = field(default_factory=dict)  # instance id -> (pool, market), this resume

    def already_running(self, nodes: Sequence[str]) -> list[str]:
        """Nodes still to launch: a node whose recorded instance is alive (an earlier resume launched it) is bound
        to that instance again instead of getting a second one. An instance EC2 cannot tell about right now counts
        as alive, with its recorded address: if it is in fact gone, the node does not register and ResumeTimeout
        relaunches it; launching now could leave two instances behind one node."""
        known = state.node_map(self.manifest.state_dir)
        recorded = {n: known[n] for n in nodes if n in known}
        by_region: dict[str, list[str]] = {}
        for entry in recorded.values():
            by_region.setdefault(entry["region"], []).append(entry["instance_id"])
        alive: dict[str, Instance] = {}
        for region, ids in by_region.items():
            alive.update({i.instance_id: i for i in self.ec2.lookup(region, ids)})
        for entry in recorded.values():
            seen = alive.get(entry["instance_id"])
            if seen is not None and not seen.private_ip:  # unknown: keep what the node map says
                alive[seen.instance_id] = replace(seen, private_ip=entry.get("private_ip") or None)
        again = {
            n: e["instance_id"] for n, e in recorded.items() if (i := alive.get(e["instance_id"])) and i.private_ip
        }
        if again:
            self.known.update(alive)
            log.warning(
                "request %s: %d nodes already have a live instance (not launched again): %s",
                self.outcome.request_id, len(again), compress(again),
            )  # fmt: skip
            self._bind(again)
        return [n for n in nodes if n not in again]

    def settle(self, job_groups: Sequence[Sequence[str]], codes: dict[str, str], undecided: set[str]) -> None:
        """Bind what is ready, release the instances of jobs that cannot run whole, terminate the extras."""
        share = ready_to_bind(job_groups, self.unbound, codes, undecided)
        for node in share.failed:
            cause = next((codes[n] for g in job_groups if node in g for n in g if n in codes), "JobIncomplete")
            codes.setdefault(node, cause)
            del self.unbound[node]
        self.extras.extend(share.extra)
        for node in share.assigned:
            del self.unbound[node]
        if self.extras:
            instances = [self.known[i] for i in self.extras]
            self.outcome.terminated.extend(
                _terminate(self.ec2, instances, self.outcome.request_id, "unneeded", self.manifest.state_dir)
            )
            self.extras.clear()
        if share.assigned:
            self._bind(share.assigned)

    def _bind(self, assigned: dict[str, str]) -> None:
        request_id = self.outcome.request_id
        addresses = {node: self.known[iid].private_ip or "" for node, iid in assigned.items()}
        bound_at = f"{self.clock():.3f}"  # a suspend asked for before this leaves the instance alone (terminator.py)
        state.remember_instances(
            self.manifest.state_dir,
            {
                node: {"instance_id": iid, "region": self.known[iid].region, "private_ip": addresses[node],
                       "bound_at": bound_at}
                for node, iid in assigned.items()
            },
        )  # fmt: skip
        if self.manifest.node_names_dir:  # each instance's bootstrap reads its node name here, not from Slurm
            self._publish_names({iid: node for node, iid in assigned.items()})
        try:
            self.slurm.set_addresses(addresses)
            log.info("request %s: NodeAddr set for %d nodes %s", request_id, len(addresses), compress(addresses))
        except SlurmError as exc:
            log.error("request %s: %s (instances kept; resume-fail will clean up)", request_id, exc)
        self.outcome.launched.update({node: self.known[iid] for node, iid in assigned.items()})
        self._record(assigned)

    def _publish_names(self, names: dict[str, str]) -> None:
        """The node-name files, retried (the shared file system may hiccup): without them the instances cannot find
        their nodes, do not register, and resume-fail ends them at ResumeTimeout."""
        directory = self.manifest.node_names_dir or ""
        for attempt in range(NAME_ATTEMPTS):
            try:
                node_names.publish(directory, names)
                return
            except OSError as exc:
                if attempt + 1 == NAME_ATTEMPTS:
                    log.error(
                        "request %s: node names not written to %s: %s (those nodes will not register)",
                        self.outcome.request_id, directory, exc,
                    )  # fmt: skip
                else:
                    time.sleep(NAME_PAUSE)

    def _record(self, assigned: dict[str, str]) -> None:
        """One `node_launched` line per node given an instance this resume launched (the cost ledger)."""
        seconds = round(max(0.0, self.clock() - self.started), 3)
        records = []
        for node, iid in assigned.items():
            if iid not in self.launched_in:
                continue  # bound again to an instance an earlier resume launched (and recorded)
            pool, market = self.launched_in[iid]
            instance = self.known[iid]
            records.append(
                {"event": "node_launched", "request": self.outcome.request_id, "pool": pool, "node": node,
                 "instance_id": iid, "instance_type": instance.instance_type, "az": instance.availability_zone,
                 "region": instance.region, "market": market, "seconds": seconds}
            )  # fmt: skip
        events.record(self.manifest.state_dir, records)
