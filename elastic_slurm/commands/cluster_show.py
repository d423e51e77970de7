"""`elastic-slurm cluster status FILE|NAME [--region R] [--output json]` and `cluster list [--region R] [--output
json]`: what is deployed, as text or as JSON with stable keys (docs/cluster-lifecycle.md lists them).

status JSON: `{"clusters": [{"name", "region", "deployed", "config_url", "stacks": [{"name", "region", "status",
"reason"}], "controllers": [{"name", "instance_id", "state", "instance_type", "private_ip"}]}]}`
list JSON:   `{"region", "clusters": [{"name", "stack_status", "config_url"}]}` (null where there is none)
"""

from __future__ import annotations

import argparse
import json
from dataclasses import asdict
from typing import Any

from cluster_config import load
from elastic_slurm.commands.arg_checks import is_cluster_name, is_file, shown
from elastic_slurm.errors import OperationFailed, UserError
from elastic_slurm.lifecycle.aws import default_region
from elastic_slurm.lifecycle.status import ClusterStatus, cluster_status, list_clusters

OUTPUTS = ("text", "json")


def add_output(parser: argparse.ArgumentParser) -> None:
    """The `--output text|json` option."""
    parser.add_argument("--output", choices=OUTPUTS, default="text", help="json: one JSON object on stdout")


def status_lines(status: ClusterStatus) -> list[str]:
    """The block `cluster status` prints for one cluster."""
    if not status.found:
        return [f"cluster {status.name} ({status.region}): not deployed"]
    lines = [
        f"cluster {status.name} ({status.region})",
        f"  config: {status.config_url or '(no config-url parameter)'}",
    ]
    lines.append("  stacks:" if status.stacks else "  stacks: none")
    width = max((len(s.name) for s in status.stacks), default=0)
    for stack in status.stacks:
        reason = f"  {stack.reason}" if stack.reason and "FAILED" in stack.status else ""
        lines.append(f"    {stack.name:<{width}}  {stack.region:<14} {stack.status}{reason}")
    lines.append("  controllers:" if status.controllers else "  controllers: none")
    for c in status.controllers:
        lines.append(f"    {c.name or '-'}  {c.instance_id}  {c.state}  {c.instance_type}  {c.private_ip or '-'}")
    return lines


def status_json(status: ClusterStatus) -> dict[str, Any]:
    """One cluster of `cluster status --output json`."""
    return {
        "name": status.name,
        "region": status.region,
        "deployed": status.found,
        "config_url": status.config_url,
        "stacks": [asdict(s) for s in status.stacks],
        "controllers": [
            {
                "name": c.name,
                "instance_id": c.instance_id,
                "state": c.state,
                "instance_type": c.instance_type,
                "private_ip": c.private_ip,
            }
            for c in status.controllers
        ],
    }


def run_status(args: argparse.Namespace) -> int:
    """Print the status of the file's clusters, or of cluster NAME in --region; exit 1 when none is deployed."""
    target = str(args.target)
    if is_file(target):
        config = load(target)
        found = [cluster_status(c.name, c.region, tuple(r.region for r in c.remote_regions)) for c in config.clusters]
    else:
        if not is_cluster_name(target):
            raise UserError(f"FILE|NAME: {shown(target)} is neither a file nor a cluster name")
        found = [cluster_status(target, default_region(args.region))]
    if args.output == "json":
        print(json.dumps({"clusters": [status_json(s) for s in found]}, indent=2))
    if not any(s.found for s in found):
        where = ", ".join(f"{s.name} ({s.region})" for s in found)
        raise OperationFailed(f"not deployed: {where}: no es-NAME-* stack, controller or config-url parameter")
    if args.output == "text":
        for status in found:
            print("\n".join(status_lines(status)))
    return 0


def run_list(args: argparse.Namespace) -> int:
    """One line (or JSON object) per cluster of the region: name, cluster stack status, config URL."""
    region = default_region(args.region)
    rows = list_clusters(region)
    if args.output == "json":
        clusters = [
            {"name": name, "stack_status": stack.status if stack is not None else None, "config_url": url}
            for name, stack, url in rows
        ]
        print(json.dumps({"region": region, "clusters": clusters}, indent=2))
        return 0
    if not rows:
        print(f"no clusters in {region}")
        return 0
    width = max(len(name) for name, _, _ in rows)
    for name, stack, url in rows:
        state = stack.status if stack is not None else "(no cluster stack)"
        print(f"{name:<{width}}  {state:<20}  {url or '(no config-url parameter)'}")
    return 0
