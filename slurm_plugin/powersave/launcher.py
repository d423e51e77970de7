"""The resume worker's core: claim nodes, plan, launch the plan's launches at once, bind, tell Slurm.

Decisions come from slurm_plugin.powersave.planner (pure); EC2 and Slurm are reached only through their adapters, so
tests run this against the emulated AWS with a fake Slurm adapter. One log line per decision, each with the request id.

The plan's launches (one per pool, or per batch of whole jobs: planner.job_batches) run in up to LAUNCH_WORKERS
threads at once (launch_calls.run_launch: EC2 only); this thread takes each answer as it comes and binds it
(binder.py: node map, node names, NodeAddr), so the first job has its addresses while bigger launches still run.
Why a bound on threads and no client-side token bucket: EC2's request buckets are per account and Region, shared
with the cluster manager and other workers, so no client can know their level; what keeps a resume inside them is
making few calls (about log2 of the jobs, bench/README.md) and few at once. LAUNCH_WORKERS = 4 stays under the
smallest burst (RunInstances: 5 requests); a throttled call is retried by the retry policy (retry_policy.py) with
its ClientToken, and the launch-resource bucket (instances, not requests) no concurrency changes.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed, wait
from functools import partial

from slurm_plugin.hostlists import compress
from slurm_plugin.manifest import Manifest
from slurm_plugin.powersave import capacity, protection, state
from slurm_plugin.powersave.binder import LOOKUP_FAILED_CODE, Binder, ResumeOutcome
from slurm_plugin.powersave.ec2 import Ec2
from slurm_plugin.powersave.launch_calls import LaunchDone, run_launch
from slurm_plugin.powersave.planner import PoolLaunch, cooldown_azs, node_pools, plan_launch, pool_of
from slurm_plugin.powersave.slurm import Slurm, SlurmError
from slurm_plugin.powersave.unusable_pools import COOLDOWN_CODE, report_failures

__all__ = ["LAUNCH_WORKERS", "ResumeOutcome", "resume_nodes"]

log = logging.getLogger("slurm-resume")
LAUNCH_WORKERS = 4  # launches in flight at once (see the module docstring)
# The first launch (planner.job_batches: the first job alone) runs alone until it ends or this many seconds passed:
# answered first, its nodes have their NodeAddr while the bigger launches run (an endpoint serving every call at
# once, as the emulated EC2 does, would otherwise share itself among them).
HEAD_START_S = 1.0
LAUNCH_FAILED_CODE = "LaunchFailed"  # a launch that raised (a bug, not EC2's answer): its nodes are powered down
# Runs launch tasks at once; yields (task index, its result or the exception it raised) as each ends. `in_threads`
# in production; bench/ec2_sim runs them as processes of its virtual clock.
Runner = Callable[[Sequence[Callable[[], LaunchDone]]], Iterator[tuple[int, LaunchDone | Exception]]]


def resume_nodes(
    manifest: Manifest,
    nodes: Sequence[str],
    job_groups: Sequence[Sequence[str]],
    ec2: Ec2,
    slurm: Slurm,
    request_id: str,
    clock: Callable[[], float] = time.time,
    runner: Runner | None = None,
) -> ResumeOutcome:
    """Launch instances for `nodes` and point Slurm at them; nodes that cannot be had are powered down. `runner`:
    how the plan's launches run at once (default `in_threads`)."""
    outcome = ResumeOutcome(request_id)
    mine, outcome.busy = state.claim(manifest.state_dir, nodes, request_id)
    if outcome.busy:
        log.info(
            "request %s: %d nodes already being resumed: %s", request_id, len(outcome.busy), compress(outcome.busy)
        )
    try:
        _resume_claimed(manifest, mine, job_groups, ec2, slurm, outcome, clock, runner or in_threads)
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
    runner: Runner,
) -> None:
    request_id = outcome.request_id
    now = clock()
    bind = Binder(manifest, ec2, slurm, outcome, clock=clock, started=now)
    wanted = list(nodes)
    nodes, unsure = bind.already_running(nodes)
    held = _protected(manifest, nodes, slurm, request_id)
    nodes = [n for n in nodes if n not in held]
    cooling = capacity.load_cooling(manifest.state_dir, now)
    spread = {pool.key for pool in manifest.pools if pool.spread_jobs_across_azs}
    plan = plan_launch(nodes, manifest.pools, cooling, job_groups, spread)
    outcome.unknown = list(plan.unknown_nodes)
    if plan.unknown_nodes:
        log.error("request %s: not nodes of this cluster (ignored): %s", request_id, compress(plan.unknown_nodes))
    codes: dict[str, str] = {
        **dict.fromkeys(unsure, LOOKUP_FAILED_CODE),
        **dict.fromkeys(plan.cooling_nodes, COOLDOWN_CODE),
        **held,
    }
    if plan.cooling_nodes:
        log.warning("request %s: every location in capacity cool-down for %s", request_id, compress(plan.cooling_nodes))
    undecided = {n for launch in plan.launches for n in launch.nodes}
    new_cooling: list[tuple[str, str]] = []
    for launch, done in _launches(manifest, plan.launches, ec2, request_id, runner):
        bind.take(launch.pool, done.instances, done.markets, done.assigned, done.extra)
        codes.update(dict.fromkeys(done.failed, done.code))
        undecided.difference_update(launch.nodes)
        if not any(a.single_availability_zone for a in launch.attempts):
            # a job's all-or-nothing minimum missed in an AZ says little about single nodes there: no cool-down
            new_cooling.extend((launch.pool, az) for az in cooldown_azs(launch.attempts, done.failed_keys))
        bind.settle(job_groups, codes, undecided)  # bind this launch now: the manager's orphan grace keeps running
    outcome.failed = {node: codes[node] for node in wanted if node in codes and node not in outcome.launched}
    if new_cooling:
        capacity.add_cooling(manifest.state_dir, new_cooling, now, manifest.capacity_cooldown_seconds)
        for pool, az in dict.fromkeys(new_cooling):
            log.warning(
                "request %s: pool %s AZ %s in capacity cool-down for %d s",
                request_id, pool, az, manifest.capacity_cooldown_seconds,
            )  # fmt: skip
    outcome.down = report_failures(manifest, slurm, outcome.failed, request_id, now)


