"""`elastic-slurm connect NAME --region R [--node NODE | --controller [N] | --login [POOL]] [--print]`: a shell on a
cluster instance through AWS Systems Manager Session Manager — no SSH key, no inbound port.

The target is the newest running controller (tags `elastic-slurm:cluster` = NAME and `elastic-slurm:role` =
controller), controller N by its Name tag `NAME-controller-N`, the newest running login node (role `login`; of login
pool POOL with `elastic-slurm:login-pool`), or the running instance `--node` names (instance id,
private IP = Slurm's NodeAddr, `ip-…` host name or Name tag: elastic_slurm/cluster_instances.py). A stopped or
terminated instance is never chosen. The command then execs `aws ssm start-session --target i-… --region R`, which
needs the AWS CLI and the Session Manager plugin on PATH; `--print` only prints that command line. The instance
lookup honours `--endpoint-url` / $AWS_ENDPOINT_URL like every AWS call of the CLI.
"""

from __future__ import annotations

import argparse
import logging
import os
import shlex
import shutil
import sys
from typing import Any

from elastic_slurm.cluster_instances import aws_failure, check_target
from elastic_slurm.errors import OperationFailed, UserError
from slurm_plugin.naming import TAG_CLUSTER, TAG_ROLE

AWS_CLI_DOCS = "https://docs.aws.amazon.com/cli/latest/userguide/getting-started-install.html"
PLUGIN_DOCS = (
    "https://docs.aws.amazon.com/systems-manager/latest/userguide/session-manager-working-with-install-plugin.html"
)
NEWEST = -1  # `--controller` without N


def register(sub: Any) -> None:
    """Add `connect`."""
    connect = sub.add_parser("connect", help="open a Session Manager shell on a controller or a node's instance")
    connect.add_argument("name", metavar="NAME", help="cluster name")
    connect.add_argument("--region", required=True, metavar="R", help="region of the instance (controllers: home)")
    target = connect.add_mutually_exclusive_group()
    target.add_argument(
        "--node",
        metavar="NODE",
        help="the node's running instance: instance id, private IP (NodeAddr), ip-… host name or Name tag",
    )
    target.add_argument(
        "--controller",
        nargs="?",
        const=NEWEST,
        type=int,
        metavar="N",
        help="controller N (0 primary, 1 backup); without N, or by default, the newest running controller",
    )
    target.add_argument(
        "--login",
        nargs="?",
        const="",
        metavar="POOL",
        help="the newest running login node (of login pool POOL): where users submit",
    )
    connect.add_argument("--print", action="store_true", help="only print the aws command line")
    connect.add_argument(
        "--endpoint-url", metavar="URL", help="AWS endpoint of the lookup (default: $AWS_ENDPOINT_URL, else AWS)"
    )
    connect.set_defaults(func=run_connect)


def check_tools() -> None:
    """One line saying what to install when the AWS CLI or the Session Manager plugin is missing."""
    if shutil.which("aws") is None:
        raise UserError(f"the AWS CLI (`aws`) is not on PATH: install it ({AWS_CLI_DOCS})")
    if shutil.which("session-manager-plugin") is None:
        raise UserError(
            f"the Session Manager plugin (`session-manager-plugin`) is not on PATH: `aws ssm start-session` needs it; "
            f"install it ({PLUGIN_DOCS})"
        )


def run_connect(args: argparse.Namespace) -> int:
    """Find the instance, then print or exec `aws ssm start-session`."""
    from botocore.exceptions import BotoCoreError, ClientError

    from elastic_slurm import cluster_instances

    check_target(args.name, args.region)
    if args.controller is not None and args.controller < NEWEST:
        raise UserError(f"--controller: {args.controller} is not a controller index (0, 1)")
    if not args.print:
        check_tools()
    logging.getLogger("botocore").setLevel(logging.WARNING)
    ec2 = cluster_instances.ec2_client(args.region, args.endpoint_url)
    running = cluster_instances.RUNNING
    index = None if args.controller in (None, NEWEST) else args.controller
    try:
        if args.node:
            found = cluster_instances.node_instances(ec2, args.name, args.node, running)
        elif args.login is not None:
            found = cluster_instances.login_nodes(ec2, args.name, args.login or None, running)
        else:
            found = cluster_instances.controllers(ec2, args.name, index, running)
    except (ClientError, BotoCoreError) as exc:
        raise aws_failure(exc) from None
    if not found:
        raise OperationFailed(_nothing_running(args, index))  # the cluster (or that host) is not running: 1
    chosen = found[0]
    command = ["aws", "ssm", "start-session", "--target", chosen.instance_id, "--region", args.region]
    if args.print:
        print(shlex.join(command))
        return 0
    print(f"elastic-slurm connect: {chosen.label()}", file=sys.stderr)
    sys.stdout.flush()
    sys.stderr.flush()
    try:
        os.execvp(command[0], command)
    except OSError as exc:
        raise UserError(f"aws: cannot run it: {exc.strerror}") from None
    return 0  # not reached: execvp replaced this process


def _nothing_running(args: argparse.Namespace, index: int | None) -> str:
    """The one line when no running instance matches, naming the argument that chose the target."""
    from elastic_slurm.cluster_instances import NODE_HINT

    where = f"cluster {args.name} in {args.region}"
    if args.node:
        return f"--node: no running instance of {where} is {args.node}; {NODE_HINT}"
    if args.login is not None:
        pool = f" of login pool {args.login}" if args.login else ""
        return f"--login: no running login node{pool} of {where} (clusters[].login_nodes, tag {TAG_ROLE}=login)"
    if index is not None:
        return f"--controller: no running controller of {where} is named {args.name}-controller-{index}"
    return f"no running controller of {where} (tags {TAG_CLUSTER}={args.name}, {TAG_ROLE}=controller)"
