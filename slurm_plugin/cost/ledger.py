"""Which EC2 instance ran a Slurm node when, from the plugin's event log (slurm_plugin/telemetry/events.py).

A `node_launched` record opens a tenancy (node, instance, type, AZ, region, market) at its time; the `terminated`
record of that instance closes it, and so does the node's next `node_launched` (a lost `terminated` line must not
make two instances run one node). A job is priced on the tenancy that overlaps it most (`tenancy_for`): the launch
is recorded when the node is bound, a few seconds after slurmctld may have stamped the job's start.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any

Ledger = dict[str, list["Tenancy"]]  # node -> tenancies, oldest first


@dataclass(frozen=True)
class Tenancy:
    """One instance backing one node from `start` to `end` (None: no end recorded yet)."""

    node: str
    pool: str
    instance_id: str
    instance_type: str
    region: str
    az: str
    market: str  # "spot" | "on-demand" (a capacity block is priced as on-demand)
    start: float
    end: float | None = None

    def overlap(self, start: float, end: float) -> float:
        """Seconds of [start, end] this tenancy covers."""
        stop = end if self.end is None else min(end, self.end)
        return max(0.0, stop - max(start, self.start))

    def covers(self, moment: float) -> bool:
        """True when the tenancy runs at `moment`."""
        return self.start <= moment and (self.end is None or moment < self.end)


def build_ledger(events: Iterable[Mapping[str, Any]]) -> Ledger:
    """Every node's tenancies from the event log's records (any order; other kinds are ignored)."""
    ledger: Ledger = {}
    ordered = sorted((e for e in events if e.get("event") in ("node_launched", "terminated")), key=lambda e: e["t"])
    for event in ordered:
        if event["event"] == "node_launched":
            _launched(ledger, event)
        else:
            _terminated(ledger, event)
    return ledger


def _launched(ledger: Ledger, event: Mapping[str, Any]) -> None:
    node = str(event.get("node", ""))
    if not node:
        return
    tenancies = ledger.setdefault(node, [])
    if tenancies and tenancies[-1].end is None:
        tenancies[-1] = replace(tenancies[-1], end=float(event["t"]))
    tenancies.append(
        Tenancy(
            node=node,
            pool=str(event.get("pool", "")),
            instance_id=str(event.get("instance_id", "")),
            instance_type=str(event.get("instance_type", "")),
            region=str(event.get("region", "")),
            az=str(event.get("az", "")),
            market=str(event.get("market", "on-demand")),
            start=float(event["t"]),
        )
    )


def _terminated(ledger: Ledger, event: Mapping[str, Any]) -> None:
    instance_id = str(event.get("instance_id", ""))
    tenancies = ledger.get(str(event.get("node", "")), [])
    for index, tenancy in enumerate(tenancies):
        if tenancy.instance_id == instance_id and tenancy.end is None:
            tenancies[index] = replace(tenancy, end=float(event["t"]))
            return


def tenancy_for(ledger: Ledger, node: str, start: float, end: float) -> Tenancy | None:
    """The tenancy of `node` that overlaps [start, end] most (for an instant, the one running then); None if none."""
    tenancies = ledger.get(node, [])
    if end <= start:
        running = [t for t in tenancies if t.covers(start)]
        return running[-1] if running else None
    best = max(tenancies, key=lambda t: t.overlap(start, end), default=None)
    return best if best is not None and best.overlap(start, end) > 0 else None
