"""PropagateResourceLimitsExcept=MEMLOCK (issue 31): a job's locked-memory limit is slurmd's (its unit sets
LimitMEMLOCK=infinity), not the submit host's 8 MiB, so EFA/NCCL jobs can pin their buffers; a site's own
PropagateResourceLimits or PropagateResourceLimitsExcept stands alone (Slurm ignores the former beside the latter)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.unit.test_render import render_small

EXCEPT = "PropagateResourceLimitsExcept=MEMLOCK"


def _lines(**overrides: Any) -> list[str]:
    return render_small(**overrides).slurm_conf.splitlines()


def test_jobs_keep_slurmds_memlock_limit() -> None:
    lines = _lines()
    assert lines.count(EXCEPT) == 1
    assert not any(line.startswith("PropagateResourceLimits=") for line in lines)
    assert EXCEPT in render_small().fragments["launch"].splitlines()


@pytest.mark.parametrize(
    ("settings", "expected"),
    [
        ({"PropagateResourceLimits": "NONE"}, ["PropagateResourceLimits=NONE"]),
        ({"PropagateResourceLimitsExcept": "MEMLOCK,STACK"}, ["PropagateResourceLimitsExcept=MEMLOCK,STACK"]),
    ],
)
def test_a_sites_own_propagation_setting_stands_alone(settings: dict[str, str], expected: list[str]) -> None:
    lines = _lines(slurm_settings=settings)
    assert [line for line in lines if line.startswith("PropagateResourceLimits")] == expected
