"""One simulated scale-out: N powered-down nodes, their jobs submitted at once, until every node runs.

The real plugin code runs unchanged: `resume_nodes` (claims, the planner, capacity fail-over, binding) for each
ResumeProgram call and `terminate_nodes` for each ResumeFailProgram call, each in its own simulated process, with
the plugin's EC2 adapter whose botocore clients the EC2 model answers (`wire.SimEc2`) and the Slurm model as its
`scontrol`. The cluster: one pool, 3 instance types x 3 AZs of one region (as bench/run.py), max_nodes = N.
"""

from __future__ import annotations

import logging
import math
import random
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from bench.ec2_sim import floor
from bench.ec2_sim.clock import VirtualClock, patched_time
from bench.ec2_sim.ec2_model import Ec2Model, ModelParams, Subnet
from bench.ec2_sim.slurm_model import SlurmModel, SlurmTimers
from bench.ec2_sim.whatif import PacedEc2
from bench.ec2_sim.wire import SimEc2
from slurm_plugin.manifest import Manifest
from slurm_plugin.powersave.launch_calls import LaunchDone
from slurm_plugin.powersave.launcher import LAUNCH_WORKERS, Runner, resume_nodes
from slurm_plugin.powersave.planner import power_down_reason
from slurm_plugin.powersave.terminator import terminate_nodes

EPOCH = 1_800_000_000.0  # virtual start (a whole second: bucket refills tick at whole seconds)
REGION = "us-east-1"
AZS = ("us-east-1a", "us-east-1b", "us-east-1c")
TYPES = ("c7i.large", "c6i.large", "m7i.large")
PLUGIN_LOGGERS = ("slurm-resume", "slurm-suspend", "slurm_plugin")


@dataclass(frozen=True)
class Scenario:
    """What to simulate."""

    name: str
    n: int
    model: ModelParams = field(default_factory=ModelParams)
    timers: SlurmTimers = field(default_factory=SlurmTimers)
    # capacity of each (AZ, type) pool as a share of N; the preferred type gets less than N in each AZ, so the
    # plugin has to spill over AZs and types. None: no capacity limit.
    capacity_share: dict[str, float] | None = field(
        default_factory=lambda: {"c7i.large": 0.3, "c6i.large": 0.3, "m7i.large": 0.3}
    )
    job_nodes: int = 1  # nodes per job: jobs of this many consecutive nodes, each all-or-nothing in one AZ
    worker_start_s: float = 0.5  # ResumeProgram's fork + the worker's imports
    tick_s: float = 1.0  # slurmctld's loop looks at its events at least this often
    horizon_s: float | None = None  # give up after this (default: 3 x the floor + 1 h)
    # what-if (whatif.PacedEc2): wait up to this long per launch for launch tokens instead of failing nodes; 0: off
    pace_budget_s: float = 0.0
    pace_poll_s: float = 10.0


@dataclass
class Run:
    """The live objects of one simulation."""

    clock: VirtualClock
    model: Ec2Model
    slurm: SlurmModel
    manifest: Manifest
    workers: list[Any] = field(default_factory=list)
    requests: int = 0


def node_names(n: int) -> list[str]:
    """The pool's node names, as Slurm has them."""
    return [f"cpu-c7i-{i}" for i in range(1, n + 1)]


def _manifest(n: int, state: Path) -> Manifest:
    """One pool of 3 types x 3 AZs in one region (validated as the plugin validates a manifest file)."""
    locations = [
        {"region": REGION, "availability_zone": az, "subnet_id": f"subnet-{az}", "launch_template_id": "lt-sim"}
        for az in AZS
    ]
    pool = {
        "partition": "cpu", "pool": "c7i", "node_prefix": "cpu-c7i-", "min_nodes": 0, "max_nodes": n,
        "instance_types": list(TYPES), "purchase_option": "on_demand", "locations": locations,
    }  # fmt: skip
    return Manifest.model_validate(
        {"cluster": "sim", "home_region": REGION, "instance_cache_path": str(state / "instance-cache.json"),
         "state_dir": str(state / "state"), "log_file": str(state / "plugin.log"), "pools": [pool]}
    )  # fmt: skip


