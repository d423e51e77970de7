"""`elastic-slurm status --manifest M [--output json]`: the cluster manager's counters and the node ↔ instance table.

Counters come from the manager's metrics file in the manifest's state_dir; the table from one `scontrol show nodes`
and one filtered DescribeInstances per region (the same observation the manager makes). When Slurm or AWS cannot be
reached the counters are still printed, with one line saying what is missing, and the exit code is 1.

`--output json` prints one object (docs/cli.md): `{"cluster", "region", "metrics": {"counters", "capacity_errors",
"capacity_seen", "last_cycle", "last_actions"}, "nodes": [{"name", "state", "flags", "address", "instance_id", "ec2_state",
"reason"}], "unclaimed_instances": [{"instance_id", "region", "ec2_state", "address", "pool", "launched"}],
"unavailable"}` — every node of the manifest's pools (also the powered-down idle ones the text hides); `nodes` and
`unclaimed_instances` are null with `--counters-only` or when Slurm or EC2 could not be asked (`unavailable` says
which, else null).
"""

from __future__ import annotations

import argparse
import json
import logging
from collections.abc import Sequence
from typing import Any

from elastic_slurm.errors import UserError
from slurm_plugin.manifest import ManifestError, PoolManifest, load_manifest


def register(sub: Any) -> None:
    """Add `status`."""
    status = sub.add_parser("status", help="cluster manager counters and the Slurm node / EC2 instance table")
    status.add_argument("--manifest", required=True, metavar="M", help="runtime manifest (JSON) of the cluster")
    status.add_argument("--counters-only", action="store_true", help="do not ask Slurm and EC2 for the table")
    status.add_argument("--output", choices=("text", "json"), default="text", help="json: one JSON object on stdout")
    status.set_defaults(func=run_status)


def nodes_json(nodes: Sequence[Any], instances: Sequence[Any], pools: Sequence[PoolManifest]) -> dict[str, Any]:
    """`nodes` and `unclaimed_instances` of the JSON: the same matching as the text table
    (slurm_plugin/manager/report.py `nodes_table`), every node of the pools."""
    from slurm_plugin.manager.reconcile import claimed_ips
    from slurm_plugin.powersave.planner import node_pools, pool_of

    by_prefix = node_pools(pools)
    by_ip = {i.private_ip: i for i in instances if i.private_ip and i.live}
    by_ip.update({i.private_ip: i for i in instances if i.private_ip and i.private_ip not in by_ip})
    rows = []
    for node in nodes:
        if pool_of(node.name, by_prefix) is None:
            continue
        inst = by_ip.get(node.addr) if node.addr and not node.powered_down else None
        rows.append(
            {
                "name": node.name,
                "state": node.state,
                "flags": sorted(node.flags),
                "address": node.addr,
                "instance_id": inst.instance_id if inst else None,
                "ec2_state": inst.state if inst else None,
                "reason": node.reason or None,
            }
        )
    claimed = claimed_ips(nodes)
    loose = [
        {
            "instance_id": i.instance_id,
            "region": i.region,
            "ec2_state": i.state,
            "address": i.private_ip,
            "pool": i.pool or None,
            "launched": i.launch_time.isoformat("T", "seconds"),
        }
        for i in instances
        if not (i.private_ip and i.private_ip in claimed)
    ]
    return {"nodes": rows, "unclaimed_instances": loose}


def run_status(args: argparse.Namespace) -> int:
    """Print counters, then the table (or one JSON object); exit 1 when Slurm or EC2 could not be asked."""
    from botocore.exceptions import BotoCoreError, ClientError

    from slurm_plugin.manager import metrics
    from slurm_plugin.manager.daemon import Manager
    from slurm_plugin.manager.model import Settings
    from slurm_plugin.manager.report import counters_text, nodes_table
    from slurm_plugin.manager.slurm_port import ScontrolManager
    from slurm_plugin.powersave.ec2 import Ec2
    from slurm_plugin.powersave.slurm import SlurmError

    logging.getLogger("botocore").setLevel(logging.WARNING)  # no "Found credentials" chatter in the table
    try:
        manifest = load_manifest(args.manifest)
    except ManifestError as exc:
        raise UserError(f"--manifest: {exc}") from None
    counters = metrics.load(manifest.state_dir)
    doc: dict[str, Any] = {
        "cluster": manifest.cluster,
        "region": manifest.home_region,
        "metrics": counters.to_json(),
        "nodes": None,
        "unclaimed_instances": None,
        "unavailable": None,
    }

    def done(code: int, unavailable: str | None = None) -> int:
        if args.output == "json":
            print(json.dumps({**doc, "unavailable": unavailable}, indent=2, default=str))
        elif unavailable is not None:
            print(unavailable)
        return code

    if args.output == "text":
        print(f"cluster {manifest.cluster} ({manifest.home_region})")
        print("\n".join(counters_text(counters)))
    if args.counters_only:
        return done(0)
    slurm = ScontrolManager(manifest.slurm_bin_dir, manifest.slurm_conf)
    settings = Settings(cluster=manifest.cluster, pools=tuple(manifest.pools))
    manager = Manager(manifest, settings, slurm, Ec2(manifest.aws_endpoint_url), host="")
    try:
        nodes = slurm.nodes()
    except SlurmError as exc:
        return done(1, f"slurm: unavailable ({exc})")
    try:
        instances = manager.observe()
    except (ClientError, BotoCoreError) as exc:
        return done(1, f"ec2: unavailable ({' '.join(str(exc).split())})")
    if args.output == "json":
        doc |= nodes_json(nodes, instances, manifest.pools)
        return done(0)
    print("\n".join(nodes_table(nodes, instances, manifest.pools)))
    return 0
