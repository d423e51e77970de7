"""Pure launch planning: which nodes go to which pool, in which order of regions/markets/overrides, and who gets what.

No I/O here. The resume worker (slurm_plugin/powersave/launcher.py) asks `plan_launch` for a plan, runs its attempts through the
EC2 adapter, and uses `assign`, `ready_to_bind` and `cooldown_azs` to turn EC2's answers into Slurm updates.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Literal

from slurm_plugin.manifest import PoolManifest

Market = Literal["spot", "on-demand"]

# EC2 error codes that mean "no capacity for this shape here, try elsewhere" (not a bug in our request).
CAPACITY_ERROR_CODES = frozenset(
    {
        "InsufficientInstanceCapacity",
        "InsufficientCapacity",
        "InsufficientHostCapacity",
        "InsufficientReservedInstanceCapacity",
        "MaxSpotInstanceCountExceeded",
        "InstanceLimitExceeded",
        "VcpuLimitExceeded",
        "SpotMaxPriceTooLow",
        "Unsupported",
        "UnfulfillableCapacity",
        "ReservationCapacityExceeded",  # a targeted capacity reservation (or Capacity Block) is full
    }
)

# Largest batch each launch API accepts (sources in bench/README.md).
CREATE_FLEET_MAX_TARGET = 10_000  # "Target capacity per EC2 Fleet": 10,000 (EC2 Fleet quotas)
TERMINATE_MAX_IDS = 1_000  # TerminateInstances InstanceIds: "Up to 1000 instance IDs"


@dataclass(frozen=True)
class Override:
    """One capacity pool EC2 may use: an instance type in a subnet (AZ)."""

    instance_type: str
    subnet_id: str
    availability_zone: str
    priority: int


@dataclass(frozen=True)
class Attempt:
    """One launch shape: a region, its launch template, a market, and the overrides in priority order."""

    region: str
    launch_template_id: str
    market: Market
    overrides: tuple[Override, ...]
    placement_group: str | None = None
    # All overrides sit in one AZ and the launch is all-or-nothing there (CreateFleet `SingleAvailabilityZone` and
    # `MinTargetCapacity` = count): set for pools whose launch carries a multi-node job, so its nodes share an AZ.
    single_availability_zone: bool = False
    capacity_reservation_id: str | None = None  # launch only into this reservation
    capacity_block: bool = False  # ... a Capacity Block for ML (market type capacity-block)
    efa: bool = False  # the template has EFA network interfaces (launched with CreateFleet only)


@dataclass(frozen=True)
class PoolLaunch:
    """Everything to launch for one pool: nodes (job groups first), all-or-nothing groups, attempts in order."""

    pool: str
    nodes: tuple[str, ...]
    groups: tuple[tuple[str, ...], ...]
    attempts: tuple[Attempt, ...]


@dataclass(frozen=True)
class LaunchPlan:
    """The whole resume: per-pool launches, names no pool owns, nodes whose every location is cooling down."""

    launches: tuple[PoolLaunch, ...]
    unknown_nodes: tuple[str, ...] = ()
    cooling_nodes: tuple[str, ...] = ()


@dataclass(frozen=True)
class Assignment:
    """Result of matching launched instances to nodes."""

    assigned: dict[str, str] = field(default_factory=dict)  # node -> instance id
    failed: tuple[str, ...] = ()
    extra: tuple[str, ...] = ()  # instance ids nobody needs (to terminate)


def markets(purchase_option: str) -> tuple[Market, ...]:
    """Markets to try, in order, for a pool's purchase option."""
    if purchase_option == "spot":
        return ("spot",)
    if purchase_option == "spot_then_on_demand":
        return ("spot", "on-demand")
    return ("on-demand",)


def node_pools(pools: Sequence[PoolManifest]) -> dict[str, PoolManifest]:
    """Index pools by node prefix (node names are `{prefix}{index}`)."""
    return {pool.node_prefix: pool for pool in pools}


def pool_of(node: str, by_prefix: Mapping[str, PoolManifest]) -> PoolManifest | None:
    """The pool owning `node`, or None (O(1): split the trailing index off the name)."""
    prefix = node.rstrip("0123456789")
    index = node[len(prefix) :]
    pool = by_prefix.get(prefix)
    if pool is None or not index or index.startswith("0") or not 1 <= int(index) <= pool.max_nodes:
        return None
    return pool


