"""Which availability zone each powered-up node's instance is in, from the plugin's event log.

Slurm does not know a node's AZ (a node may launch in any AZ of its pool; names never encode it). Resume records a
`node_launched` line per node with its instance's AZ, and every termination a `terminated` line with the instance id
(slurm_plugin/telemetry/events.py); folding them gives node -> AZ for the nodes that have an instance now. The log
is read incrementally, so a request costs the lines appended since the last one.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from slurm_plugin.telemetry import events


def fold(zones: dict[str, tuple[str, str]], records: Iterable[Mapping[str, Any]]) -> None:
    """Apply records to `zones` (node -> (instance id, AZ)) in place."""
    for record in records:
        kind = record.get("event")
        if kind == "node_launched" and record.get("node"):
            zones[str(record["node"])] = (str(record.get("instance_id", "")), str(record.get("az", "")))
        elif kind == "terminated":
            gone = str(record.get("instance_id", ""))
            for node in [n for n, (iid, _az) in zones.items() if iid == gone or n == record.get("node")]:
                del zones[node]


class NodeZones:
    """node -> AZ of the nodes with a live instance, kept up to date from the event log of `state_dir`."""

    def __init__(self, state_dir: str | Path) -> None:
        self._tail = events.Tail(state_dir)
        self._zones: dict[str, tuple[str, str]] = {}
        self._lock = threading.Lock()

    def current(self) -> dict[str, str]:
        """node -> AZ now."""
        with self._lock:
            fold(self._zones, self._tail.read())
            return {node: az for node, (_iid, az) in sorted(self._zones.items())}
