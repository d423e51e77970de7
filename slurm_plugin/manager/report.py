"""Pure text for `elastic-slurm status`: the manager's counters and a node ↔ instance table."""

from __future__ import annotations

from collections.abc import Sequence

from slurm_plugin.manager.metrics import Metrics
from slurm_plugin.manager.model import Instance, Node
from slurm_plugin.manager.reconcile import claimed_ips
from slurm_plugin.manifest import PoolManifest
from slurm_plugin.powersave.planner import node_pools, pool_of


def counters_text(metrics: Metrics) -> list[str]:
    """`name value` lines, then capacity errors by pool|AZ."""
    data = metrics.to_json()
    lines = [f"last cycle: {metrics.last_cycle or 'never'} ({metrics.last_actions} action(s))"]
    lines += [f"  {name:<28} {value}" for name, value in data["counters"].items()]
    errors = data["capacity_errors"]
    lines.append("capacity errors by pool|AZ:" + ("" if errors else " none"))
    lines += [f"  {key:<28} {value}" for key, value in errors.items()]
    return lines


def _table(rows: list[list[str]]) -> list[str]:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return ["  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip() for row in rows]


def nodes_table(nodes: Sequence[Node], instances: Sequence[Instance], pools: Sequence[PoolManifest]) -> list[str]:
    """One row per node of the manifest's pools that is not plainly powered down, then unclaimed instances."""
    by_prefix = node_pools(pools)
    by_ip = {i.private_ip: i for i in instances if i.private_ip and i.live}
    by_ip.update({i.private_ip: i for i in instances if i.private_ip and i.private_ip not in by_ip})
    rows = [["NODE", "STATE", "ADDRESS", "INSTANCE", "EC2 STATE", "REASON"]]
    hidden = 0
    for node in nodes:
        if pool_of(node.name, by_prefix) is None:
            continue
        state = "+".join([node.state, *sorted(node.flags - {"CLOUD"})])
        if node.powered_down and not node.reason and node.state == "IDLE":
            hidden += 1
            continue
        inst = by_ip.get(node.addr) if node.addr and not node.powered_down else None
        iid, istate = (inst.instance_id, inst.state) if inst else ("-", "-")
        rows.append([node.name, state, node.addr or "-", iid, istate, node.reason or "-"])
    lines = _table(rows)
    lines.append(f"({hidden} node(s) powered down and idle not shown)")
    claimed = claimed_ips(nodes)
    loose = [i for i in instances if not (i.private_ip and i.private_ip in claimed)]
    if loose:
        lines.append("instances no node claims (orphans after the grace period):")
        header = ["INSTANCE", "REGION", "EC2 STATE", "ADDRESS", "POOL", "LAUNCHED"]
        body = [
            [
                i.instance_id,
                i.region,
                i.state,
                i.private_ip or "-",
                i.pool or "-",
                i.launch_time.isoformat("T", "seconds"),
            ]
            for i in loose
        ]
        lines += _table([header, *body])
    return lines