def attempts_for(pool: PoolManifest, cooling_azs: Iterable[str] = ()) -> tuple[Attempt, ...]:
    """Attempts in priority order: region by region (manifest order), each market, overrides type-major.

    Overrides are (instance type x subnet) with priority by type preference first, then location order, so EC2's
    prioritized allocation fills the preferred type across AZs before falling back to the next type. A type is left
    out in the AZs where EC2 does not offer it (`pool.not_offered`, from the instance cache at render).
    """
    skip = set(cooling_azs)
    regions: dict[str, list[tuple[int, str, str, str]]] = {}
    for order, loc in enumerate(pool.locations):
        if loc.availability_zone in skip:
            continue
        regions.setdefault(loc.region, []).append((order, loc.subnet_id, loc.availability_zone, loc.launch_template_id))
    result: list[Attempt] = []
    for region, locs in regions.items():
        template = locs[0][3]
        overrides = []
        for t_index, itype in enumerate(pool.instance_types):
            unoffered = pool.not_offered.get(itype, ())
            for l_index, (_order, subnet, az, _lt) in enumerate(locs):
                if az not in unoffered:
                    overrides.append(Override(itype, subnet, az, priority=t_index * len(locs) + l_index))
        if not overrides:
            continue  # no type offered in the region's remaining AZs
        for market in markets(pool.purchase_option):
            result.append(
                Attempt(
                    region,
                    template,
                    market,
                    tuple(overrides),
                    pool.placement_group,
                    capacity_reservation_id=pool.capacity_reservation_id,
                    capacity_block=pool.capacity_block,
                    efa=pool.efa,
                )
            )
    return tuple(result)


def single_az_attempts(attempts: Sequence[Attempt]) -> tuple[Attempt, ...]:
    """Each attempt split into one attempt per AZ (in override order), each all-or-nothing in its AZ.

    Nodes of one multi-node job then never straddle AZs or regions: MPI, NCCL and EFA traffic stays inside one AZ
    (and one cluster placement group when the pool has one; such a pool has a single AZ anyway).
    """
    result: list[Attempt] = []
    for attempt in attempts:
        for az in dict.fromkeys(o.availability_zone for o in attempt.overrides):
            overrides = tuple(o for o in attempt.overrides if o.availability_zone == az)
            result.append(replace(attempt, overrides=overrides, single_availability_zone=True))
    return tuple(result)


def plan_launch(
    nodes: Sequence[str],
    pools: Sequence[PoolManifest],
    cooling: Iterable[tuple[str, str]],
    job_groups: Sequence[Sequence[str]] = (),
    spread_pools: Collection[str] = (),
) -> LaunchPlan:
    """Group nodes by pool and order each pool's attempts, skipping (pool, AZ) pairs in capacity cool-down.

    `job_groups` are the node sets of multi-node jobs from the resume file (all-or-nothing); a node in several jobs
    belongs to the first. A pool's jobs go first, packed whole into launches (`job_batches`) with single-AZ attempts
    (`single_az_attempts`: each job whole in one AZ or not at all), then the pool's other nodes with the usual
    attempts; unless the pool's key is in `spread_pools` (pools whose jobs may span AZs): then one launch, the jobs'
    nodes first.
    """
    by_prefix = node_pools(pools)
    cooling_by_pool: dict[str, set[str]] = {}
    for pool_key, az in cooling:
        cooling_by_pool.setdefault(pool_key, set()).add(az)
    wanted = dict.fromkeys(nodes)
    unknown: list[str] = []
    per_pool: dict[str, list[str]] = {}
    pool_by_key: dict[str, PoolManifest] = {}
    for node in wanted:
        pool = pool_of(node, by_prefix)
        if pool is None:
            unknown.append(node)
            continue
        per_pool.setdefault(pool.key, []).append(node)
        pool_by_key[pool.key] = pool
    seen: set[str] = set()
    groups_by_pool: dict[str, list[tuple[str, ...]]] = {}
    for group in job_groups:
        members = [n for n in dict.fromkeys(group) if n in wanted and n not in seen and n not in unknown]
        if len(group) < 2 or not members:
            continue
        seen.update(members)
        by_key: dict[str, list[str]] = {}
        for node in members:
            pool = pool_of(node, by_prefix)
            if pool is not None:
                by_key.setdefault(pool.key, []).append(node)
        for key, part in by_key.items():
            groups_by_pool.setdefault(key, []).append(tuple(part))
    launches: list[PoolLaunch] = []
    cooling_nodes: list[str] = []
    for key, pool_nodes in per_pool.items():
        attempts = attempts_for(pool_by_key[key], cooling_by_pool.get(key, ()))
        if not attempts:
            cooling_nodes.extend(pool_nodes)
            continue
        groups = tuple(groups_by_pool.get(key, ()))
        grouped = [n for g in groups for n in g]
        in_group = set(grouped)
        rest = tuple(n for n in pool_nodes if n not in in_group)
        if groups and key not in spread_pools:
            # whole jobs in launches of growing size (job_batches), each job all-or-nothing in one AZ; the pool's
            # other nodes apart
            one_az = single_az_attempts(attempts)
            for batch in job_batches(groups):
                launches.append(PoolLaunch(key, tuple(n for g in batch for n in g), batch, one_az))
            if rest:
                launches.append(PoolLaunch(key, rest, (), attempts))
            continue
        launches.append(PoolLaunch(key, tuple(grouped) + rest, groups, attempts))
    return LaunchPlan(tuple(launches), tuple(unknown), tuple(cooling_nodes))


