"""Pure launch planning: pools x AZs x capacity cool-downs x all-or-nothing jobs vs best effort, without mocks."""

from __future__ import annotations

import pytest

from slurm_plugin.manifest import Location, PoolManifest
from slurm_plugin.powersave.planner import (
    Attempt,
    Override,
    PoolLaunch,
    assign,
    attempts_for,
    batches,
    cooldown_azs,
    node_pools,
    plan_launch,
    pool_of,
    ready_to_bind,
    remaining_overrides,
)


def _loc(az: str) -> Location:
    return Location(region=az[:-1], availability_zone=az, subnet_id=f"subnet-{az}", launch_template_id=f"lt-{az[:-1]}")


def _pool(name: str, types: list[str], azs: list[str], option: str = "on_demand", max_nodes: int = 100) -> PoolManifest:
    return PoolManifest(
        partition="p",
        pool=name,
        node_prefix=f"p-{name}-",
        min_nodes=0,
        max_nodes=max_nodes,
        instance_types=types,
        purchase_option=option,
        locations=[_loc(az) for az in azs],
    )


CPU = _pool("cpu", ["c7i.large", "c6i.large"], ["us-east-1a", "us-east-1b"])
GPU = _pool("gpu", ["g5.xlarge"], ["us-east-1a", "us-west-2a"], option="spot_then_on_demand")
POOLS = [CPU, GPU]


@pytest.mark.parametrize(
    ("node", "pool"),
    [
        ("p-cpu-1", "p-cpu"),
        ("p-cpu-100", "p-cpu"),
        ("p-cpu-101", None),
        ("p-cpu-0", None),
        ("p-cpu-01", None),
        ("p-cpu-", None),
        ("p-gpu-3", "p-gpu"),
        ("q-cpu-1", None),
    ],
)
def test_node_names_map_to_their_pool_or_to_none(node: str, pool: str | None) -> None:
    found = pool_of(node, node_pools(POOLS))
    assert (found.key if found else None) == pool


def test_overrides_prefer_instance_type_then_location_order() -> None:
    (attempt,) = attempts_for(CPU)
    assert [(o.instance_type, o.availability_zone, o.priority) for o in attempt.overrides] == [
        ("c7i.large", "us-east-1a", 0),
        ("c7i.large", "us-east-1b", 1),
        ("c6i.large", "us-east-1a", 2),
        ("c6i.large", "us-east-1b", 3),
    ]


def test_a_type_is_not_asked_for_in_the_azs_that_do_not_offer_it() -> None:
    pool = CPU.model_copy(update={"not_offered": {"c6i.large": ["us-east-1a"]}})
    (attempt,) = attempts_for(pool)
    assert [(o.instance_type, o.availability_zone) for o in attempt.overrides] == [
        ("c7i.large", "us-east-1a"),
        ("c7i.large", "us-east-1b"),
        ("c6i.large", "us-east-1b"),
    ]
    # a region none of whose remaining AZs offers any type gets no attempt at all
    gpu = GPU.model_copy(update={"not_offered": {"g5.xlarge": ["us-west-2a"]}})
    assert {a.region for a in attempts_for(gpu)} == {"us-east-1"}


def test_multi_region_pool_tries_each_region_with_spot_then_on_demand() -> None:
    shapes = [(a.region, a.market, a.launch_template_id) for a in attempts_for(GPU)]
    assert shapes == [
        ("us-east-1", "spot", "lt-us-east-1"),
        ("us-east-1", "on-demand", "lt-us-east-1"),
        ("us-west-2", "spot", "lt-us-west-2"),
        ("us-west-2", "on-demand", "lt-us-west-2"),
    ]


def test_cooling_az_is_left_out_of_the_overrides() -> None:
    plan = plan_launch(["p-cpu-1"], POOLS, [("p-cpu", "us-east-1a")])
    (launch,) = plan.launches
    assert {o.availability_zone for a in launch.attempts for o in a.overrides} == {"us-east-1b"}


def test_pool_with_every_az_cooling_is_not_launched() -> None:
    plan = plan_launch(["p-cpu-1", "p-gpu-1"], POOLS, [("p-cpu", "us-east-1a"), ("p-cpu", "us-east-1b")])
    assert [launch.pool for launch in plan.launches] == ["p-gpu"]
    assert plan.cooling_nodes == ("p-cpu-1",)


def test_nodes_are_grouped_by_pool_and_unknown_names_reported() -> None:
    plan = plan_launch(["p-cpu-2", "p-gpu-1", "nope-1", "p-cpu-1", "p-cpu-2"], POOLS, [])
    assert {launch.pool: launch.nodes for launch in plan.launches} == {
        "p-cpu": ("p-cpu-2", "p-cpu-1"),
        "p-gpu": ("p-gpu-1",),
    }
    assert plan.unknown_nodes == ("nope-1",)


def test_job_nodes_come_first_and_form_groups_per_pool() -> None:
    plan = plan_launch(["p-cpu-1", "p-cpu-2", "p-cpu-3", "p-gpu-1"], POOLS, [], [["p-cpu-3", "p-gpu-1"]])
    assert [(launch.pool, launch.nodes, launch.groups) for launch in plan.launches] == [
        ("p-cpu", ("p-cpu-3",), (("p-cpu-3",),)),  # the job's part in this pool, launched first, on its own
        ("p-cpu", ("p-cpu-1", "p-cpu-2"), ()),
        ("p-gpu", ("p-gpu-1",), (("p-gpu-1",),)),
    ]


