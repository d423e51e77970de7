"""`elastic-slurm logs export NAME --region R --out DIR [--since 2h] [--node NODE]`: the cluster's CloudWatch Logs
(the Slurm logs every node ships) into one file per stream plus DIR/index.txt (elastic_slurm/log_export.py).

`--region` is the cluster's home region (where its log group is). `--node` keeps the streams of the instances EC2
knows under that name (elastic_slurm/cluster_instances.py: instance id, private IP, `ip-…` host name or Name tag), in
any state: logs outlive terminated instances. AWS calls go to `--endpoint-url`, else to $AWS_ENDPOINT_URL when set
(the local cloud's, `eval "$(elastic-slurm local env)"`), else to AWS.
"""

from __future__ import annotations

import argparse
import logging
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from elastic_slurm.cluster_instances import aws_failure, check_target
from elastic_slurm.errors import OperationFailed, UserError

DEFAULT_SINCE = "1h"


def register(sub: Any) -> None:
    """Add `logs export`."""
    logs = sub.add_parser("logs", help="the cluster's logs from CloudWatch Logs")
    actions = logs.add_subparsers(dest="action", required=True, parser_class=type(logs))
    export = actions.add_parser(
        "export", help="write every log stream of the cluster (or one node) for a time window into a directory"
    )
    export.add_argument("name", metavar="NAME", help="cluster name")
    export.add_argument("--region", required=True, metavar="R", help="the cluster's home region (its log group)")
    export.add_argument("--out", required=True, metavar="DIR", help="directory to write <stream>.log + index.txt into")
    export.add_argument(
        "--since",
        default=DEFAULT_SINCE,
        metavar="WHEN",
        help=f"start of the window (default {DEFAULT_SINCE}): 30m, 2h, 7d, or an ISO time",
    )
    export.add_argument(
        "--node", metavar="NODE", help="only this node's streams: instance id, private IP, ip-… host name or Name tag"
    )
    export.add_argument("--endpoint-url", metavar="URL", help="AWS endpoint (default: $AWS_ENDPOINT_URL, else AWS)")
    export.set_defaults(func=run_export)


def run_export(args: argparse.Namespace) -> int:
    """Resolve the window and streams, export, write the index, print one summary line."""
    import boto3
    from botocore.config import Config
    from botocore.exceptions import BotoCoreError, ClientError

    from elastic_slurm import cluster_instances, log_export
    from slurm_plugin.naming import log_group_name

    check_target(args.name, args.region)
    now = datetime.now(UTC)
    try:
        start = log_export.parse_since(args.since, now)
    except ValueError as exc:
        raise UserError(f"--since: {exc}") from None
    out = Path(args.out)
    if out.exists() and not out.is_dir():
        raise UserError(f"--out: {out} exists and is not a directory")
    logging.getLogger("botocore").setLevel(logging.WARNING)
    group = log_group_name(args.name)
    config = Config(retries={"mode": "standard", "max_attempts": 10}, connect_timeout=10, read_timeout=60)
    logs = boto3.client("logs", region_name=args.region, endpoint_url=args.endpoint_url, config=config)
    header = [f"elastic-slurm logs export: cluster {args.name}, log group {group} ({args.region})"]
    streams = None
    try:
        if args.node:
            ec2 = cluster_instances.ec2_client(args.region, args.endpoint_url)
            found = cluster_instances.node_instances(ec2, args.name, args.node, states=None)
            ids = [args.node] if cluster_instances.node_filter(args.node)["Name"] == "instance-id" else []
            ids = sorted({*ids, *(i.instance_id for i in found)})  # an old instance id: EC2 may have forgotten it
            if not ids:  # asked EC2, found nothing: the operation failed (1)
                raise OperationFailed(
                    f"--node: no instance of cluster {args.name} in {args.region} is {args.node}; "
                    f"{cluster_instances.NODE_HINT}"
                )
            header.append(f"node: {args.node} (instances: {', '.join(ids)})")
            streams = log_export.streams_of_instances(logs, group, ids)
        result = log_export.export(logs, group, out, start, now, streams)  # files (and DIR) as events come
        out.mkdir(parents=True, exist_ok=True)
        index = log_export.write_index(out, result, header)
    except ClientError as exc:
        if exc.response.get("Error", {}).get("Code") == "ResourceNotFoundException":
            raise OperationFailed(
                f"log group {group} does not exist in {args.region} (is {args.name} deployed there? "
                "--region is the cluster's home region)"
            ) from None
        raise aws_failure(exc) from None
    except BotoCoreError as exc:
        raise aws_failure(exc) from None
    except OSError as exc:
        raise UserError(f"--out: {exc.filename or out}: {exc.strerror}") from None
    print(
        f"{out}: {result.total} event(s) in {len(result.events)} stream(s) of {group} since "
        f"{log_export.iso(int(start.timestamp() * 1000))}; index: {index}"
    )
    return 0
