"""`partitions[].allocation: exclusive` and the options it conflicts with (cluster_config/allocation_checks.py).

Each case is the small valid base config of test_config_invalid with an exclusive partition added, then a few keys
changed; it asserts the exact (path, message) list, and a few run through `elastic-slurm validate` (exit 2, one line
per problem, no traceback).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from elastic_slurm.cli import main
from tests.unit.test_config_invalid import C0, Case, broken, problems

WHOLE: dict[str, Any] = {
    "name": "whole",
    "allocation": "exclusive",
    "pools": [{"name": "c7i", "instance_types": ["c7i.large"], "max_nodes": 10}],
}
WITH_WHOLE = {f"{C0}.partitions[1]": WHOLE}
W = f"{C0}.partitions[1]"
CONFLICT = "conflicts with allocation 'exclusive': "
SHARING = "it already gives each job whole nodes, one job per node (allocation 'shared' lets you set this key)"
MEMORY = "its jobs get whole nodes and memory is not tracked there"


def with_whole(**changes: Any) -> dict[str, Any]:
    """The base config plus partition `whole` (exclusive), then `changes` (YAML path → value)."""
    return {**WITH_WHOLE, **changes}


VALID = [
    Case("exclusive_partition", with_whole()),
    Case("exclusive_with_its_own_slurm_settings", with_whole(**{f"{W}.slurm_settings": {"MaxNodes": 4}})),
    Case("cluster_select_type_in_cores", with_whole(**{f"{C0}.slurm_settings": {"SelectTypeParameters": "CR_Core"}})),
    Case(
        "cluster_select_type_in_sockets_with_flags",
        with_whole(**{f"{C0}.slurm_settings": {"SelectTypeParameters": "CR_Socket_Memory,CR_ONE_TASK_PER_CORE"}}),
    ),
    Case("requeue_preemption", with_whole(**{f"{C0}.preemption": {"type": "qos", "mode": "requeue"}})),
    # suspend needs preemption: type none never suspends
    Case("suspend_without_preemption", with_whole(**{f"{C0}.preemption": {"type": "none", "mode": "suspend"}})),
    # a shared partition over the exclusive one's nodes (and the other way round): a whole-node job waits for an
    # empty node, a shared job for free cores; without suspend nothing is left uncounted
    Case(
        "shared_partition_over_exclusive_nodes",
        with_whole(**{f"{C0}.partitions[2]": {"name": "over", "share_nodes_of": ["whole"]}}),
    ),
    # a shared partition may still set OverSubscribe itself (the custom-settings escape hatch)
    Case("shared_partition_sets_oversubscribe", {f"{C0}.partitions[0].slurm_settings": {"OverSubscribe": "FORCE:2"}}),
]

INVALID = [
    Case(
        "unknown_allocation",
        {f"{C0}.partitions[0].allocation": "whole"},
        [(f"{C0}.partitions[0].allocation", "Input should be 'shared' or 'exclusive'")],
    ),
    Case(
        "exclusive_sets_oversubscribe",
        with_whole(**{f"{W}.slurm_settings": {"OverSubscribe": "FORCE"}}),
        [(f"{W}.slurm_settings.OverSubscribe", f"'OverSubscribe' {CONFLICT}{SHARING}")],
    ),
    Case(
        "exclusive_sets_exclusive_user_in_any_case",
        with_whole(**{f"{W}.slurm_settings": {"exclusiveuser": "YES"}}),
        [(f"{W}.slurm_settings.exclusiveuser", f"'exclusiveuser' {CONFLICT}{SHARING}")],
    ),
    Case(
        "exclusive_sets_its_select_type",
        with_whole(**{f"{W}.slurm_settings": {"SelectTypeParameters": "CR_Core_Memory"}}),
        [
            (
                f"{W}.slurm_settings.SelectTypeParameters",
                f"'SelectTypeParameters' {CONFLICT}it sets the partition's SelectTypeParameters (cores or sockets, "
                "memory not tracked)",
            )
        ],
    ),
    Case(
        "exclusive_sets_memory_defaults_and_limits",
        with_whole(**{f"{W}.slurm_settings": {"DefMemPerNode": 4096, "MaxMemPerCPU": 2048, "MaxNodes": 2}}),
        [
            (f"{W}.slurm_settings.DefMemPerNode", f"'DefMemPerNode' {CONFLICT}{MEMORY}"),
            (f"{W}.slurm_settings.MaxMemPerCPU", f"'MaxMemPerCPU' {CONFLICT}{MEMORY}"),
        ],
    ),
    Case(
        "cluster_select_type_in_cpus",
        with_whole(**{f"{C0}.slurm_settings": {"SelectTypeParameters": "CR_CPU_Memory"}}),
        [
            (
                f"{C0}.slurm_settings.SelectTypeParameters",
                "'CR_CPU_Memory' makes Slurm ignore the SelectTypeParameters of exclusive partition(s) 'whole', so "
                "memory would stay tracked: use CR_Core, CR_Core_Memory, CR_Socket or CR_Socket_Memory",
            )
        ],
    ),
    Case(
        # CR_Core_Default_Dist_Block is a flag, not the unit: the unit here is CR_Memory
        "cluster_select_type_memory_only_with_a_core_flag",
        with_whole(**{f"{C0}.slurm_settings": {"SelectTypeParameters": "CR_Memory,CR_Core_Default_Dist_Block"}}),
        [(f"{C0}.slurm_settings.SelectTypeParameters", "'CR_Memory,CR_Core_Default_Dist_Block' makes Slurm ignore")],
    ),
    Case(
        "suspend_preemption",
        with_whole(**{f"{C0}.preemption": {"type": "partition_priority", "mode": "suspend"}}),
        [
            (
                f"{C0}.preemption.mode",
                "suspend keeps a preempted job's memory in use, which nothing counts on the nodes of exclusive "
                "partition(s) 'whole' (memory is not tracked there): use requeue or cancel",
            )
        ],
    ),
]


@pytest.mark.parametrize("case", VALID, ids=lambda c: c.id)
def test_exclusive_partition_configs_without_conflicts_are_valid(case: Case) -> None:
    assert problems(broken(case)) == []


@pytest.mark.parametrize("case", INVALID, ids=lambda c: c.id)
def test_conflicting_option_is_reported_with_its_path(case: Case) -> None:
    found = problems(broken(case))
    assert [path for path, _ in found] == [path for path, _ in case.expected], found
    for (_, message), (_, want) in zip(found, case.expected, strict=True):
        assert message.startswith(want), message


def test_the_same_keys_on_a_shared_partition_are_valid() -> None:
    settings = {"DefMemPerNode": 4096, "MaxMemPerCPU": 2048, "SelectTypeParameters": "CR_Core"}
    assert problems(broken(Case("shared", {f"{C0}.partitions[0].slurm_settings": settings}))) == []


@pytest.mark.parametrize("case_id", ["exclusive_sets_oversubscribe", "suspend_preemption"])
def test_validate_prints_one_line_per_conflict_and_exits_2(
    case_id: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    case = next(c for c in INVALID if c.id == case_id)
    path = tmp_path / f"{case.id}.yaml"
    path.write_text(yaml.safe_dump(broken(case), sort_keys=False), encoding="utf-8")
    assert main(["validate", str(path)]) == 3
    out, err = capsys.readouterr()
    assert out == ""
    ((want_path, want_message),) = case.expected
    assert err.splitlines() == [f"{path}: {want_path}: {want_message}"]
