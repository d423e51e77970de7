"""A controller that replaces another waits until its predecessor is gone, before it starts slurmdbd or slurmctld:

    python -m slurm_plugin.predecessor [--any-index]

CloudFormation replaces a controller by creating the new instance first and deleting the old one at the end of the
update. Both would run slurmctld at once, and both cluster managers would act: so the new one waits while an OLDER
pending/running/stopping/shutting-down instance carries its Name tag (`<cluster>-controller-<index>`) AND the
cluster's cluster and role tags (a stranger's instance that merely carries the Name cannot block the boot). A newer
one (a rollback's leftover) is not waited for. Nothing to wait for at a cluster's creation: the lookup finds only this
instance.

`--any-index`: wait for the older controllers of every index instead (config apply, before it moves Slurm's state of
an older release to the controllers' own file system: no old controller may still write the old copy). One update
launches its controllers together, so an instance counts as older only when it was launched more than
ES_GENERATION_GAP seconds (default 120) before this one: the other new controller is not waited for.

Run by the controller user data (stacks/user_data.py) and elastic-slurm-config-apply, as root, in one process (a
boot made an AWS CLI run per lookup before). Environment: ES_CLUSTER, ES_REGION, ES_CONTROLLER_INDEX (default 0);
ELASTIC_SLURM_INSTANCE_ID (default: from IMDSv2); ES_PREDECESSOR_WAIT seconds before giving up (default 7200: an
update also rebuilds images first); ES_PREDECESSOR_POLL seconds between lookups (default 15); credentials and endpoint
as for the AWS CLI. Exit 0 once no older instance runs; 1 on timeout or a failed call (one line); 2 for a bad
environment value.
"""

from __future__ import annotations

import argparse
import re
import sys
import time
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any

from slurm_plugin.tags import TAG_CLUSTER, TAG_ROLE

PROGRAM = "elastic-slurm-wait-predecessor"
IMDS = "http://169.254.169.254"
LIVE_STATES = ["pending", "running", "stopping", "shutting-down"]
_INSTANCE_ID = re.compile(r"i-[0-9a-z]{1,32}")
_CLUSTER = re.compile(r"[a-z][a-z0-9-]{0,30}[a-z0-9]")  # cluster_config.model_base.CLUSTER_NAME_PATTERN, 32 long


class BadEnvironment(Exception):
    """An environment value that is not what it must be (one line naming it)."""


def lookup_filters(cluster: str, index: int | None) -> list[dict[str, Any]]:
    """DescribeInstances filters: controller `index` of `cluster` by its Name tag (every index when None), AND the
    stack's cluster and role tags, in a state that may still run Slurm."""
    by_name = [] if index is None else [{"Name": "tag:Name", "Values": [f"{cluster}-controller-{index}"]}]
    return [
        *by_name,
        {"Name": f"tag:{TAG_CLUSTER}", "Values": [cluster]},
        {"Name": f"tag:{TAG_ROLE}", "Values": ["controller"]},
        {"Name": "instance-state-name", "Values": LIVE_STATES},
    ]


def older_ids(pages: Sequence[dict[str, Any]], self_id: str, gap: float) -> list[str]:
    """The ids of the instances in DescribeInstances' answer pages launched more than `gap` seconds before
    `self_id`; every other one when this instance is not in the answer (its launch time unknown)."""
    instances = [i for page in pages for r in page.get("Reservations", []) for i in r.get("Instances", [])]
    mine = next((i.get("LaunchTime") for i in instances if i.get("InstanceId") == self_id), None)
    older = []
    for instance in instances:
        if instance.get("InstanceId") == self_id:
            continue
        launched = instance.get("LaunchTime")
        if not isinstance(mine, datetime) or not isinstance(launched, datetime):
            older.append(str(instance.get("InstanceId")))  # unknown counts as older: waited for, within the bound
        elif launched < mine - timedelta(seconds=gap):
            older.append(str(instance["InstanceId"]))
    return sorted(older)


