"""The controller facts `elastic-slurm render` needs, found in the config and EC2, as shell assignments (facts.env):

    python -m slurm_plugin.controller_hosts CONFIG CLUSTER > facts.env

- ES_CONTROLLER_HOSTS  every controller of CLUSTER as name(ip), primary first (SlurmctldHost lines)
- ES_SLURMDBD_HOST     the slurmdbd host's IP (controller 0 of the accounting host cluster), empty without accounting
- ES_ACCOUNTING_MODE   the config's accounting mode
- ES_SHARED_MOUNT      the cluster's first shared mount point (where releases before kept Slurm's state: config apply
                       moves it once to the controllers' own file system), empty without one

Controller host names are known only once the instances exist: every controller (and the slurmdbd host) is found by
its Name tag `<cluster>-controller-<index>` (set at launch by the cluster stack) with ec2:DescribeInstances, and also
by the cluster and role tags the stack sets on it: an instance that merely carries the Name (anyone who can launch in
the account can name one so) is never taken for a controller, so it cannot become a SlurmctldHost. A pending instance
already has its private DNS name and IP, so each lookup waits (bounded: LOOKUPS lookups LOOKUP_PAUSE apart, 10 min) only until
CloudFormation has launched the peer; a failed call is retried the same way. Of several matches, the newest: a
replaced controller's predecessor may still run. The Slurm name is the first label of the private DNS name: what
`hostname -s` prints on EC2.

Run by elastic-slurm-config-apply whenever it renders (at boot and for each new config; a replaced controller has a
new address), as root, in one process (a controller's boot made an AWS CLI run per lookup before). The file is read
by bash (`set -a; . facts.env`) and by systemd (the exporter's EnvironmentFile=): every value is checked to be plain
(a host name label, an IPv4 address, a mode word, a path) and single-quoted. Environment: ES_REGION (this cluster's
region), credentials and endpoint as for the AWS CLI. Exit 1 with one line when a controller is not found in time, 2
for a bad argument or config.
"""

from __future__ import annotations

import argparse
import ipaddress
import re
import shlex
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from slurm_plugin.naming import TAG_CLUSTER, TAG_ROLE

PROGRAM = "elastic-slurm-controller-hosts"
LOOKUPS = 120
LOOKUP_PAUSE = 5.0
_LABEL = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?$")
_WORD = re.compile(r"^[a-z0-9_-]*$")
_PATH = re.compile(r"^(/[A-Za-z0-9._+@-]+)*$")


class NotFound(Exception):
    """A controller that no lookup found within the bound (one line)."""


@dataclass(frozen=True)
class Host:
    """A controller as Slurm names it: the first label of its private DNS name, and its private IPv4 address."""

    name: str
    ip: str


def controller_filters(cluster: str, index: int) -> list[dict[str, Any]]:
    """DescribeInstances filters for controller `index` of `cluster`: the Name tag AND the stack's cluster and role
    tags, pending or running."""
    return [
        {"Name": "tag:Name", "Values": [f"{cluster}-controller-{index}"]},
        {"Name": f"tag:{TAG_CLUSTER}", "Values": [cluster]},
        {"Name": f"tag:{TAG_ROLE}", "Values": ["controller"]},
        {"Name": "instance-state-name", "Values": ["pending", "running"]},
    ]


def newest_host(pages: Sequence[dict[str, Any]]) -> Host | None:
    """The newest instance of DescribeInstances' answer pages as a Host; None when there is none yet, or when it
    has no private DNS name or address (yet), or one that is not plain (never written to facts.env)."""
    instances = [i for page in pages for r in page.get("Reservations", []) for i in r.get("Instances", [])]
    if not instances:
        return None
    newest = max(instances, key=lambda i: i["LaunchTime"])
    name = str(newest.get("PrivateDnsName") or "").split(".")[0]
    address = str(newest.get("PrivateIpAddress") or "")
    try:
        ipaddress.IPv4Address(address)
    except ValueError:
        return None
    return Host(name, address) if _LABEL.fullmatch(name) else None


