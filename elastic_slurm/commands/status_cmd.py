"""`elastic-slurm status --manifest M`: the cluster manager's counters and the node ↔ instance table.

Counters come from the manager's metrics file in the manifest's state_dir; the table from one `scontrol show nodes`
and one filtered DescribeInstances per region (the same observation the manager makes). When Slurm or AWS cannot be
reached the counters are still printed, with one line saying what is missing, and the exit code is 1.
"""

from __future__ import annotations

import argparse
import logging
from typing import Any

from elastic_slurm.errors import UserError
from slurm_plugin.manifest import ManifestError, load_manifest


def register(sub: Any) -> None:
    """Add `status`."""
    status = sub.add_parser("status", help="cluster manager counters and the Slurm node / EC2 instance table")
    status.add_argument("--manifest", required=True, metavar="M", help="runtime manifest (JSON) of the cluster")
    status.add_argument("--counters-only", action="store_true", help="do not ask Slurm and EC2 for the table")
    status.set_defaults(func=run_status)


def run_status(args: argparse.Namespace) -> int:
    """Print counters, then the table; exit 1 when Slurm or EC2 could not be asked."""
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
    print(f"cluster {manifest.cluster} ({manifest.home_region})")
    print("\n".join(counters_text(metrics.load(manifest.state_dir))))
    if args.counters_only:
        return 0
    slurm = ScontrolManager(manifest.slurm_bin_dir, manifest.slurm_conf)
    settings = Settings(cluster=manifest.cluster, pools=tuple(manifest.pools))
    manager = Manager(manifest, settings, slurm, Ec2(manifest.aws_endpoint_url), host="")
    try:
        nodes = slurm.nodes()
    except SlurmError as exc:
        print(f"slurm: unavailable ({exc})")
        return 1
    try:
        instances = manager.observe()
    except (ClientError, BotoCoreError) as exc:
        print(f"ec2: unavailable ({' '.join(str(exc).split())})")
        return 1
    print("\n".join(nodes_table(nodes, instances, manifest.pools)))
    return 0