def _capacity(scenario: Scenario) -> dict[tuple[str, str], int]:
    if scenario.capacity_share is None:
        return dict(scenario.model.capacity)
    return {(az, t): math.ceil(scenario.n * share) for az in AZS for t, share in scenario.capacity_share.items()}


@contextmanager
def _quiet_plugin_logs() -> Iterator[None]:
    """The plugin logs one line per decision: thousands here. Dropped during the run, restored after."""
    saved = []
    for name in PLUGIN_LOGGERS:
        logger = logging.getLogger(name)
        saved.append((logger, logger.handlers[:], logger.propagate))
        logger.handlers = [logging.NullHandler()]
        logger.propagate = False
    try:
        yield
    finally:
        for logger, handlers, propagate in saved:
            logger.handlers = handlers
            logger.propagate = propagate


@contextmanager
def _seeded(seed: int) -> Iterator[None]:
    """botocore's backoff jitter draws from the `random` module's generator: seeded for the run, restored after."""
    saved = random.getstate()
    random.seed(seed)
    try:
        yield
    finally:
        random.setstate(saved)


def launch_runner(clock: VirtualClock, workers: int = LAUNCH_WORKERS) -> Runner:
    """The launcher's Runner on the virtual clock: up to `workers` simulated processes take the launch tasks in order
    (as launcher.in_threads' threads do); the resume process parks until one ends."""

    def run(tasks: Sequence[Callable[[], LaunchDone]]) -> Iterator[tuple[int, LaunchDone | Exception]]:
        waiting = list(enumerate(tasks))
        ended: list[tuple[int, LaunchDone | Exception]] = []
        me = clock.pid()

        def worker() -> None:
            while waiting:
                index, task = waiting.pop(0)
                try:
                    result: LaunchDone | Exception = task()
                except Exception as exc:
                    result = exc
                ended.append((index, result))
                clock.wake(me)

        for k in range(min(workers, len(tasks))):
            clock.spawn(worker, f"launch-{me}-{k}")
        for _ in tasks:
            while not ended:
                clock.park()
            yield ended.pop(0)

    return run