def in_threads(tasks: Sequence[Callable[[], LaunchDone]]) -> Iterator[tuple[int, LaunchDone | Exception]]:
    """The default Runner: the tasks in up to LAUNCH_WORKERS threads, started in order (the first with a head start
    of HEAD_START_S); (index, result or the exception it raised) as each ends."""
    if not tasks:
        return
    with ThreadPoolExecutor(max_workers=min(LAUNCH_WORKERS, len(tasks)), thread_name_prefix="launch") as pool:
        running = {pool.submit(tasks[0]): 0}
        wait(running, timeout=HEAD_START_S)  # the first (smallest) launch alone: its nodes get addresses soonest
        running.update({pool.submit(task): index for index, task in enumerate(tasks) if index})
        for future in as_completed(running):
            error = future.exception()
            yield running[future], future.result() if error is None else _as_exception(error)


def _as_exception(error: BaseException) -> Exception:
    if isinstance(error, Exception):
        return error
    raise error  # KeyboardInterrupt, SystemExit: not a launch failure


def _launches(
    manifest: Manifest, launches: Sequence[PoolLaunch], ec2: Ec2, request_id: str, runner: Runner
) -> Iterator[tuple[PoolLaunch, LaunchDone]]:
    """Run the launches through `runner`, in plan order; yield each with its result as it ends. A launch that raises
    (a bug: EC2's errors are answers) fails its nodes with LAUNCH_FAILED_CODE; what it may have launched carries the
    cluster's tags, so the cluster manager ends it as an orphan after its grace period."""
    for launch in launches:
        log.info(
            "request %s pool %s: %d nodes (%d all-or-nothing jobs) %s",
            request_id, launch.pool, len(launch.nodes), len(launch.groups), compress(launch.nodes),
        )  # fmt: skip
    tasks = [partial(run_launch, manifest, launch, ec2, request_id, seq) for seq, launch in enumerate(launches, 1)]
    for index, done in runner(tasks):
        launch = launches[index]
        if isinstance(done, Exception):
            log.error("request %s pool %s: launch failed: %r", request_id, launch.pool, done)
            done = LaunchDone(code=LAUNCH_FAILED_CODE, failed=list(launch.nodes))
        yield launch, done


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
