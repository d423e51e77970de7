"""Deconfigure custom resource handler (Lambda, Python stdlib + boto3 only).

On Delete of the cluster stack — which CloudFormation processes before storage, database and network because this
resource depends on them — it:
  1. runs an SSM shell command on the cluster's submit hosts (instances tagged `elastic-slurm:submit-host=<cluster>`)
     that unmounts the cluster's file systems and removes its Slurm config;
  2. terminates every instance tagged `elastic-slurm:cluster=<cluster>`, in every region of the cluster, except the
     stack's own controllers (`elastic-slurm:role=controller`): every compute node the power-save plugin launched;
  3. waits until they are terminated.
Any failure, including running out of time, is reported to CloudFormation as FAILED with a one-line reason, instead
of letting the stack hang for an hour. Create and Update do nothing and succeed.

Decisions are pure functions (`instances_to_terminate`, `still_running`); `deconfigure` is the I/O shell around
them, taking boto3 clients so tests can point it at a moto server.
"""

from __future__ import annotations

import json
import logging
import os
import re
import shlex
import time
import urllib.request
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import boto3
from botocore.config import Config

TAG_CLUSTER = "elastic-slurm:cluster"
TAG_ROLE = "elastic-slurm:role"
TAG_SUBMIT_HOST = "elastic-slurm:submit-host"
GONE_STATES = frozenset({"terminated"})
PENDING_COMMAND = ("Pending", "InProgress", "Delayed")
SAFETY_MARGIN_MS = 30_000
POLL_SECONDS = 10.0
BOTO_CONFIG = Config(retries={"max_attempts": 10, "mode": "adaptive"})

log = logging.getLogger(__name__)
log.setLevel(logging.INFO)


@dataclass(frozen=True)
class Instance:
    """The fields of an EC2 instance the decisions need."""

    instance_id: str
    state: str
    tags: dict[str, str]


@dataclass(frozen=True)
class Outcome:
    """Result of a deconfigure run: `ok`, or a one-line `reason` for CloudFormation."""

    ok: bool
    reason: str
    terminated: tuple[str, ...] = ()


def parse_instances(reservations: Iterable[dict[str, Any]]) -> list[Instance]:
    """Flatten DescribeInstances reservations into `Instance`s."""
    return [
        Instance(
            instance_id=item["InstanceId"],
            state=item["State"]["Name"],
            tags={t["Key"]: t["Value"] for t in item.get("Tags", [])},
        )
        for reservation in reservations
        for item in reservation.get("Instances", [])
    ]


def instances_to_terminate(instances: Iterable[Instance], cluster: str) -> list[str]:
    """Ids of the cluster's instances that still exist, except the controllers CloudFormation deletes itself."""
    return sorted(
        i.instance_id
        for i in instances
        if i.tags.get(TAG_CLUSTER) == cluster and i.tags.get(TAG_ROLE) != "controller" and i.state not in GONE_STATES
    )


def still_running(instances: Iterable[Instance], ids: Iterable[str]) -> list[str]:
    """Which of `ids` are not terminated yet."""
    wanted = set(ids)
    return sorted(i.instance_id for i in instances if i.instance_id in wanted and i.state not in GONE_STATES)


# The same rules as the config's (cluster_config: CLUSTER_NAME_PATTERN, safe_types.PATH_PATTERN); this Lambda ships
# without the project, so they are repeated here and a test checks they stay equal.
CLUSTER_NAME = re.compile(r"^[a-z][a-z0-9-]*[a-z0-9]$")
MOUNT_POINT = re.compile(r"^(/[A-Za-z0-9._+@-]+)+$")


def submit_host_commands(mount_points: list[str], cluster: str) -> list[str]:
    """Shell commands that detach a submit host from the cluster (idempotent). They run as root (SSM
    AWS-RunShellScript): every value is checked against the config's rules and shell-quoted, and a bad one is a
    ValueError (the Delete fails with its reason) rather than a command."""
    if not CLUSTER_NAME.fullmatch(cluster):
        raise ValueError(f"cluster name {cluster!r} is not a cluster name")
    for mp in mount_points:
        if not MOUNT_POINT.fullmatch(mp) or {".", ".."} & set(mp.split("/")):
            raise ValueError(f"mount point {mp!r} is not a plain absolute path")
    commands = [f"umount -l {shlex.quote(mp)} 2>/dev/null || true" for mp in mount_points]
    dirs = (f"/etc/elastic-slurm/{cluster}", f"/etc/slurm/clusters/{cluster}")
    commands.append("rm -rf -- " + " ".join(shlex.quote(d) for d in dirs))
    return commands


def _describe(ec2: Any, filters: list[dict[str, Any]]) -> list[Instance]:
    pages = ec2.get_paginator("describe_instances").paginate(Filters=filters)
    return parse_instances(r for page in pages for r in page["Reservations"])


def command_problem(host: str, status: str) -> str | None:
    """A one-line reason when a submit host's clean-up command ended badly (None: fine or still running)."""
    if status in ("Success", *PENDING_COMMAND):
        return None
    return f"submit host {host}: clean-up command ended {status}"