def job_groups(nodes: Sequence[str], job_nodes: int) -> list[list[str]]:
    """The resume file's jobs among `nodes`: node i belongs to job (i - 1) // job_nodes (the jobs were submitted
    in node order); single-node jobs give no group."""
    if job_nodes <= 1:
        return []
    groups: dict[int, list[str]] = {}
    for node in nodes:
        groups.setdefault((int(node.rsplit("-", 1)[1]) - 1) // job_nodes, []).append(node)
    return list(groups.values())


def _resume(run: Run, nodes: Sequence[str], scenario: Scenario) -> None:
    run.requests += 1
    request_id = f"sim-{run.requests}"
    run.slurm.start_resume(nodes)

    def worker() -> None:
        time.sleep(scenario.worker_start_s)
        state_dir = run.manifest.state_dir
        ec2 = (
            PacedEc2(run.model, scenario.pace_budget_s, scenario.pace_poll_s, state_dir=state_dir)
            if scenario.pace_budget_s > 0
            else SimEc2(run.model, state_dir=state_dir)
        )
        groups = job_groups(nodes, scenario.job_nodes)
        resume_nodes(
            run.manifest, list(nodes), groups, ec2, run.slurm, request_id, clock=run.clock.now,
            runner=launch_runner(run.clock),
        )  # fmt: skip

    run.workers.append(run.clock.spawn(worker, f"resume-{request_id}"))


def _resume_fail(run: Run, nodes: Sequence[str], start_s: float) -> None:
    run.requests += 1
    request_id = f"sim-{run.requests}"
    run.slurm.cycle.resume_fail_calls += 1
    asked_at = run.clock.now()

    def worker() -> None:
        time.sleep(start_s)
        ec2 = SimEc2(run.model, state_dir=run.manifest.state_dir)
        reason = power_down_reason("ResumeFailed", request_id)
        terminate_nodes(run.manifest, list(nodes), ec2, run.slurm, f"request {request_id}", reason, asked_at,
                        "resume-fail")  # fmt: skip

    run.workers.append(run.clock.spawn(worker, f"resume-fail-{request_id}"))


def simulate(scenario: Scenario) -> dict[str, Any]:
    """Run one scenario; the result row of the report (times in virtual seconds from the submission)."""
    params = scenario.model
    bucket = params.limits.resource["RunInstances"]
    boot = floor.BootTime(params.boot_median_s, params.boot_sigma)
    floor_s = floor.all_running_floor(scenario.n, bucket, boot, scenario.job_nodes)
    horizon = scenario.horizon_s if scenario.horizon_s is not None else 3 * floor_s + 3600
    wall = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="ec2-sim-") as tmp, _quiet_plugin_logs(), _seeded(params.seed):
        clock = VirtualClock(EPOCH)
        subnets = [Subnet(f"subnet-{az}", REGION, az) for az in AZS]
        model = Ec2Model(replace(params, capacity=_capacity(scenario)), subnets, clock.now)
        names = node_names(scenario.n)
        run = Run(clock, model, SlurmModel(names, model, clock.now, scenario.timers), _manifest(scenario.n, Path(tmp)))
        with patched_time(clock):
            try:
                _loop(run, scenario, EPOCH + horizon)
            finally:
                clock.close()
        result = _result(run, scenario, floor_s, boot, bucket)
    result["wall_s"] = round(time.perf_counter() - wall, 2)
    return result


def _loop(run: Run, scenario: Scenario, horizon: float) -> None:
    """slurmctld: apply due events, call ResumeFailProgram / ResumeProgram, until every node runs."""
    slurm, clock = run.slurm, run.clock
    slurm.submit()
    while True:
        slurm.process_due()
        if slurm.to_fail:
            _resume_fail(run, sorted(slurm.to_fail), scenario.worker_start_s)
            slurm.to_fail.clear()
        if slurm.to_resume:
            _resume(run, sorted(slurm.to_resume), scenario)
            slurm.to_resume.clear()
        if clock.errors:
            raise clock.errors[0]
        if slurm.all_up() and not any(w.is_alive() for w in run.workers):
            return
        if clock.now() >= horizon:
            return
        clock.sleep(max(0.0, min(slurm.next_event() - clock.now(), scenario.tick_s)))


def _first_time_at_least(events: list[tuple[float, int]], target: int) -> float | None:
    """Sweep (+1/-1 at times): the first time the running total reaches `target`."""
    total = 0
    for at, delta in sorted(events):
        total += delta
        if total >= target:
            return at
    return None


