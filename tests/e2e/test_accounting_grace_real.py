"""`preemption.grace_time` with `type: qos` reaches a real slurmdbd: `slurm-accounting-apply`'s commands set sacctmgr
GraceTime on the preempted QOS, read it back in sacctmgr's own format, and a second apply changes nothing.

The daemons are those of tests/e2e/test_accounting_real.py (its module-scoped `dbd` fixture: own MariaDB, munged,
slurmdbd and slurmctld on free ports), started once for this module.
"""

from __future__ import annotations

import pytest

from cluster_config import parse
from slurm_plugin.accounting.diff import desired_state
from slurm_plugin.accounting.sacctmgr import apply, plan
from tests.e2e.test_accounting_real import Dbd, dbd, make_config

pytestmark = pytest.mark.e2e
__all__ = ["dbd"]  # the fixture, imported so pytest finds it here


def test_qos_grace_time_is_set_on_the_preempted_qos_and_then_stable(dbd: Dbd) -> None:
    data = make_config().model_dump(mode="json")
    for cluster in data["clusters"]:
        cluster["preemption"] = {"type": "qos", "mode": "requeue", "grace_time": 90}
    config = parse(data)
    assert apply(dbd.sacctmgr(), desired_state(config))
    grace = dict(line.split("|") for line in dbd.show("qos", "format=name,gracetime"))
    # `interactive` preempts `normal` (slurmdbd's own QOS): the preempted one carries the grace time
    assert (grace["normal"], grace["interactive"]) == ("00:01:30", "00:00:00")
    assert plan(dbd.sacctmgr(), desired_state(config))[1] == []

    data["clusters"][0]["preemption"]["grace_time"] = data["clusters"][1]["preemption"]["grace_time"] = 30
    changed = parse(data)
    changes = apply(dbd.sacctmgr(), desired_state(changed))
    assert [c.summary for c in changes] == ["qos normal: gracetime=30"]
    assert "normal|00:00:30" in dbd.show("qos", "format=name,gracetime")
