"""`elastic-slurm fleet stop|start|status NAME [--region R]`: stop or start a cluster's compute fleet.

Like ParallelCluster's `update-compute-fleet`: the command writes the wish (STOPPED or RUNNING) into the cluster's
SSM parameter `/elastic-slurm/NAME/fleet` and the cluster manager on the active controller applies it at its next
cycle (slurm_plugin/manager/fleet.py): stopped, every partition is DOWN (jobs stay queued, none starts), running jobs
finish and every idle node is powered down, always-on ones too; started, the partitions are UP again and the always-on
nodes come back. Nothing is terminated under a running job.

`fleet status NAME --output json` prints `{"cluster", "region", "fleet"}` (fleet: RUNNING or STOPPED). A cluster that
is not deployed, or AWS refusing, is one line and exit 1.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from elastic_slurm.commands.arg_checks import cluster_name
from elastic_slurm.errors import OperationFailed
from elastic_slurm.lifecycle.aws import aws_errors, client, default_region, error_code
from slurm_plugin.manager.fleet import RUNNING, STOPPED
from slurm_plugin.naming import config_url_parameter, fleet_parameter


def register(sub: Any) -> None:
    """Add the `fleet` command group."""
    fleet = sub.add_parser("fleet", help="stop or start a cluster's compute fleet (applied by its cluster manager)")
    actions = fleet.add_subparsers(dest="fleet_command", required=True, parser_class=type(fleet))
    helps = {
        "stop": "partitions DOWN (jobs stay queued), running jobs finish, idle nodes powered down, none started",
        "start": "partitions UP again, always-on nodes back",
        "status": "the fleet wish the manager applies",
    }
    for name, text in helps.items():
        parser = actions.add_parser(name, help=text)
        parser.add_argument("name", metavar="NAME", help="cluster name")
        parser.add_argument("--region", metavar="R", help="the cluster's home region (default: the configured one)")
        if name == "status":
            parser.add_argument("--output", choices=("text", "json"), default="text", help="json: one JSON object")
        parser.set_defaults(func=run_fleet)


def run_fleet(args: argparse.Namespace) -> int:
    """Write (stop/start) or read (status) the fleet parameter."""
    cluster_name(args.name)
    region = default_region(args.region)
    ssm = client("ssm", region)
    with aws_errors(f"cluster {args.name} in {region}"):
        try:
            ssm.get_parameter(Name=config_url_parameter(args.name))
        except Exception as exc:
            if error_code(exc) == "ParameterNotFound":
                raise OperationFailed(f"NAME: no cluster '{args.name}' is deployed in {region}") from None
            raise
        if args.fleet_command == "status":
            wish = current(ssm, args.name)
            if getattr(args, "output", "text") == "json":
                print(json.dumps({"cluster": args.name, "region": region, "fleet": wish}))
            else:
                print(f"cluster {args.name} ({region}): fleet {wish}")
            return 0
        wish = STOPPED if args.fleet_command == "stop" else RUNNING
        ssm.put_parameter(
            Name=fleet_parameter(args.name),
            Value=wish,
            Type="String",
            Overwrite=True,
            Description=f"fleet of {args.name}: RUNNING or STOPPED (elastic-slurm fleet start|stop)",
        )
    what = (
        "partitions go DOWN (jobs stay queued), running jobs finish, idle nodes power down"
        if wish == STOPPED
        else "partitions go UP, always-on nodes power up"
    )
    print(f"cluster {args.name} ({region}): fleet {wish}; at the cluster manager's next cycle {what}")
    return 0


def current(ssm: Any, cluster: str) -> str:
    """The wish in the parameter; RUNNING when there is none (the fleet was never stopped)."""
    try:
        return str(ssm.get_parameter(Name=fleet_parameter(cluster))["Parameter"]["Value"])
    except Exception as exc:
        if error_code(exc) == "ParameterNotFound":
            return RUNNING
        raise
