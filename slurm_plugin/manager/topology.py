"""Keep Slurm's topology in step with EC2's network topology, for the pools with `network_topology`.

One step of each manager cycle, after reconcile's actions (docs/topology.md):
1. ask DescribeInstanceTopology only about running instances of those pools whose network nodes are not known yet:
   by instance id, at most 100 a call, at most MAX_CALLS calls a cycle (the rest wait for the next cycle);
2. remember the answers in `topology.json` in the state dir — an instance keeps its place while it runs; an empty
   answer (an instance type EC2 gives no topology for, or not yet) is asked again only while the instance is young;
3. render the tree (slurm_plugin/render/topology.py) with every node of the cluster and the powered-up nodes of
   running instances placed; only when its text differs from topology.conf, apply it:
   - Slurm 25.05 and later: compare with the running slurmctld's tree (`scontrol show topology`, every cycle:
     slurmctld puts a cloud node back in its configured place when it powers down) and move only the nodes whose
     place differs (`scontrol update NodeName=<nodes> Topology=default:ec2:<network nodes>`: one call per place;
     switches it lacks are created), then rewrite topology.conf when its text changed (in place: it belongs to
     SlurmUser, the directory does not) so that a restart reads the same tree. No restart, no re-run prologs;
   - older releases (and a live move Slurm refused): rewrite the file and run `scontrol reconfigure` — since 23.11 that
     restarts slurmctld and re-runs the PrologSlurmctld of every CONFIGURING job — at most once every
     RECONFIGURE_GAP; a change inside the gap waits (the file is left as it was, so a later cycle applies it).
Nothing changed: no AWS call, no write, no reconfigure (on 25.05+ one `scontrol show topology`). A failed
reconfigure puts the previous text back, so the next cycle tries again.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, Protocol

from botocore.exceptions import BotoCoreError, ClientError

from slurm_plugin.manager.model import Instance, Node
from slurm_plugin.manager.topology_live import (
    LiveTopology,
    Reconfigurer,
    live_capable,
    moves,
    topology_value,
)
from slurm_plugin.manifest import Manifest, PoolManifest
from slurm_plugin.powersave.slurm import SlurmError
from slurm_plugin.powersave.state import read_json, write_json
from slurm_plugin.render.topology import TOPOLOGY_CONF_NAME, node_paths, pool_node_names, render_topology

LOG = logging.getLogger("slurm-clustermgr")
MAX_IDS_PER_CALL = 100  # DescribeInstanceTopology: "Maximum 100 explicitly specified instance IDs"
MAX_CALLS = 5  # DescribeInstanceTopology calls a cycle at most (500 new instances); more wait for the next cycle
RETRY_EMPTY_FOR = timedelta(minutes=10)  # an instance with no network nodes is asked again while this young
CACHE_FILE = "topology.json"
DEFAULT_SLURM_CONF = "/etc/slurm/slurm.conf"
COUNTER = "topology_updates"
RECONFIGURE_GAP = timedelta(minutes=5)  # older releases: at most one `scontrol reconfigure` (a restart) this often


class RegionalEc2(Protocol):
    """EC2 clients by region (slurm_plugin.powersave.ec2.Ec2 satisfies it)."""

    def client(self, region: str) -> Any:
        """The EC2 client of a region."""


@dataclass(frozen=True)
class Known:
    """An instance's network nodes (top first; empty: EC2 gave none) and when EC2 was asked."""

    nodes: tuple[str, ...]
    asked: datetime


@dataclass
class TopologyResult:
    """What one step did: AWS calls, instances asked about, nodes placed, whether the file changed."""

    calls: int = 0
    asked: int = 0
    placed: int = 0
    changed: bool = False
    reconfigured: bool = False
    moved: int = 0  # nodes moved in the running slurmctld (25.05+)
    deferred: bool = False  # a change left for a later cycle (a reconfigure came less than RECONFIGURE_GAP ago)
    failures: list[str] = field(default_factory=list)

    @property
    def counters(self) -> list[str]:
        """The manager counters this step bumps: one `topology_updates` per tree applied (live or reconfigure)."""
        return [COUNTER] if self.reconfigured or self.moved else []


# ---------------------------------------------------------------- decisions (pure)
def topology_pools(manifest: Manifest) -> list[PoolManifest]:
    """The pools whose nodes are placed by EC2's network topology."""
    return [pool for pool in manifest.pools if pool.network_topology]


def to_ask(
    instances: Sequence[Instance], keys: set[str], known: Mapping[str, Known], now: datetime
) -> dict[str, list[str]]:
    """Region -> running instances of the pools `keys` whose network nodes are unknown, or empty and still young."""
    wanted: dict[str, list[str]] = {}
    for inst in instances:
        if inst.state != "running" or inst.pool not in keys:
            continue
        seen = known.get(inst.instance_id)
        if seen is None or (not seen.nodes and now - inst.launch_time < RETRY_EMPTY_FOR):
            wanted.setdefault(inst.region, []).append(inst.instance_id)
    return {region: sorted(ids) for region, ids in sorted(wanted.items())}