def _run_on_submit_hosts(
    ssm: Any, hosts: list[str], commands: list[str], remaining_ms: Callable[[], int], sleep: Callable[[float], None]
) -> str | None:
    """Send the clean-up command and wait for it on every host; returns a reason when it fails."""
    command = ssm.send_command(
        InstanceIds=hosts, DocumentName="AWS-RunShellScript", Parameters={"commands": commands}, TimeoutSeconds=120
    )["Command"]
    for host in hosts:
        while True:
            status = ssm.get_command_invocation(CommandId=command["CommandId"], InstanceId=host)["Status"]
            problem = command_problem(host, status)
            if problem:
                return problem
            if status not in PENDING_COMMAND:
                break
            if remaining_ms() < SAFETY_MARGIN_MS:
                return f"submit host {host}: clean-up command still {status} at the deadline"
            sleep(POLL_SECONDS)
    return None


def deconfigure(
    ec2: Any,
    ssm: Any,
    cluster: str,
    mount_points: list[str],
    remaining_ms: Callable[[], int],
    sleep: Callable[[float], None] = time.sleep,
) -> Outcome:
    """Detach submit hosts, terminate the cluster's instances and wait for them; never raises for AWS errors."""
    try:
        live = [{"Name": "instance-state-name", "Values": ["pending", "running", "stopping", "stopped"]}]
        hosts = _describe(ec2, [{"Name": f"tag:{TAG_SUBMIT_HOST}", "Values": [cluster]}, *live])
        if hosts:
            problem = _run_on_submit_hosts(
                ssm, [h.instance_id for h in hosts], submit_host_commands(mount_points, cluster), remaining_ms, sleep
            )
            if problem:
                return Outcome(False, problem)
        cluster_filter = [{"Name": f"tag:{TAG_CLUSTER}", "Values": [cluster]}]
        targets = instances_to_terminate(_describe(ec2, cluster_filter), cluster)
        for start in range(0, len(targets), 500):  # TerminateInstances takes at most 1000 ids
            ec2.terminate_instances(InstanceIds=targets[start : start + 500])
        while True:
            waiting = still_running(_describe(ec2, cluster_filter), targets)
            if not waiting:
                return Outcome(True, f"terminated {len(targets)} instance(s)", tuple(targets))
            if remaining_ms() < SAFETY_MARGIN_MS:
                shown = " ".join(waiting[:5]) + (" ..." if len(waiting) > 5 else "")
                return Outcome(False, f"{len(waiting)} instance(s) of {cluster} still not terminated: {shown}")
            sleep(POLL_SECONDS)
    except Exception as exc:  # report any AWS/botocore failure to CloudFormation instead of hanging
        return Outcome(False, f"{type(exc).__name__}: {exc}".splitlines()[0][:500])


def deconfigure_regions(
    cluster: str, regions: list[str], mount_points: list[str], remaining_ms: Callable[[], int]
) -> Outcome:
    """`deconfigure` in every region of the cluster (home region first: submit hosts live there)."""
    terminated: list[str] = []
    for region in regions:
        outcome = deconfigure(
            boto3.client("ec2", region_name=region, config=BOTO_CONFIG),
            boto3.client("ssm", region_name=region, config=BOTO_CONFIG),
            cluster,
            mount_points,
            remaining_ms,
        )
        if not outcome.ok:
            return Outcome(False, f"{region}: {outcome.reason}", tuple(terminated))
        terminated += outcome.terminated
    return Outcome(True, f"terminated {len(terminated)} instance(s) in {', '.join(regions)}", tuple(terminated))


def send_response(event: dict[str, Any], status: str, reason: str, physical_id: str) -> None:
    """PUT the custom-resource result to CloudFormation's pre-signed URL."""
    body = json.dumps(
        {
            "Status": status,
            "Reason": reason,
            "PhysicalResourceId": physical_id,
            "StackId": event["StackId"],
            "RequestId": event["RequestId"],
            "LogicalResourceId": event["LogicalResourceId"],
            "Data": {},
        }
    ).encode()
    request = urllib.request.Request(
        event["ResponseURL"], data=body, method="PUT", headers={"Content-Type": "", "Content-Length": str(len(body))}
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        response.read()


def handler(event: dict[str, Any], context: Any) -> None:
    """Lambda entry point."""
    props = event.get("ResourceProperties", {})
    cluster = str(props.get("ClusterName", ""))
    physical_id = event.get("PhysicalResourceId") or f"deconfigure-{cluster}"
    status, reason = "SUCCESS", "nothing to do"
    try:
        if event["RequestType"] == "Delete":
            outcome = deconfigure_regions(
                cluster,
                list(props.get("Regions", [])) or [os.environ.get("AWS_REGION", "us-east-1")],
                list(props.get("MountPoints", [])),
                context.get_remaining_time_in_millis,
            )
            status, reason = ("SUCCESS" if outcome.ok else "FAILED"), outcome.reason
    except Exception as exc:
        status, reason = "FAILED", f"{type(exc).__name__}: {exc}".splitlines()[0][:500]
    log.info("deconfigure %s %s: %s %s", cluster, event.get("RequestType"), status, reason)
    send_response(event, status, reason, physical_id)
