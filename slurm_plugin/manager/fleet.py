"""Fleet stop/start: the operator's wish (`elastic-slurm fleet stop|start`, an SSM parameter), applied by the manager.

STOPPED: every partition is set DOWN (jobs may still be submitted and stay pending with reason PartitionDown; none
starts), running jobs finish, idle nodes are powered down — always-on ones too — and none is powered up. RUNNING
again: the partitions the manager set DOWN (remembered in `fleet.json` in the state dir) are set UP and the always-on
nodes come back; a partition an administrator set DOWN stays theirs. An unreadable parameter keeps the last wish
applied.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

from botocore.exceptions import BotoCoreError, ClientError

from slurm_plugin.naming import fleet_parameter
from slurm_plugin.powersave.state import read_json, write_json

RUNNING, STOPPED = "RUNNING", "STOPPED"
STATE_FILE = "fleet.json"
LOG = logging.getLogger("slurm-clustermgr")


class PartitionSlurm(Protocol):
    """The partition calls fleet stop/start makes."""

    def partitions(self) -> dict[str, str]:
        """Partition name -> state (UP, DOWN, DRAIN, INACTIVE)."""

    def set_partitions(self, names: Sequence[str], state: str) -> None:
        """`scontrol update partitionname=P state=STATE` for each."""


def applied(state_dir: str) -> str:
    """The wish the manager applied last (RUNNING when it never stopped the fleet)."""
    return str(read_json(Path(state_dir) / STATE_FILE).get("applied", RUNNING))


def wanted(ssm: Any, cluster: str, state_dir: str) -> str:
    """The operator's wish: the parameter's value; absent → RUNNING; unreadable → the last wish applied."""
    try:
        value = str(ssm.get_parameter(Name=fleet_parameter(cluster))["Parameter"]["Value"]).strip().upper()
    except ClientError as exc:
        if exc.response.get("Error", {}).get("Code") == "ParameterNotFound":
            return RUNNING
        LOG.warning("fleet: cannot read %s (%s): keeping %s", fleet_parameter(cluster), exc, applied(state_dir))
        return applied(state_dir)
    except BotoCoreError as exc:
        LOG.warning("fleet: cannot read %s (%s): keeping %s", fleet_parameter(cluster), exc, applied(state_dir))
        return applied(state_dir)
    if value not in (RUNNING, STOPPED):
        LOG.warning("fleet: %s is %r, neither RUNNING nor STOPPED: keeping %s", fleet_parameter(cluster), value,
                    applied(state_dir))  # fmt: skip
        return applied(state_dir)
    return value


def apply_partitions(slurm: PartitionSlurm, wish: str, state_dir: str) -> list[str]:
    """Set the partitions for `wish`: STOPPED downs every partition still UP (and remembers which); RUNNING after a
    stop sets those back UP. Returns the partitions changed."""
    path = Path(state_dir) / STATE_FILE
    record = read_json(path)
    before = str(record.get("applied", RUNNING))
    downed = [str(name) for name in record.get("downed", [])]
    changed: list[str] = []
    if wish == STOPPED:
        changed = sorted(name for name, state in slurm.partitions().items() if state == "UP")
        if changed:
            slurm.set_partitions(changed, "DOWN")
            LOG.info("fleet stopped: partition(s) %s DOWN (jobs stay queued)", ",".join(changed))
        downed = sorted({*downed, *changed})
    elif before == STOPPED:
        states = slurm.partitions()
        changed = [name for name in downed if states.get(name) == "DOWN"]
        if changed:
            slurm.set_partitions(changed, "UP")
        LOG.info("fleet started: partition(s) %s UP", ",".join(changed) or "(none left down)")
        downed = []
    if wish != before or changed:
        write_json(path, {"applied": wish, "downed": downed})
    return changed
