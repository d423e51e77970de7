"""What is deployed of a cluster, read from AWS: its stacks (`es-NAME-*`), controller instances and config URL, and
the clusters of a region.

A stack belongs to cluster NAME when it is named `es-NAME-PART` with a PART the app creates (network, storage, images,
cluster, accounting, network-REGION, region-REGION, federation-OTHER), so that `es-a-b-network` is cluster `a-b`'s and
not `a`'s. The stacks themselves carry no tags (cdk.json sets `@aws-cdk/core:explicitStackTags`; their resources are
tagged); a stack that does carry an `elastic-slurm:cluster` tag must name the cluster. Controllers are the instances
tagged with the cluster and `elastic-slurm:role=controller` (CloudFormation tags the instance itself).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from elastic_slurm.lifecycle.aws import aws_errors, client
from elastic_slurm.lifecycle.deployed import config_url
from slurm_plugin.naming import TAG_CLUSTER, TAG_ROLE, stack_name

CONFIG_URL_SUFFIX = "/config-url"
# the parts of `es-NAME-PART` stacks (stacks/app_builder.py, stacks/federation.py): NAME may contain '-', so a stack
# of cluster `a-b` (`es-a-b-network`) must not count as cluster `a`'s
_PART = re.compile(
    r"^(network|storage|images|cluster|accounting)$|^(network|region)-[a-z]{2}(-gov)?-[a-z]+-\d$"
    r"|^federation-[a-z][a-z0-9-]*[a-z0-9]$"
)
PARAMETER_ROOT = "/elastic-slurm/"


@dataclass(frozen=True)
class StackStatus:
    """One CloudFormation stack of a cluster."""

    name: str
    region: str
    status: str
    reason: str = ""


@dataclass(frozen=True)
class Controller:
    """One controller instance."""

    instance_id: str
    state: str
    instance_type: str
    private_ip: str
    name: str


@dataclass(frozen=True)
class ClusterStatus:
    """Everything `cluster status` prints of one cluster."""

    name: str
    region: str
    config_url: str | None
    stacks: list[StackStatus]
    controllers: list[Controller]

    @property
    def found(self) -> bool:
        """Whether anything of the cluster exists."""
        return bool(self.config_url or self.stacks or self.controllers)


def _tags(stack: dict[str, Any]) -> dict[str, str]:
    return {t["Key"]: t["Value"] for t in stack.get("Tags", [])}


def all_stacks(region: str) -> list[dict[str, Any]]:
    """Every live stack of the region (DescribeStacks, all pages)."""
    with aws_errors(f"cloudformation describe-stacks ({region})"):
        pages = client("cloudformation", region).get_paginator("describe_stacks").paginate()
        return [stack for page in pages for stack in page.get("Stacks", [])]


def belongs_to(stack: dict[str, Any], cluster: str) -> bool:
    """Whether a stack is one of the cluster's: named `es-NAME-PART` with one of the parts the app creates, and (when
    the stack carries tags) tagged with the cluster."""
    name = str(stack["StackName"])
    prefix = stack_name(cluster, "")
    if not name.startswith(prefix) or not _PART.match(name[len(prefix) :]):
        return False
    tagged = _tags(stack).get(TAG_CLUSTER)
    return tagged is None or tagged == cluster


def cluster_of(stack: dict[str, Any]) -> str | None:
    """The cluster whose `es-NAME-cluster` stack this is (None for any other stack)."""
    name = str(stack["StackName"])
    if not (name.startswith("es-") and name.endswith("-cluster")) or len(name) <= len("es--cluster"):
        return None
    cluster = name[3:].removesuffix("-cluster")
    return cluster if belongs_to(stack, cluster) else None


def cluster_stacks(cluster: str, region: str, stacks: list[dict[str, Any]] | None = None) -> list[StackStatus]:
    """The cluster's stacks in one region, by name."""
    found = [s for s in (stacks if stacks is not None else all_stacks(region)) if belongs_to(s, cluster)]
    return sorted(
        (StackStatus(s["StackName"], region, s["StackStatus"], s.get("StackStatusReason", "")) for s in found),
        key=lambda s: s.name,
    )


def controllers(cluster: str, region: str) -> list[Controller]:
    """The cluster's controller instances (any state but terminated), by Name tag."""
    filters = [
        {"Name": f"tag:{TAG_CLUSTER}", "Values": [cluster]},
        {"Name": f"tag:{TAG_ROLE}", "Values": ["controller"]},
        {"Name": "instance-state-name", "Values": ["pending", "running", "stopping", "stopped", "shutting-down"]},
    ]
    with aws_errors(f"ec2 describe-instances ({region})"):
        pages = client("ec2", region).get_paginator("describe_instances").paginate(Filters=filters)
        raw = [i for page in pages for r in page.get("Reservations", []) for i in r.get("Instances", [])]
    out = []
    for instance in raw:
        tags = {t["Key"]: t["Value"] for t in instance.get("Tags", [])}
        out.append(
            Controller(
                instance["InstanceId"],
                instance["State"]["Name"],
                instance.get("InstanceType", ""),
                instance.get("PrivateIpAddress", ""),
                tags.get("Name", ""),
            )
        )
    return sorted(out, key=lambda c: (c.name, c.instance_id))


def cluster_status(cluster: str, region: str, extra_regions: tuple[str, ...] = ()) -> ClusterStatus:
    """Config URL, stacks (home region, then `extra_regions`: the remote regions' stacks) and controllers."""
    stacks = [s for r in (region, *extra_regions) for s in cluster_stacks(cluster, r)]
    return ClusterStatus(cluster, region, config_url(cluster, region), stacks, controllers(cluster, region))


def deployed_names(region: str) -> dict[str, str]:
    """Cluster name → config URL, for every `/elastic-slurm/NAME/config-url` parameter of the region."""
    names: list[str] = []
    with aws_errors(f"ssm describe-parameters ({region})"):
        ssm = client("ssm", region)
        begins = [{"Key": "Name", "Option": "BeginsWith", "Values": [PARAMETER_ROOT]}]
        for page in ssm.get_paginator("describe_parameters").paginate(ParameterFilters=begins):
            for parameter in page.get("Parameters", []):
                name = str(parameter["Name"])
                middle = name[len(PARAMETER_ROOT) : -len(CONFIG_URL_SUFFIX)]
                if name.startswith(PARAMETER_ROOT) and name.endswith(CONFIG_URL_SUFFIX) and "/" not in middle:
                    names.append(name)
        values: dict[str, str] = {}
        for start in range(0, len(names), 10):  # GetParameters takes 10 names at most
            for parameter in ssm.get_parameters(Names=names[start : start + 10]).get("Parameters", []):
                values[str(parameter["Name"])[len(PARAMETER_ROOT) : -len(CONFIG_URL_SUFFIX)]] = parameter["Value"]
    return values


def list_clusters(region: str) -> list[tuple[str, StackStatus | None, str | None]]:
    """(cluster, its `es-NAME-cluster` stack or None, its config URL or None) for every cluster found in the region
    by its config-url parameter or its cluster stack, by name."""
    urls = deployed_names(region)
    stacks = all_stacks(region)
    cluster_stack = {name: stack for stack in stacks if (name := cluster_of(stack)) is not None}
    out = []
    for name in sorted(set(urls) | set(cluster_stack)):
        stack = cluster_stack.get(name)
        status = StackStatus(stack["StackName"], region, stack["StackStatus"]) if stack else None
        out.append((name, status, urls.get(name)))
    return out
