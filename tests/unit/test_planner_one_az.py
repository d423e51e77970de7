"""Multi-node jobs of a pool launch in one AZ, all or nothing, unless the pool may spread (pure, no mocks)."""

from __future__ import annotations

from slurm_plugin.manifest import Location, PoolManifest
from slurm_plugin.powersave.planner import Attempt, Override, plan_launch, single_az_attempts


def _pool(name: str, azs: list[str], option: str = "on_demand", placement_group: str | None = None) -> PoolManifest:
    return PoolManifest(
        partition="p",
        pool=name,
        node_prefix=f"p-{name}-",
        min_nodes=0,
        max_nodes=10,
        instance_types=["c7i.large", "c6i.large"],
        purchase_option=option,
        locations=[
            Location(region=az[:-1], availability_zone=az, subnet_id=f"subnet-{az}", launch_template_id=f"lt-{az[:-1]}")
            for az in azs
        ],
        placement_group=placement_group,
    )


SPREAD = _pool("cpu", ["us-east-1a", "us-east-1b", "us-west-2a"], option="spot_then_on_demand")


def _where(attempts: tuple[Attempt, ...]) -> list[tuple[str, str, tuple[str, ...], bool]]:
    return [
        (a.region, a.market, tuple(dict.fromkeys(o.availability_zone for o in a.overrides)), a.single_availability_zone)
        for a in attempts
    ]


def test_a_multi_node_job_gets_one_all_or_nothing_attempt_per_az_in_preference_order() -> None:
    plan = plan_launch(["p-cpu-1", "p-cpu-2"], [SPREAD], [], [["p-cpu-1", "p-cpu-2"]])
    (launch,) = plan.launches
    assert _where(launch.attempts) == [
        ("us-east-1", "spot", ("us-east-1a",), True),
        ("us-east-1", "spot", ("us-east-1b",), True),
        ("us-east-1", "on-demand", ("us-east-1a",), True),
        ("us-east-1", "on-demand", ("us-east-1b",), True),
        ("us-west-2", "spot", ("us-west-2a",), True),
        ("us-west-2", "on-demand", ("us-west-2a",), True),
    ]


def test_single_az_attempts_keep_the_instance_type_preference_inside_each_az() -> None:
    plan = plan_launch(["p-cpu-1", "p-cpu-2"], [SPREAD], [], [["p-cpu-1", "p-cpu-2"]])
    first = plan.launches[0].attempts[0]
    assert [(o.instance_type, o.subnet_id) for o in first.overrides] == [
        ("c7i.large", "subnet-us-east-1a"),
        ("c6i.large", "subnet-us-east-1a"),
    ]


def test_nodes_without_a_multi_node_job_may_spread_over_every_az() -> None:
    plan = plan_launch(["p-cpu-1", "p-cpu-2"], [SPREAD], [])
    first = plan.launches[0].attempts[0]
    assert not first.single_availability_zone
    assert {o.availability_zone for o in first.overrides} == {"us-east-1a", "us-east-1b"}


def test_a_pool_allowed_to_spread_keeps_its_multi_az_attempts_for_jobs_too() -> None:
    plan = plan_launch(["p-cpu-1", "p-cpu-2"], [SPREAD], [], [["p-cpu-1", "p-cpu-2"]], spread_pools={"p-cpu"})
    assert len(plan.launches[0].attempts) == 4
    assert not any(a.single_availability_zone for a in plan.launches[0].attempts)


def test_cooling_azs_are_left_out_of_the_single_az_attempts() -> None:
    plan = plan_launch(["p-cpu-1", "p-cpu-2"], [SPREAD], [("p-cpu", "us-east-1a")], [["p-cpu-1", "p-cpu-2"]])
    assert [azs for _, _, azs, _ in _where(plan.launches[0].attempts)] == [("us-east-1b",)] * 2 + [("us-west-2a",)] * 2


def test_a_placement_group_pool_keeps_its_group_on_every_single_az_attempt() -> None:
    pool = _pool("hpc", ["us-east-1a"], placement_group="pg-hpc")
    plan = plan_launch(["p-hpc-1", "p-hpc-2"], [pool], [], [["p-hpc-1", "p-hpc-2"]])
    assert [(a.placement_group, a.single_availability_zone) for a in plan.launches[0].attempts] == [("pg-hpc", True)]


def test_only_the_pool_carrying_the_job_is_restricted() -> None:
    other = _pool("mem", ["us-east-1a", "us-east-1b"])
    plan = plan_launch(["p-cpu-1", "p-cpu-2", "p-mem-1"], [SPREAD, other], [], [["p-cpu-1", "p-cpu-2"]])
    by_pool = {launch.pool: launch for launch in plan.launches}
    assert all(a.single_availability_zone for a in by_pool["p-cpu"].attempts)
    assert not any(a.single_availability_zone for a in by_pool["p-mem"].attempts)


def test_each_job_is_its_own_all_or_nothing_launch_and_single_nodes_are_not_held_to_one_az() -> None:
    jobs = [["p-cpu-1", "p-cpu-2"], ["p-cpu-3", "p-cpu-4", "p-cpu-5"]]
    nodes = [f"p-cpu-{i}" for i in range(1, 9)]
    plan = plan_launch(nodes, [SPREAD], [], jobs)
    assert [(launch.nodes, launch.groups) for launch in plan.launches] == [
        (("p-cpu-1", "p-cpu-2"), (("p-cpu-1", "p-cpu-2"),)),
        (("p-cpu-3", "p-cpu-4", "p-cpu-5"), (("p-cpu-3", "p-cpu-4", "p-cpu-5"),)),
        (("p-cpu-6", "p-cpu-7", "p-cpu-8"), ()),
    ]
    assert all(a.single_availability_zone for launch in plan.launches[:2] for a in launch.attempts)
    assert not any(a.single_availability_zone for a in plan.launches[2].attempts)


def test_splitting_an_attempt_without_overrides_yields_nothing() -> None:
    empty = Attempt("us-east-1", "lt-1", "spot", ())
    assert single_az_attempts([empty]) == ()
    one = Attempt("us-east-1", "lt-1", "spot", (Override("c7i.large", "subnet-a", "us-east-1a", 0),))
    assert single_az_attempts([one]) == (Attempt("us-east-1", "lt-1", "spot", one.overrides, None, True),)
