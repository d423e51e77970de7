"""One launch of a resume: its EC2 calls, attempt by attempt, and which node gets which instance.

`run_launch` runs in one of the launcher's worker threads (launcher.LAUNCH_WORKERS run at once); it touches no state
file and no Slurm, only EC2 and the event log, and returns everything as a LaunchDone for the launcher's own thread
to bind. Two shapes:
- whole jobs (`PoolLaunch.groups` with one-AZ attempts, planner.job_batches): each call asks for every job still
  waiting, at least the smallest one, all in the attempt's AZ; whole jobs are cut from what that AZ gave (in job
  order), leftovers wait for the next call in the same AZ and are released when the launch moves on;
- everything else (single nodes, pools whose jobs may spread): as many as EC2 gives, then `planner.assign`.
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from slurm_plugin.manifest import TAG_CLUSTER, TAG_POOL, Manifest
from slurm_plugin.powersave.ec2 import Ec2, Instance, LaunchRequest, LaunchResult
from slurm_plugin.powersave.planner import (
    CAPACITY_ERROR_CODES,
    CREATE_FLEET_MAX_TARGET,
    Attempt,
    Override,
    PoolLaunch,
    assign,
    remaining_overrides,
)
from slurm_plugin.telemetry import events

log = logging.getLogger("slurm-resume")


@dataclass
class LaunchDone:
    """What one launch produced: its instances, who gets which, what must go, why the others failed."""

    instances: list[Instance] = field(default_factory=list)
    failed_keys: set[tuple[str, str, str]] = field(default_factory=set)  # (market, type, subnet) with no capacity
    code: str = "InsufficientInstanceCapacity"
    markets: dict[str, str] = field(default_factory=dict)  # instance id -> market it was launched in
    assigned: dict[str, str] = field(default_factory=dict)  # node -> instance id
    failed: list[str] = field(default_factory=list)  # nodes that got nothing
    extra: list[str] = field(default_factory=list)  # instance ids nobody may keep (to terminate)


@dataclass
class _Caller:
    """The EC2 calls of one launch, numbered for their ClientTokens (`{request}-p{seq}-c{n}`)."""

    manifest: Manifest
    launch: PoolLaunch
    ec2: Ec2
    request_id: str
    seq: int
    done: LaunchDone
    calls: int = 0

    def call(self, attempt: Attempt, active: tuple[Override, ...], count: int, minimum: int | None) -> bool:
        """One launch call; False when nothing came back and failing over inside this attempt is pointless."""
        self.calls += 1
        launch = self.launch
        request = LaunchRequest(
            region=attempt.region,
            launch_template_id=attempt.launch_template_id,
            market=attempt.market,
            overrides=active,
            count=count,
            token=f"{self.request_id}-p{self.seq}-c{self.calls}",
            tags={**self.manifest.tags, TAG_CLUSTER: self.manifest.cluster, TAG_POOL: launch.pool},
            placement_group=attempt.placement_group,
            all_in_one_az=attempt.single_availability_zone,
            min_count=minimum,
            capacity_reservation_id=attempt.capacity_reservation_id,
            capacity_block=attempt.capacity_block,
            efa=attempt.efa,
        )
        started = time.monotonic()
        answer = self.ec2.launch(request)
        self.done.instances.extend(answer.instances)
        self.done.markets.update(dict.fromkeys((i.instance_id for i in answer.instances), attempt.market))
        _record_call(self.manifest, launch, attempt, self.request_id, answer, count, time.monotonic() - started)
        where = sorted({f"{i.instance_type}@{i.availability_zone}" for i in answer.instances})
        log.info(
            "request %s pool %s: %s %s %s x%d -> %d instances %s",
            self.request_id, launch.pool, answer.api, attempt.region, attempt.market, count,
            len(answer.instances), ",".join(where),
        )  # fmt: skip
        capacity_error = other_error = False
        for error in answer.errors:
            self.done.code = error.code
            if error.code in CAPACITY_ERROR_CODES:
                capacity_error = True
                hit = [
                    o
                    for o in active
                    if error.instance_type in (None, o.instance_type) and error.subnet_id in (None, o.subnet_id)
                ]
                self.done.failed_keys.update((attempt.market, o.instance_type, o.subnet_id) for o in hit)
            else:
                other_error = True
            log.warning(
                "request %s pool %s: %s %s %s %s: %s",
                self.request_id, launch.pool, attempt.region, attempt.market,
                f"{error.instance_type or '*'}@{error.subnet_id or '*'}", error.code, error.message,
            )  # fmt: skip
        return bool(answer.instances) or (capacity_error and not other_error)


def run_launch(manifest: Manifest, launch: PoolLaunch, ec2: Ec2, request_id: str, seq: int) -> LaunchDone:
    """Run the launch's attempts in order until every node has an instance or nothing is left to try."""
    done = LaunchDone()
    caller = _Caller(manifest, launch, ec2, request_id, seq, done)
    if launch.groups and all(a.single_availability_zone for a in launch.attempts):
        _whole_jobs(caller)
        return done
    need = len(launch.nodes)
    for attempt in launch.attempts:
        while len(done.instances) < need:
            active = remaining_overrides(attempt, done.failed_keys)
            if not active or not caller.call(
                attempt, active, min(need - len(done.instances), CREATE_FLEET_MAX_TARGET), None
            ):
                break
    share = assign(launch, [i.instance_id for i in done.instances if i.private_ip])
    done.assigned, done.failed = dict(share.assigned), list(share.failed)
    done.extra = [*share.extra, *(i.instance_id for i in done.instances if not i.private_ip)]  # address unknown
    return done


def _whole_jobs(caller: _Caller) -> None:
    """Each job whole in one AZ: every attempt is one AZ; a call asks for what the waiting jobs need (at least the
    smallest of them, minus what this AZ already gave), and whole jobs are cut from this AZ's instances in order."""
    done = caller.done
    waiting = list(caller.launch.groups)
    for attempt in caller.launch.attempts:
        free: list[str] = []  # instances of this attempt (one AZ) no job has yet
        while waiting:
            active = remaining_overrides(attempt, done.failed_keys)
            want = sum(len(g) for g in waiting) - len(free)
            if not active or want <= 0:
                break
            before = len(done.instances)
            count = min(want, CREATE_FLEET_MAX_TARGET)
            going_on = caller.call(attempt, active, count, max(1, min(len(g) for g in waiting) - len(free)))
            fresh = done.instances[before:]
            free.extend(i.instance_id for i in fresh if i.private_ip)
            done.extra.extend(i.instance_id for i in fresh if not i.private_ip)  # address unknown: cannot bind
            still: list[tuple[str, ...]] = []
            for group in waiting:
                if len(group) <= len(free):
                    done.assigned.update(zip(group, free[: len(group)], strict=True))
                    free = free[len(group) :]
                else:
                    still.append(group)
            waiting = still
            if not going_on:
                break
        done.extra.extend(free)  # too few in this AZ for any waiting job: released
    done.failed = [n for g in waiting for n in g]


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