def test_single_node_job_is_best_effort() -> None:
    plan = plan_launch(["p-cpu-1"], POOLS, [], [["p-cpu-1"]])
    assert plan.launches[0].groups == ()


LAUNCH = PoolLaunch("p-cpu", ("a1", "a2", "b1", "b2", "s1", "s2"), (("a1", "a2"), ("b1", "b2")), ())


@pytest.mark.parametrize(
    ("instances", "assigned", "failed", "extra"),
    [
        (6, ["a1", "a2", "b1", "b2", "s1", "s2"], [], 0),
        (8, ["a1", "a2", "b1", "b2", "s1", "s2"], [], 2),
        (5, ["a1", "a2", "b1", "b2", "s1"], ["s2"], 0),
        (3, ["a1", "a2", "s1"], ["b1", "b2", "s2"], 0),
        (1, ["s1"], ["a1", "a2", "b1", "b2", "s2"], 0),
        (0, [], ["a1", "a2", "b1", "b2", "s1", "s2"], 0),
    ],
)
def test_jobs_get_all_their_nodes_or_none_and_the_rest_is_best_effort(
    instances: int, assigned: list[str], failed: list[str], extra: int
) -> None:
    result = assign(LAUNCH, [f"i-{n}" for n in range(instances)])
    assert sorted(result.assigned) == sorted(assigned)
    assert sorted(result.failed) == sorted(failed)
    assert len(result.extra) == extra
    assert len(set(result.assigned.values())) == len(result.assigned)


def test_job_failing_in_one_pool_releases_its_nodes_in_other_pools() -> None:
    settled = ready_to_bind([["c1", "g1"]], {"c1": "i-1", "c2": "i-2"}, ["g1"], undecided=())
    assert settled.assigned == {"c2": "i-2"}
    assert settled.extra == ("i-1",)
    assert set(settled.failed) == {"c1"}


def test_a_pool_is_bound_at_once_except_nodes_whose_job_waits_for_a_later_pool() -> None:
    groups = [["c1", "g1"], ["c2", "c3"]]
    first = ready_to_bind(groups, {"c1": "i-1", "c2": "i-2", "c3": "i-3", "c4": "i-4"}, [], undecided={"g1"})
    assert first.assigned == {"c2": "i-2", "c3": "i-3", "c4": "i-4"} and first.extra == ()
    later = ready_to_bind(groups, {"c1": "i-1", "g1": "i-5"}, [], undecided=())
    assert later.assigned == {"c1": "i-1", "g1": "i-5"}


def test_a_released_node_fails_every_other_job_it_belongs_to() -> None:
    groups = [["a1", "b1"], ["a1", "a2"]]
    settled = ready_to_bind(groups, {"a1": "i-1", "a2": "i-2", "a3": "i-3"}, ["b1"], undecided=())
    assert settled.assigned == {"a3": "i-3"}
    assert sorted(settled.extra) == ["i-1", "i-2"]


@pytest.mark.parametrize(("count", "limit", "expected"), [(0, 10, []), (10, 10, [10]), (25, 10, [10, 10, 5])])
def test_batches_are_as_few_as_the_limit_allows(count: int, limit: int, expected: list[int]) -> None:
    assert batches(count, limit) == expected


def _attempt(market: str = "on-demand") -> Attempt:
    overrides = (
        Override("c7i.large", "subnet-a", "az-a", 0),
        Override("c7i.large", "subnet-b", "az-b", 1),
        Override("c6i.large", "subnet-a", "az-a", 2),
    )
    return Attempt("r", "lt", market, overrides)  # type: ignore[arg-type]


def test_failed_overrides_are_dropped_for_the_next_call() -> None:
    left = remaining_overrides(_attempt(), {("on-demand", "c7i.large", "subnet-a")})
    assert [(o.instance_type, o.subnet_id) for o in left] == [("c7i.large", "subnet-b"), ("c6i.large", "subnet-a")]


def test_failure_in_another_market_does_not_drop_an_override() -> None:
    assert len(remaining_overrides(_attempt(), {("spot", "c7i.large", "subnet-a")})) == 3


@pytest.mark.parametrize(
    ("failed", "cooling"),
    [
        (set(), []),
        ({("on-demand", "c7i.large", "subnet-a")}, []),
        ({("on-demand", "c7i.large", "subnet-a"), ("on-demand", "c6i.large", "subnet-a")}, ["az-a"]),
        (
            {
                ("on-demand", "c7i.large", "subnet-a"),
                ("on-demand", "c6i.large", "subnet-a"),
                ("on-demand", "c7i.large", "subnet-b"),
            },
            ["az-a", "az-b"],
        ),
    ],
)
def test_an_az_cools_down_only_when_every_type_failed_there(
    failed: set[tuple[str, str, str]], cooling: list[str]
) -> None:
    assert sorted(cooldown_azs([_attempt()], failed)) == cooling