def instance_id_from_imds(base: str = IMDS, timeout: float = 2.0) -> str:
    """This instance's id from the instance metadata service, IMDSv2 (a session token first: the launch templates
    require it)."""
    put = urllib.request.Request(
        f"{base}/latest/api/token", method="PUT", headers={"X-aws-ec2-metadata-token-ttl-seconds": "60"}
    )
    with urllib.request.urlopen(put, timeout=timeout) as answer:
        token = answer.read().decode()
    get = urllib.request.Request(f"{base}/latest/meta-data/instance-id", headers={"X-aws-ec2-metadata-token": token})
    with urllib.request.urlopen(get, timeout=timeout) as answer:
        return str(answer.read().decode().strip())


def _number(environ: Mapping[str, str], name: str, default: int) -> int:
    text = environ.get(name, "") or str(default)
    if not text.isdigit():
        raise BadEnvironment(f"{name}: '{text}' is not a whole number of seconds")
    return int(text)


def wait_for_predecessors(
    lookup: Callable[[], list[str]],
    what: str,
    limit: float,
    poll: float,
    log: Callable[[str], None],
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
) -> bool:
    """Look up the older instances until there is none (True) or `limit` seconds have passed (False), one line on
    each wait."""
    start = clock()
    waiting = lookup()
    waited = False
    while waiting:
        waited = True
        if clock() - start >= limit:
            log(f"{what} ({' '.join(waiting)}) still runs after {limit:.0f}s: not starting Slurm next to it")
            return False
        log(f"waiting for {what} ({' '.join(waiting)}) to be gone (CloudFormation deletes it at the end of the update)")
        sleep(poll)
        waiting = lookup()
    if waited:
        log(f"{what}: gone after {clock() - start:.0f}s")
    return True


def main(argv: Sequence[str] | None = None, environ: Mapping[str, str] | None = None) -> int:
    import os

    parser = argparse.ArgumentParser(prog=PROGRAM, description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--any-index", action="store_true", help="wait for the older controllers of every index")
    args = parser.parse_args(argv)
    env = os.environ if environ is None else environ

    def log(line: str) -> None:
        print(f"{PROGRAM}: {line}", file=sys.stderr, flush=True)

    try:
        cluster, region = env.get("ES_CLUSTER", ""), env.get("ES_REGION", "")
        if not _CLUSTER.fullmatch(cluster):
            raise BadEnvironment(f"ES_CLUSTER: '{cluster}' is not a cluster name")
        if not re.fullmatch(r"[a-z]{2}(-[a-z]+)+-\d+", region):
            raise BadEnvironment(f"ES_REGION: '{region}' is not an AWS region")
        index = _number(env, "ES_CONTROLLER_INDEX", 0)
        limit, poll = _number(env, "ES_PREDECESSOR_WAIT", 7200), _number(env, "ES_PREDECESSOR_POLL", 15)
        gap = _number(env, "ES_GENERATION_GAP", 120) if args.any_index else 0
        self_id = env.get("ELASTIC_SLURM_INSTANCE_ID", "")
        if self_id and not _INSTANCE_ID.fullmatch(self_id):
            raise BadEnvironment(f"ELASTIC_SLURM_INSTANCE_ID: '{self_id}' is not an instance id")
    except BadEnvironment as exc:
        log(str(exc))
        return 2
    if not self_id:
        try:
            self_id = instance_id_from_imds()
        except OSError as exc:
            log(f"this instance's id: the instance metadata service did not answer ({exc})")
            return 1
        if not _INSTANCE_ID.fullmatch(self_id):
            log(f"this instance's id: the instance metadata service answered '{self_id[:40]}', not an instance id")
            return 1
    import boto3
    from botocore.exceptions import BotoCoreError, ClientError

    ec2: Any = boto3.session.Session().client("ec2", region_name=region)
    filters = lookup_filters(cluster, None if args.any_index else index)

    def lookup() -> list[str]:
        pages = list(ec2.get_paginator("describe_instances").paginate(Filters=filters))
        return older_ids(pages, self_id, gap)

    what = "the controllers of the release before" if args.any_index else "the controller this one replaces"
    try:
        return 0 if wait_for_predecessors(lookup, what, limit, poll, log) else 1
    except (BotoCoreError, ClientError) as exc:
        log(f"ec2:DescribeInstances: {' '.join(str(exc).split())}")
        return 1


if __name__ == "__main__":
    sys.exit(main())
