"""What every node's CloudWatch agent ships to the cluster's log group (`/elastic-slurm/NAME`, stacks/naming.py):
the Slurm daemons' logs and elastic-slurm's own (power-save plugin, cluster manager, prolog, license sync, exporter), one
stream
per instance and file, `<instance id>/<file name>` (what `elastic-slurm logs export` reads, elastic_slurm/log_export.py).

Each file is listed by name: the agent has no file-name placeholder for stream names, and a glob in `file_path` ships
only the most recently written file that matches. A listed file that a node does not write (slurmdbd.log on a compute
node) is simply never found. The node role may write log streams of that group only (stacks/node_policies.py).

The log group lives in the cluster's home region, and so does the node role's permission (`logs:PutLogEvents` on
`arn:...:logs:HOME:...`, stacks/node_policies.py). The agent sends to the region of the instance unless its config's
`agent.region` names another, and its logs output takes the region from there
(https://docs.aws.amazon.com/AmazonCloudWatch/latest/monitoring/CloudWatch-Agent-Configuration-File-Details.html,
"agent section": region): the config always names the home region, so a node in a remote region ships to the home
log group instead of a group that does not exist in its own region.

The boot (stacks/user_data.py) writes the config with
`python -m slurm_plugin.log_shipping --region HOME_REGION LOG_GROUP > FILE`: run from the node's venv, it keeps the
EC2 user data (16 KB at most) short.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import PurePosixPath
from typing import Any

SLURM_LOG_DIR = "/var/log/slurm"  # slurm.conf's SlurmctldLogFile/SlurmdLogFile, slurmdbd.conf's LogFile
ES_LOG_DIR = "/var/log/elastic-slurm"  # the manifest's log_file, LogsDirectory= of the units (assets/systemd)
SHIPPED_LOGS = (
    f"{SLURM_LOG_DIR}/slurmctld.log",
    f"{SLURM_LOG_DIR}/slurmdbd.log",
    f"{SLURM_LOG_DIR}/slurmd.log",
    f"{ES_LOG_DIR}/plugin.log",  # resume, suspend, resume-fail (slurm_plugin/render/cluster.py log_file)
    f"{ES_LOG_DIR}/clustermgr.log",  # the cluster manager (slurm_plugin/manager/daemon.py)
    f"{ES_LOG_DIR}/prolog.log",  # the prolog's wait for the node's boot (PrologSlurmctld: controllers)
    f"{ES_LOG_DIR}/license-sync.log",  # assets/systemd/slurm-license-sync.service
    f"{ES_LOG_DIR}/exporter.log",  # the metrics exporter (slurm_plugin/exporter/main.py: next to the plugin's log)
)


def stream_name(path: str) -> str:
    """The log stream of a shipped file: `{instance_id}/<file name>` (the agent fills in the instance id)."""
    return f"{{instance_id}}/{PurePosixPath(path).name}"


def cloudwatch_agent_config(log_group: str, region: str | None = None) -> str:
    """The agent's JSON config shipping SHIPPED_LOGS to `log_group` in `region` (the cluster's home region; None: the
    instance's own region, the agent's default)."""
    files = [{"file_path": p, "log_group_name": log_group, "log_stream_name": stream_name(p)} for p in SHIPPED_LOGS]
    config: dict[str, Any] = {"logs": {"logs_collected": {"files": {"collect_list": files}}}}
    if region is not None:
        config = {"agent": {"region": region}, **config}
    return json.dumps(config, indent=2)


def main(argv: Sequence[str] | None = None) -> int:
    """Print the agent's config for the log group given."""
    parser = argparse.ArgumentParser(
        prog="python -m slurm_plugin.log_shipping",
        description="Print the CloudWatch agent config that ships the Slurm and elastic-slurm logs of this node.",
    )
    parser.add_argument("log_group", help="the cluster's log group, e.g. /elastic-slurm/NAME")
    parser.add_argument(
        "--region", help="the log group's region (the cluster's home region); default: the instance's own region"
    )
    args = parser.parse_args(argv)
    if not args.log_group.strip():
        print("log_shipping: the log group is empty (is ES_LOG_GROUP set?)", file=sys.stderr)
        return 2
    if args.region is not None and not args.region.strip():
        print("log_shipping: the region is empty (is ES_REGION set?)", file=sys.stderr)
        return 2
    print(cloudwatch_agent_config(args.log_group, args.region))
    return 0


if __name__ == "__main__":
    sys.exit(main())