def find_host(ec2: Any, region: str, cluster: str, index: int) -> Host:
    """Controller `index` of `cluster` in `region` (ec2: a client of that region); NotFound after LOOKUPS tries."""
    from botocore.exceptions import BotoCoreError, ClientError

    last = ""
    for attempt in range(LOOKUPS):
        if attempt:
            time.sleep(LOOKUP_PAUSE)
        try:
            pages = list(ec2.get_paginator("describe_instances").paginate(Filters=controller_filters(cluster, index)))
        except (BotoCoreError, ClientError) as exc:
            last = f" (last error: {' '.join(str(exc).split())})"
            continue
        host = newest_host(pages)
        if host is not None:
            return host
    raise NotFound(f"no controller {index} of cluster {cluster} in {region}{last}")


@dataclass(frozen=True)
class Facts:
    """What facts.env holds."""

    controller_hosts: str
    slurmdbd_host: str
    accounting_mode: str
    shared_mount: str

    def env_text(self) -> str:
        """The file: `NAME='value'` lines; ValueError for a value that is not plain."""
        lines = []
        for name, value, plain in (
            ("ES_CONTROLLER_HOSTS", self.controller_hosts, re.compile(r"^[A-Za-z0-9().,-]*$")),
            ("ES_SLURMDBD_HOST", self.slurmdbd_host, re.compile(r"^[0-9.]*$")),
            ("ES_ACCOUNTING_MODE", self.accounting_mode, _WORD),
            ("ES_SHARED_MOUNT", self.shared_mount, _PATH),
        ):
            if not plain.fullmatch(value):
                raise ValueError(f"{name}: {value!r} is not a plain value")
            lines.append(f"{name}={shlex.quote(value)}")
        return "\n".join(lines) + "\n"


def facts(config: Any, cluster_name: str, region: str, ec2_in: Callable[[str], Any]) -> Facts:
    """The facts of `cluster_name` (whose controllers run in `region`); ec2_in(region) gives an EC2 client."""
    from slurm_plugin.render.manifest import shared_mount

    cluster = config.cluster(cluster_name)
    hosts = [find_host(ec2_in(region), region, cluster_name, i) for i in range(cluster.controller.count)]
    dbd_ip = ""
    if config.accounting.mode != "none":
        host_cluster = config.cluster(config.accounting_host)
        if host_cluster.name == cluster_name and host_cluster.region == region:
            dbd_ip = hosts[0].ip  # this cluster keeps the accounting: its controller 0, just found
        else:
            dbd_ip = find_host(ec2_in(host_cluster.region), host_cluster.region, host_cluster.name, 0).ip
    return Facts(
        controller_hosts=",".join(f"{h.name}({h.ip})" for h in hosts),
        slurmdbd_host=dbd_ip,
        accounting_mode=str(config.accounting.mode),
        shared_mount=shared_mount(cluster) or "",
    )


def main(argv: Sequence[str] | None = None, environ: dict[str, str] | None = None) -> int:
    import os

    parser = argparse.ArgumentParser(prog=PROGRAM, description=(__doc__ or "").split("\n")[0])
    parser.add_argument("config", metavar="CONFIG", help="the cluster YAML file")
    parser.add_argument("cluster", metavar="CLUSTER", help="this controller's cluster")
    args = parser.parse_args(argv)
    region = (environ if environ is not None else dict(os.environ)).get("ES_REGION", "")
    if not re.fullmatch(r"[a-z]{2}(-[a-z]+)+-\d+", region):
        print(f"{PROGRAM}: ES_REGION: '{region}' is not an AWS region", file=sys.stderr)
        return 2
    from cluster_config import load
    from cluster_config.loader import ConfigInvalid

    try:
        config = load(args.config)
        config.cluster(args.cluster)
    except KeyError:
        print(f"{PROGRAM}: CLUSTER: no cluster '{args.cluster}' in {args.config}", file=sys.stderr)
        return 2
    except ConfigInvalid as exc:
        print(f"{PROGRAM}: CONFIG: {str(exc).splitlines()[0]}", file=sys.stderr)
        return 2
    import boto3

    session = boto3.session.Session()
    clients: dict[str, Any] = {}

    def ec2_in(name: str) -> Any:
        if name not in clients:
            clients[name] = session.client("ec2", region_name=name)
        return clients[name]

    try:
        text = facts(config, args.cluster, region, ec2_in).env_text()
    except (NotFound, ValueError) as exc:
        print(f"{PROGRAM}: {exc}", file=sys.stderr)
        return 1
    sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