def placements(
    nodes: Sequence[Node], instances: Sequence[Instance], manifest: Manifest, known: Mapping[str, Known]
) -> dict[str, tuple[str, ...]]:
    """Node -> network nodes, for the powered-up nodes of topology pools whose running instance EC2 placed (a node
    is linked to its instance by NodeAddr = the instance's private IP, within the node's pool)."""
    running = {(i.pool, i.private_ip): i for i in instances if i.state == "running" and i.private_ip}
    placed: dict[str, tuple[str, ...]] = {}
    for node in nodes:
        pool = manifest.pool_of_node(node.name)
        if pool is None or not pool.network_topology or not node.up or not node.addr:
            continue
        inst = running.get((pool.key, node.addr))
        seen = known.get(inst.instance_id) if inst is not None else None
        if seen is not None and seen.nodes:
            placed[node.name] = seen.nodes
    return placed


def tree_text(manifest: Manifest, placed: Mapping[str, Sequence[str]]) -> str:
    """topology.conf for every node of the manifest's pools (the same text `render` writes when nothing is placed)."""
    pools = pool_node_names([(p.key, p.node_prefix, p.max_nodes) for p in manifest.pools])
    return render_topology(manifest.cluster, pools, placed)


def topology_path(manifest: Manifest) -> Path:
    """topology.conf beside the slurm.conf slurmctld reads (Slurm looks for it there only)."""
    return Path(manifest.slurm_conf or DEFAULT_SLURM_CONF).parent / TOPOLOGY_CONF_NAME


# ---------------------------------------------------------------- EC2
def describe_network_nodes(client: Any, ids: Sequence[str], budget: int) -> tuple[dict[str, tuple[str, ...]], int]:
    """(instance id -> network nodes, calls made) for `ids`, 100 a call, following NextToken, at most `budget` calls;
    an id the answers did not reach is left out (asked again next cycle)."""
    found: dict[str, tuple[str, ...]] = {}
    calls = 0
    for start in range(0, len(ids), MAX_IDS_PER_CALL):
        chunk = list(ids[start : start + MAX_IDS_PER_CALL])
        token: str | None = None
        complete = False
        answered: dict[str, tuple[str, ...]] = {}
        while calls < budget:
            request: dict[str, Any] = {"InstanceIds": chunk}
            if token:
                request["NextToken"] = token
            reply = client.describe_instance_topology(**request)
            calls += 1
            for raw in reply.get("Instances", []):
                answered[str(raw["InstanceId"])] = tuple(str(n) for n in raw.get("NetworkNodes") or ())
            token = reply.get("NextToken")
            if not token:
                complete = True
                break
        found.update(answered)
        if complete:  # an id EC2 did not list (gone meanwhile) has no place
            found.update({i: () for i in chunk if i not in answered})
        if calls >= budget:
            break
    return found, calls


# ---------------------------------------------------------------- state and file
def load_known(state_dir: str) -> dict[str, Known]:
    """The remembered answers (a missing or broken file reads as empty: it is only a cache)."""
    entries = read_json(Path(state_dir) / CACHE_FILE).get("instances", {})
    known: dict[str, Known] = {}
    for instance_id, raw in entries.items() if isinstance(entries, dict) else ():
        try:
            known[str(instance_id)] = Known(tuple(str(n) for n in raw["nodes"]), datetime.fromisoformat(raw["asked"]))
        except (KeyError, TypeError, ValueError):
            continue
    return known


def save_known(state_dir: str, known: Mapping[str, Known]) -> None:
    """Persist the answers (atomically; the time of the last reconfigure is kept)."""
    data = {i: {"nodes": list(k.nodes), "asked": k.asked.isoformat()} for i, k in sorted(known.items())}
    Path(state_dir).mkdir(parents=True, exist_ok=True)
    kept = {k: v for k, v in read_json(Path(state_dir) / CACHE_FILE).items() if k == "reconfigured_at"}
    write_json(Path(state_dir) / CACHE_FILE, {**kept, "instances": data})


def last_reconfigure(state_dir: str) -> datetime | None:
    """When this step last ran `scontrol reconfigure` (None: never, or not remembered)."""
    try:
        return datetime.fromisoformat(str(read_json(Path(state_dir) / CACHE_FILE)["reconfigured_at"]))
    except (KeyError, ValueError):
        return None


def _remember_reconfigure(state_dir: str, at: datetime) -> None:
    Path(state_dir).mkdir(parents=True, exist_ok=True)
    data = read_json(Path(state_dir) / CACHE_FILE)
    write_json(Path(state_dir) / CACHE_FILE, {**data, "reconfigured_at": at.isoformat()})