def _curve(times: list[float], points: int = 240) -> dict[str, list[float]]:
    """The running count against time, at most `points` steps."""
    if not times:
        return {"t": [], "running": []}
    step = max(1, len(times) // points)
    picked = list(range(step - 1, len(times), step))
    if picked[-1] != len(times) - 1:
        picked.append(len(times) - 1)
    return {"t": [round(times[i], 1) for i in picked], "running": [i + 1 for i in picked]}


def _result(run: Run, scenario: Scenario, floor_s: float, boot: floor.BootTime, bucket: Any) -> dict[str, Any]:
    model, slurm, n = run.model, run.slurm, scenario.n
    params = model.params
    end = run.clock.now()
    up = sorted(node.up_at - EPOCH for node in slurm.nodes.values() if node.up_at is not None)
    ec2_events: list[tuple[float, int]] = []
    for instance in model.instances.values():
        running_from = instance.launch_time + instance.pending_s
        if instance.terminated_at is None or instance.terminated_at > running_from:
            ec2_events.append((running_from - EPOCH, 1))
            if instance.terminated_at is not None:
                ec2_events.append((instance.terminated_at - EPOCH, -1))
    ec2_time = _first_time_at_least(ec2_events, n)
    bound = {node.instance_id for node in slurm.nodes.values() if node.state == "up"}
    leaked = [i.instance_id for i in model.live(end) if i.instance_id not in bound]
    all_up = len(up) == n
    ec2_boot = floor.BootTime(boot.median_s, boot.sigma, params.pending_fraction)
    ec2_floor = floor.all_running_floor(n, bucket, ec2_boot, scenario.job_nodes)
    return {
        "scenario": scenario.name,
        "n": n,
        "job_nodes": scenario.job_nodes,
        "time_to_all_running_s": round(up[-1], 1) if all_up else None,
        "time_to_ec2_running_s": None if ec2_time is None else round(ec2_time, 1),
        "floor_s": round(floor_s, 1),
        "ec2_floor_s": round(ec2_floor, 1),
        "launch_floor_s": floor.launch_floor(n, bucket, scenario.job_nodes),
        "ratio": round(up[-1] / floor_s, 3) if all_up and floor_s > 0 else None,
        "nodes_running": len(up),
        "aws_calls": dict(sorted(model.calls.items())),
        "throttled": dict(sorted(model.throttled.items())),
        "capacity_errors": dict(sorted(model.capacity_errors.items())),
        "instances_launched": len(model.instances),
        "instances_terminated": sum(1 for i in model.instances.values() if i.terminated_at is not None),
        "instances_leaked": len(leaked),
        "jobs_across_azs": _jobs_across_azs(run, scenario.job_nodes),
        "resume_calls": slurm.cycle.resume_calls,
        "resume_fail_calls": slurm.cycle.resume_fail_calls,
        "resume_timeouts": slurm.cycle.resume_timeouts,
        "powered_down_by_plugin": dict(slurm.cycle.powered_down_by_plugin),
        "set_down_by_plugin": slurm.cycle.set_down,
        "virtual_end_s": round(end - EPOCH, 1),
        "curve": _curve(up),
        "ideal_curve": _ideal_curve(n, bucket, boot, up[-1] if up else floor_s, scenario.job_nodes),
        "limits": {
            "run_instances_resource": [bucket.capacity, bucket.refill_per_second],
            "create_fleet_request": list(params.limits.request["CreateFleet"].__dict__.values()),
        },
        "slurm_timers": dict(scenario.timers.__dict__),
        "what_if_pace_budget_s": scenario.pace_budget_s,
        "model": {
            "ice_rate": params.ice_rate, "boot_median_s": params.boot_median_s, "boot_sigma": params.boot_sigma,
            "pending_fraction": params.pending_fraction, "empty_bucket_answer": params.empty_bucket_answer,
            "capacity_share": scenario.capacity_share, "seed": params.seed,
        },
    }  # fmt: skip


def _jobs_across_azs(run: Run, job_nodes: int) -> int:
    """Jobs whose running nodes' instances are in more than one AZ (0 is the plugin's promise)."""
    azs: dict[int, set[str]] = {}
    for node in run.slurm.nodes.values():
        instance = run.model.instances.get(node.instance_id)
        if node.up_at is not None and instance is not None:
            azs.setdefault((int(node.name.rsplit("-", 1)[1]) - 1) // job_nodes, set()).add(instance.availability_zone)
    return sum(1 for found in azs.values() if len(found) > 1) if job_nodes > 1 else 0


def _ideal_curve(
    n: int, bucket: Any, boot: floor.BootTime, until: float, job_nodes: int = 1, points: int = 120
) -> dict[str, list[float]]:
    times = [until * 1.05 * i / points for i in range(points + 1)]
    return {"t": [round(t, 1) for t in times],
            "running": [round(v, 1) for v in floor.expected_running(times, n, bucket, boot, job_nodes)]}  # fmt: skip
