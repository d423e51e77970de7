"""Hands launched instances to nodes: the node map first (so suspend and the manager know the instance by id), then
the node-name files and Slurm's NodeAddr; terminates what no node may keep; records the cost ledger.

The resume worker (launcher.py) owns one Binder per resume and calls it from one thread only: `take` with each
launch's answer as it comes back, `settle` to bind what is ready. `already_running` binds nodes again to the live
instance an earlier resume gave them; an instance EC2 does not return is gone, never alive (issue 32).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

from slurm_plugin.hostlists import compress
from slurm_plugin.manifest import TAG_POOL, Manifest
from slurm_plugin.powersave import node_names, state
from slurm_plugin.powersave.ec2 import Ec2, Instance
from slurm_plugin.powersave.planner import ready_to_bind
from slurm_plugin.powersave.slurm import Slurm, SlurmError
from slurm_plugin.telemetry import events

log = logging.getLogger("slurm-resume")
NAME_ATTEMPTS, NAME_PAUSE = 3, 1.0  # writing the node-name files (node_names.py): tries, seconds between
LOOKUP_FAILED_CODE = "InstanceLookupFailed"  # a node whose recorded instance EC2 would not describe: not launched


@dataclass
class ResumeOutcome:
    """What a resume did (for the log summary, tests and the benchmark)."""

    request_id: str
    launched: dict[str, Instance] = field(default_factory=dict)
    failed: dict[str, str] = field(default_factory=dict)  # node -> error code
    busy: list[str] = field(default_factory=list)
    unknown: list[str] = field(default_factory=list)
    terminated: list[str] = field(default_factory=list)
    down: dict[str, int] = field(default_factory=dict)  # node -> ResumeAfter seconds (its pool has no capacity)


def terminate(ec2: Ec2, instances: Sequence[Instance], request_id: str, why: str, state_dir: str) -> list[str]:
    """Terminate `instances` region by region; the ids really terminated (failures are logged)."""
    by_region: dict[str, list[str]] = {}
    for instance in instances:
        by_region.setdefault(instance.region, []).append(instance.instance_id)
    done: list[str] = []
    for region, ids in by_region.items():
        try:
            ec2.terminate(region, ids)
            done.extend(ids)
            log.info("request %s: terminated %d %s instances in %s", request_id, len(ids), why, region)
            events.record(
                state_dir,
                [{"event": "terminated", "node": "", "pool": i.tags.get(TAG_POOL, ""), "instance_id": i.instance_id,
                  "region": region, "reason": why} for i in instances if i.instance_id in ids],
            )  # fmt: skip
        except Exception as exc:
            log.error("request %s: could not terminate %s in %s: %s", request_id, ids, region, exc)
    return done


@dataclass
class Binder:
    """The binding state of one resume: what was launched, what waits for its job, what must go."""

    manifest: Manifest
    ec2: Ec2
    slurm: Slurm
    outcome: ResumeOutcome
    clock: Callable[[], float] = time.time
    started: float = 0.0  # when the resume began (the event log's launch latency)
    known: dict[str, Instance] = field(default_factory=dict)  # instance id -> instance
    unbound: dict[str, str] = field(default_factory=dict)  # node -> instance id, launched, not yet bound
    extras: list[str] = field(default_factory=list)  # instance ids to terminate
    launched_in: dict[str, tuple[str, str]] = field(default_factory=dict)  # instance id -> (pool, market), this resume

    def take(
        self,
        pool: str,
        instances: Sequence[Instance],
        markets: dict[str, str],
        assigned: dict[str, str],
        extra: Sequence[str],
    ) -> None:
        """One launch's answer: its instances, which node gets which (not bound yet), which must go."""
        self.known.update({i.instance_id: i for i in instances})
        self.launched_in.update({iid: (pool, market) for iid, market in markets.items()})
        self.unbound.update(assigned)
        self.extras.extend(extra)

    def already_running(self, nodes: Sequence[str]) -> tuple[list[str], list[str]]:
        """(nodes still to launch, nodes not to launch now). A node whose recorded instance is alive (an earlier
        resume launched it) is bound to it again instead of getting a second one. A recorded instance EC2 does not
        return is gone: its node is launched anew (it was described when it was bound, so it is not eventual
        consistency). When EC2 cannot be asked (the describe keeps failing), the node is not launched now: it fails
        with LOOKUP_FAILED_CODE, so Slurm powers it down and suspend ends the recorded instance if it still lives."""
        known = state.node_map(self.manifest.state_dir)
        recorded = {n: known[n] for n in nodes if n in known}
        by_region: dict[str, list[str]] = {}
        for entry in recorded.values():
            by_region.setdefault(entry["region"], []).append(entry["instance_id"])
        alive: dict[str, Instance] = {}
        unsure: set[str] = set()
        for region, ids in by_region.items():
            answer = self.ec2.recorded(region, ids)
            alive.update(answer.alive)
            unsure.update(answer.unsure)
        again: dict[str, str] = {}
        for node, entry in recorded.items():
            seen = alive.get(entry["instance_id"])
            if seen is None:
                continue
            if not seen.private_ip:  # pending without an address yet: the one the node map recorded
                alive[seen.instance_id] = seen = replace(seen, private_ip=entry.get("private_ip") or None)
            if seen.private_ip:
                again[node] = seen.instance_id
        held = [n for n, e in recorded.items() if e["instance_id"] in unsure]
        if held:
            log.error(
                "request %s: %d nodes' recorded instances could not be looked up (not launched now): %s",
                self.outcome.request_id, len(held), compress(held),
            )  # fmt: skip
        if again:
            self.known.update(alive)
            log.warning(
                "request %s: %d nodes already have a live instance (not launched again): %s",
                self.outcome.request_id, len(again), compress(again),
            )  # fmt: skip
            self._bind(again)
        skip = set(again) | set(held)
        return [n for n in nodes if n not in skip], held

    def settle(self, job_groups: Sequence[Sequence[str]], codes: dict[str, str], undecided: set[str]) -> None:
        """Bind what is ready, release the instances of jobs that cannot run whole, terminate the extras."""
        share = ready_to_bind(job_groups, self.unbound, codes, undecided)
        for node in share.failed:
            cause = next((codes[n] for g in job_groups if node in g for n in g if n in codes), "JobIncomplete")
            codes.setdefault(node, cause)
            del self.unbound[node]
        self.extras.extend(share.extra)
        for node in share.assigned:
            del self.unbound[node]
        if self.extras:
            instances = [self.known[i] for i in self.extras]
            self.outcome.terminated.extend(
                terminate(self.ec2, instances, self.outcome.request_id, "unneeded", self.manifest.state_dir)
            )
            self.extras.clear()
        if share.assigned:
            self._bind(share.assigned)

    def _bind(self, assigned: dict[str, str]) -> None:
        request_id = self.outcome.request_id
        addresses = {node: self.known[iid].private_ip or "" for node, iid in assigned.items()}
        bound_at = f"{self.clock():.3f}"  # a suspend asked for before this leaves the instance alone (terminator.py)
        state.remember_instances(
            self.manifest.state_dir,
            {
                node: {"instance_id": iid, "region": self.known[iid].region, "private_ip": addresses[node],
                       "bound_at": bound_at}
                for node, iid in assigned.items()
            },
        )  # fmt: skip
        if self.manifest.node_names_dir:  # each instance's bootstrap reads its node name here, not from Slurm
            self._publish_names({iid: node for node, iid in assigned.items()})
        try:
            self.slurm.set_addresses(addresses)
            log.info("request %s: NodeAddr set for %d nodes %s", request_id, len(addresses), compress(addresses))
        except SlurmError as exc:
            log.error("request %s: %s (instances kept; resume-fail will clean up)", request_id, exc)
        self.outcome.launched.update({node: self.known[iid] for node, iid in assigned.items()})
        self._record(assigned)

    def _publish_names(self, names: dict[str, str]) -> None:
        """The node-name files, retried (the shared file system may hiccup): without them the instances cannot find
        their nodes, do not register, and resume-fail ends them at ResumeTimeout."""
        directory = self.manifest.node_names_dir or ""
        for attempt in range(NAME_ATTEMPTS):
            try:
                node_names.publish(directory, names)
                return
            except OSError as exc:
                if attempt + 1 == NAME_ATTEMPTS:
                    log.error(
                        "request %s: node names not written to %s: %s (those nodes will not register)",
                        self.outcome.request_id, directory, exc,
                    )  # fmt: skip
                else:
                    time.sleep(NAME_PAUSE)

    def _record(self, assigned: dict[str, str]) -> None:
        """One `node_launched` line per node given an instance this resume launched (the cost ledger)."""
        seconds = round(max(0.0, self.clock() - self.started), 3)
        records = []
        for node, iid in assigned.items():
            if iid not in self.launched_in:
                continue  # bound again to an instance an earlier resume launched (and recorded)
            pool, market = self.launched_in[iid]
            instance = self.known[iid]
            records.append(
                {"event": "node_launched", "request": self.outcome.request_id, "pool": pool, "node": node,
                 "instance_id": iid, "instance_type": instance.instance_type, "az": instance.availability_zone,
                 "region": instance.region, "market": market, "seconds": seconds}
            )  # fmt: skip
        events.record(self.manifest.state_dir, records)