def write_in_place(path: Path, text: str) -> None:
    """Replace the file's content without a rename (SlurmUser may write the file, not its directory)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(text)


def _read(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8")
    except OSError:  # missing or unreadable: rewritten (a write that fails too is reported)
        return None


# ---------------------------------------------------------------- one step
def sync(
    manifest: Manifest,
    nodes: Sequence[Node],
    instances: Sequence[Instance],
    ec2: RegionalEc2,
    slurm: Reconfigurer,
    now: datetime,
    dry_run: bool = False,
) -> TopologyResult:
    """Ask EC2 about new instances, place the nodes, and rewrite topology.conf + reconfigure when the tree changed."""
    result = TopologyResult()
    keys = {pool.key for pool in topology_pools(manifest)}
    if not keys:
        return result
    known = load_known(manifest.state_dir)
    for region, ids in to_ask(instances, keys, known, now).items():
        try:
            answers, calls = describe_network_nodes(ec2.client(region), ids, MAX_CALLS - result.calls)
        except (ClientError, BotoCoreError) as exc:
            result.failures.append(f"DescribeInstanceTopology in {region}: {' '.join(str(exc).split())}")
            continue
        result.calls += calls
        result.asked += len(answers)
        known.update({i: Known(nodes, now) for i, nodes in answers.items()})
        if result.calls >= MAX_CALLS:
            break
    if result.calls:
        LOG.info("topology: asked EC2 about %d instance(s) in %d call(s)", result.asked, result.calls)
    alive = {i.instance_id for i in instances}
    gone = [i for i in known if i not in alive]
    known = {i: k for i, k in known.items() if i in alive}
    placed = placements(nodes, instances, manifest, known)
    result.placed = len(placed)
    text = tree_text(manifest, placed)
    path = topology_path(manifest)
    before = _read(path)
    result.changed = text != before
    if dry_run:
        if result.changed:
            LOG.info("topology: would rewrite %s (%d node(s) placed) and reconfigure", path, len(placed))
        return result
    if result.asked or gone:  # new answers, or instances that went (forgotten)
        save_known(manifest.state_dir, known)
    live = live_capable(slurm)
    if live is not None and _move_live(path, text, before, live, result):
        return result
    if result.changed:
        _reconfigure(path, text, before, slurm, result, manifest.state_dir, now)
    return result


def _move_live(path: Path, text: str, before: str | None, live: LiveTopology, result: TopologyResult) -> bool:
    """Slurm 25.05+: move the nodes whose place in slurmctld's tree differs from `text`, then write the file when
    it changed; False when Slurm refused a move (then the reconfigure path applies the tree)."""
    try:
        current = node_paths(live.show_topology())
    except SlurmError as exc:  # the file says what was applied last
        result.failures.append(f"topology: scontrol show topology failed ({exc}); comparing with {path}")
        current = node_paths(before or "")
    try:
        for place, nodes in moves(current, text).items():
            live.set_topology(nodes, topology_value(place))
            result.moved += len(nodes)
    except SlurmError as exc:
        result.failures.append(f"topology: scontrol update Topology= failed ({exc}); reconfiguring instead")
        return False
    if not result.changed:
        return True
    try:
        write_in_place(path, text)
    except OSError as exc:  # slurmctld has the tree; the next cycle writes again
        result.failures.append(f"topology: cannot write {path}: {exc.strerror} (it must belong to SlurmUser)")
        return True
    LOG.info(
        "topology: %d node(s) moved in slurmctld's tree, %s rewritten (%d placed)", result.moved, path, result.placed
    )
    return True


def _reconfigure(
    path: Path,
    text: str,
    before: str | None,
    slurm: Reconfigurer,
    result: TopologyResult,
    state_dir: str,
    now: datetime,
) -> None:
    """Write the new tree and reconfigure, at most once every RECONFIGURE_GAP; on failure put the previous text back
    (the next cycle tries again)."""
    last = last_reconfigure(state_dir)
    if last is not None and timedelta(0) <= now - last < RECONFIGURE_GAP:
        result.deferred = True
        LOG.info("topology: tree changed; reconfigure deferred (the last one was %s ago)", now - last)
        return
    try:
        write_in_place(path, text)
    except OSError as exc:
        result.failures.append(f"topology: cannot write {path}: {exc.strerror} (it must belong to SlurmUser)")
        return
    try:
        slurm.reconfigure()
    except SlurmError as exc:
        result.failures.append(f"topology: scontrol reconfigure failed: {exc}")
        if before is not None:
            try:
                write_in_place(path, before)
            except OSError as restore:
                result.failures.append(f"topology: cannot restore {path}: {restore.strerror}")
        return
    result.reconfigured = True
    _remember_reconfigure(state_dir, now)
    LOG.info("topology: %s rewritten (%d node(s) placed), slurmctld reconfigured", path, result.placed)
