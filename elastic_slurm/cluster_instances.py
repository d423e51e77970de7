"""Find a deployed cluster's EC2 instances from an operator's machine: its controllers and the instance behind a node.

Everything goes by the tags the stacks and the plugin put on instances (stacks/naming.py): `elastic-slurm:cluster`
on every instance of the cluster (stack tags, and the plugin's launch tags), `elastic-slurm:role` = `controller` or
`compute` or `login` (with `elastic-slurm:login-pool`), and each controller's Name tag `<cluster>-controller-<index>` (stacks/cluster.py; the controller boot finds
its peers the same way, slurm_plugin/controller_hosts.py).

Compute instances carry no node-name tag: the plugin links a Slurm node to its instance by NodeAddr = the instance's
private IP (slurm_plugin/manager/reconcile.py), and the node ↔ instance map lives on the controllers
(`nodes.json` in the plugin's state dir). So a node is named here by what EC2 knows about it: its instance id, its
private IP (Slurm's NodeAddr), its EC2 host name `ip-10-0-1-23` (what `hostname -s` prints on EC2: the controllers'
Slurm names), or its Name tag (`<cluster>-controller-0`).
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from cluster_config.model import CLUSTER_NAME_PATTERN, REGION_PATTERN
from elastic_slurm.errors import OperationFailed, UserError
from elastic_slurm.lifecycle.aws import client
from slurm_plugin.naming import TAG_CLUSTER, TAG_LOGIN_POOL, TAG_ROLE

RUNNING = ("running",)
NODE_FORMS = "an instance id (i-...), a private IP (Slurm's NodeAddr), an EC2 host name (ip-10-0-1-23) or a Name tag"
NODE_HINT = (
    f"give {NODE_FORMS}: compute instances carry no Slurm node-name tag (`scontrol show node NODE` shows its NodeAddr)"
)
_INSTANCE_ID = re.compile(r"^i-[0-9a-f]{8,17}$")
_EC2_HOST = re.compile(r"^ip-(\d{1,3})-(\d{1,3})-(\d{1,3})-(\d{1,3})(\.[A-Za-z0-9.-]+)?$")


@dataclass(frozen=True)
class ClusterInstance:
    """One EC2 instance of the cluster, as DescribeInstances answers it."""

    instance_id: str
    state: str
    launch_time: datetime
    role: str  # the elastic-slurm:role tag ("" when absent)
    name: str  # the Name tag ("" when absent)
    private_ip: str | None

    def label(self) -> str:
        """`i-0abc (c1-controller-0, 10.0.1.5, running)`: what the operator sees of a choice."""
        details = [d for d in (self.name, self.private_ip, self.state) if d]
        return f"{self.instance_id} ({', '.join(details)})"


def check_target(name: str, region: str) -> None:
    """One line naming NAME or --region when they cannot be a cluster name / an AWS region."""
    if not re.match(CLUSTER_NAME_PATTERN, name):
        raise UserError(f"NAME: '{name}' is not a cluster name (lowercase letters, digits and '-')")
    if not re.match(REGION_PATTERN, region):
        raise UserError(f"--region: '{region}' is not an AWS region (e.g. us-east-1)")


def aws_failure(exc: Exception) -> OperationFailed:
    """A botocore error (no credentials, access denied, endpoint unreachable) as one line: the operation failed (1)."""
    return OperationFailed(f"aws: {' '.join(str(exc).split())}")


def ec2_client(region: str, endpoint_url: str | None) -> Any:
    """A boto3 EC2 client (lifecycle.aws.client); without `endpoint_url` boto3 still honours $AWS_ENDPOINT_URL."""
    return client("ec2", region, endpoint_url)


def node_filter(node: str) -> dict[str, Any]:
    """The DescribeInstances filter that names `node` (see NODE_FORMS)."""
    if _INSTANCE_ID.match(node):
        return {"Name": "instance-id", "Values": [node]}
    host = _EC2_HOST.match(node)
    address = ".".join(host.groups()[:4]) if host else node
    try:
        ipaddress.IPv4Address(address)
    except ValueError:
        return {"Name": "tag:Name", "Values": [node]}
    return {"Name": "private-ip-address", "Values": [address]}


def describe(
    ec2: Any, cluster: str, filters: Sequence[dict[str, Any]], states: Sequence[str] | None
) -> list[ClusterInstance]:
    """The cluster's instances matching `filters` (every state when `states` is None), newest launch first."""
    wanted = [{"Name": f"tag:{TAG_CLUSTER}", "Values": [cluster]}, *filters]
    if states is not None:
        wanted.append({"Name": "instance-state-name", "Values": list(states)})
    found: list[ClusterInstance] = []
    for page in ec2.get_paginator("describe_instances").paginate(Filters=wanted):
        for reservation in page.get("Reservations", []):
            found.extend(_instance(raw) for raw in reservation.get("Instances", []))
    # newest first; among equal launch times the lower Name (controller-0 before controller-1)
    found.sort(key=lambda i: i.name)
    found.sort(key=lambda i: i.launch_time, reverse=True)
    return found


def controllers(ec2: Any, cluster: str, index: int | None, states: Sequence[str] | None) -> list[ClusterInstance]:
    """The cluster's controllers (role tag), or controller `index` by its Name tag; newest first."""
    filters = [{"Name": f"tag:{TAG_ROLE}", "Values": ["controller"]}]
    if index is not None:
        filters.append({"Name": "tag:Name", "Values": [f"{cluster}-controller-{index}"]})
    return describe(ec2, cluster, filters, states)


def login_nodes(ec2: Any, cluster: str, pool: str | None, states: Sequence[str] | None) -> list[ClusterInstance]:
    """The cluster's login nodes (role tag), or those of login pool `pool`; newest first."""
    filters = [{"Name": f"tag:{TAG_ROLE}", "Values": ["login"]}]
    if pool is not None:
        filters.append({"Name": f"tag:{TAG_LOGIN_POOL}", "Values": [pool]})
    return describe(ec2, cluster, filters, states)


def node_instances(ec2: Any, cluster: str, node: str, states: Sequence[str] | None) -> list[ClusterInstance]:
    """The cluster's instances named by `node` (an IP is reused by EC2: several over time); newest first."""
    return describe(ec2, cluster, [node_filter(node)], states)


def _instance(raw: dict[str, Any]) -> ClusterInstance:
    tags = {t["Key"]: t["Value"] for t in raw.get("Tags") or () if "Key" in t}
    launched = raw.get("LaunchTime")
    if not isinstance(launched, datetime):
        launched = datetime.fromisoformat(str(launched).replace("Z", "+00:00")) if launched else datetime.min
    return ClusterInstance(
        instance_id=str(raw["InstanceId"]),
        state=str(raw.get("State", {}).get("Name", "")),
        launch_time=launched if launched.tzinfo else launched.replace(tzinfo=UTC),
        role=tags.get(TAG_ROLE, ""),
        name=tags.get("Name", ""),
        private_ip=raw.get("PrivateIpAddress") or None,
    )
