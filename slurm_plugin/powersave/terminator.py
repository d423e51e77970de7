"""The suspend / resume-fail worker's core: find the instances behind nodes, terminate them, reset the nodes.

Instances are found per region with one filtered DescribeInstances (cluster + pool tags), then matched to nodes by
instance id, from the node map the resume worker writes before it sets NodeAddr. NodeAddr (what Slurm knows) is used
only for a node the map does not know, and never for an instance the map gives to another node: a private IP is
reused by EC2, so an address alone can name another node's new instance. A node resumed again after the request (its
map entry bound later, read anew before terminating and before resetting) keeps its instance, NodeAddr and entry.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from slurm_plugin.hostlists import compress
from slurm_plugin.manifest import TAG_POOL, Manifest
from slurm_plugin.powersave import node_names, state
from slurm_plugin.powersave.ec2 import Ec2, Instance
from slurm_plugin.powersave.planner import node_pools, pool_of
from slurm_plugin.powersave.slurm import Slurm, SlurmError, SlurmNode
from slurm_plugin.telemetry import events

log = logging.getLogger("slurm-suspend")
# EC2's LaunchTime is in whole seconds (cut, not rounded): an instance whose LaunchTime is less than this before the
# request may have been launched after it
LAUNCH_TIME_SLACK = 1.0


@dataclass
class TerminateOutcome:
    """What a suspend did."""

    terminated: dict[str, str] = field(default_factory=dict)  # instance id -> node
    not_found: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


def terminate_nodes(
    manifest: Manifest,
    nodes: Sequence[str],
    ec2: Ec2,
    slurm: Slurm,
    label: str,
    reason: str | None = None,
    requested_at: float | None = None,
    cause: str = "suspend",
) -> TerminateOutcome:
    """Terminate the instances behind `nodes` (every region of their pools), reset NodeAddr, optionally power down.

    `requested_at` (epoch seconds): instances launched after it belong to a later resume and are left alone.
    `cause` names why in the event log (suspend, resume-fail)."""
    outcome = TerminateOutcome()
    by_prefix = node_pools(manifest.pools)
    pool_key = {}
    for node in nodes:
        pool = pool_of(node, by_prefix)
        if pool is not None:
            pool_key[node] = pool.key
    try:
        known = slurm.show_nodes(list(pool_key))
    except SlurmError as exc:
        log.warning("%s: %s; matching by the node map only", label, exc)
        known = {}
    recorded = state.node_map(manifest.state_dir)
    owners = {entry["instance_id"]: node for node, entry in recorded.items()}  # every node's, not only these
    cached = {n: recorded[n] for n in pool_key if n in recorded}  # forgotten only once their instance is gone
    by_id: dict[str, str] = {str(entry.get("instance_id", "")): node for node, entry in cached.items()}
    by_ip = {info.addr: name for name, info in known.items() if info.addr != name and name not in cached}
    regions: dict[str, set[str]] = {}
    for pool in manifest.pools:
        if pool.key in pool_key.values():
            for loc in pool.locations:
                regions.setdefault(loc.region, set()).add(pool.key)
    settled: set[str] = set()  # regions described and handled without error
    kept: set[str] = set()  # nodes resumed again after the request: their instance, NodeAddr and map entry stay

    def resumed_again() -> set[str]:  # read anew before each step that a later resume's binding must stop
        if requested_at is None:
            return set()
        fresh = state.node_map(manifest.state_dir)
        return {n for n in pool_key if float(fresh.get(n, {}).get("bound_at") or 0) > requested_at}

    for region, keys in regions.items():
        try:
            instances = ec2.cluster_instances(region, manifest.cluster, keys)
        except Exception as exc:
            log.error("%s: describe in %s failed: %s", label, region, exc)
            outcome.errors.append(region)
            continue
        targets: dict[str, str] = {}
        for instance in instances:
            owner = by_id.get(instance.instance_id)
            if owner is None and instance.instance_id not in owners:
                owner = by_ip.get(instance.private_ip or "")
            if owner is None or instance.tags.get(TAG_POOL) != pool_key.get(owner):
                continue
            if requested_at is not None and _after(requested_at, instance, cached.get(owner)):
                kept.add(owner)
            targets[instance.instance_id] = owner
        kept |= resumed_again()  # e.g. bound again to the same instance while this describe ran
        for iid, owner in list(targets.items()):
            if owner in kept:
                log.warning("%s: %s of %s came after this request: left alone", label, iid, owner)
                del targets[iid]
        if not targets:
            settled.add(region)
            continue
        try:
            ec2.terminate(region, list(targets))
        except Exception as exc:
            log.error("%s: terminate in %s failed: %s", label, region, exc)
            outcome.errors.append(region)
            continue
        outcome.terminated.update(targets)
        settled.add(region)
        events.record(
            manifest.state_dir,
            [{"event": "terminated", "node": node, "pool": pool_key[node], "instance_id": iid, "region": region,
              "reason": cause} for iid, node in targets.items()],
        )  # fmt: skip
        log.info("%s: terminated %d instances in %s for %s", label, len(targets), region, compress(targets.values()))
    found = set(outcome.terminated.values())
    outcome.not_found = [n for n in pool_key if n not in found]
    if outcome.not_found:
        log.info("%s: no instance for %s", label, compress(outcome.not_found))
    kept |= resumed_again()
    if not _reset_nodes(slurm, [n for n in pool_key if n not in kept], known, label, reason):
        outcome.errors.append("slurm")
        return outcome
    # forgotten last: a worker killed before this point leaves the node map as it was, so the next resume finds a live
    # instance and binds it again, and the next suspend terminates it (forgetting first would make it an orphan); a
    # NodeAddr left behind always has its map entry, so no later suspend matches it by address alone (EC2 reuses
    # private IPs at once: that address may be another node's new instance by then)
    done = {n: e for n, e in cached.items() if e["region"] in settled and n not in kept}
    state.forget_instances(manifest.state_dir, list(done), only=done)
    if manifest.node_names_dir:
        node_names.withdraw(manifest.node_names_dir, [e["instance_id"] for e in done.values()])
    gone = {n: e["instance_id"] for n, e in done.items() if e["instance_id"] not in outcome.terminated}  # spot, lost
    events.record(
        manifest.state_dir,
        [{"event": "terminated", "node": n, "pool": pool_key[n], "instance_id": iid, "region": cached[n]["region"],
          "reason": "gone"} for n, iid in gone.items()],
    )  # fmt: skip
    return outcome


def _reset_nodes(slurm: Slurm, nodes: list[str], known: dict[str, SlurmNode], label: str, reason: str | None) -> bool:
    """NodeAddr/NodeHostname back to the node names (those Slurm did not already show reset), then, with `reason`,
    power them down; False when Slurm refused."""
    if not nodes:
        return True
    to_reset = [n for n in nodes if not known or known.get(n) is None or known[n].addr != n or known[n].hostname != n]
    try:
        if to_reset:
            slurm.reset_addresses(to_reset)
            log.info("%s: NodeAddr/NodeHostname reset for %s", label, compress(to_reset))
        if reason:
            slurm.power_down(nodes, reason)
            log.warning("%s: powered down %s: %s", label, compress(nodes), reason)
    except SlurmError as exc:
        log.error("%s: %s", label, exc)
        return False
    return True


def _after(requested_at: float, instance: Instance, entry: Mapping[str, str] | None) -> bool:
    """Whether the instance came to its node after the request: by when the resume bound it (the node map's
    `bound_at`, the controller's clock, to the millisecond), else (an instance matched by address, or an entry older
    than `bound_at`) by EC2's LaunchTime, within LAUNCH_TIME_SLACK counting as after (such an instance is left alone;
    if no node claims it, the cluster manager ends it as an orphan)."""
    bound_at = (entry or {}).get("bound_at")
    if bound_at:
        return float(bound_at) > requested_at
    return (instance.launch_time or 0) > requested_at - LAUNCH_TIME_SLACK