def job_batches(
    groups: Sequence[tuple[str, ...]], limit: int = CREATE_FLEET_MAX_TARGET
) -> list[tuple[tuple[str, ...], ...]]:
    """Whole jobs packed into launches of growing size: the first job alone (its nodes get their addresses soonest),
    then each launch up to twice the nodes of the one before, up to `limit` (what one fleet request takes; a bigger
    job goes alone). N nodes in jobs of k nodes take about log2(N/k) + 1 launch calls instead of N/k, and the
    launcher runs them at once (launcher.LAUNCH_WORKERS), so the small first ones are not queued behind the big ones.
    """
    result: list[tuple[tuple[str, ...], ...]] = []
    current: list[tuple[str, ...]] = []
    size = cap = 0
    for group in groups:
        if current and size + len(group) > cap:
            result.append(tuple(current))
            cap = min(2 * size, limit)
            current, size = [], 0
        current.append(group)
        size += len(group)
    if current:
        result.append(tuple(current))
    return result


def batches(count: int, limit: int) -> list[int]:
    """Split `count` into batch sizes of at most `limit` (as few as possible)."""
    full, rest = divmod(count, limit)
    return [limit] * full + ([rest] if rest else [])


def remaining_overrides(attempt: Attempt, failed: set[tuple[str, str, str]]) -> tuple[Override, ...]:
    """The attempt's overrides not yet failed with a capacity error as (market, instance type, subnet)."""
    return tuple(o for o in attempt.overrides if (attempt.market, o.instance_type, o.subnet_id) not in failed)


def assign(launch: PoolLaunch, instance_ids: Sequence[str]) -> Assignment:
    """Give instances to nodes: each job group whole or not at all (in order), then the other nodes, best effort."""
    free = list(instance_ids)
    assigned: dict[str, str] = {}
    failed: list[str] = []
    grouped: set[str] = set()
    for group in launch.groups:
        grouped.update(group)
        if len(free) >= len(group):
            for node in group:
                assigned[node] = free.pop(0)
        else:
            failed.extend(group)
    for node in launch.nodes:
        if node in grouped:
            continue
        if free:
            assigned[node] = free.pop(0)
        else:
            failed.append(node)
    return Assignment(assigned, tuple(failed), tuple(free))


def ready_to_bind(
    job_groups: Sequence[Sequence[str]],
    unbound: Mapping[str, str],
    failed: Iterable[str],
    undecided: Collection[str],
) -> Assignment:
    """Which launched nodes can be bound now, while other pools still launch (so early pools are bound at once).

    `unbound`: node -> instance id of nodes launched and not yet bound; `failed`: nodes that will get no instance;
    `undecided`: nodes of pools not launched yet. A node in no multi-node job is ready at once. A job's nodes wait
    until none of them is undecided; then all are ready, or, if any failed, none: their instances are released
    (`extra`) and they fail too (`failed`), and so on for the other jobs those nodes belong to.
    """
    multi = [tuple(g) for g in job_groups if len(g) >= 2]
    waiting = set(undecided)
    failed_set = set(failed)
    released: dict[str, str] = {}
    changed = True
    while changed:
        changed = False
        for group in multi:
            if failed_set.intersection(group) and waiting.isdisjoint(group):
                for node in group:
                    if node in unbound and node not in released:
                        released[node] = unbound[node]
                        failed_set.add(node)
                        changed = True
    ready: dict[str, str] = {}
    for node, instance in unbound.items():
        if node in released:
            continue
        if all(waiting.isdisjoint(g) for g in multi if node in g):
            ready[node] = instance
    return Assignment(ready, tuple(released), tuple(released.values()))


def cooldown_azs(attempts: Sequence[Attempt], failed: set[tuple[str, str, str]]) -> list[str]:
    """AZs where every override of every attempt failed with a capacity error in this resume."""
    tried: dict[str, bool] = {}
    for attempt in attempts:
        for o in attempt.overrides:
            ok = (attempt.market, o.instance_type, o.subnet_id) in failed
            tried[o.availability_zone] = tried.get(o.availability_zone, True) and ok
    return [az for az, all_failed in tried.items() if all_failed]


def power_down_reason(code: str, request_id: str) -> str:
    """The Slurm node reason for nodes we could not launch (ParallelCluster style `(Code:...)` prefix)."""
    return f"(Code:{code}) Failure when resuming nodes [request {request_id}]"
