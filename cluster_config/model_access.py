"""The config model's access section: login nodes, where users log in and submit jobs (docs/login-nodes.md)."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from cluster_config.model_base import INSTANCE_TYPE_PATTERN, NAME_PATTERN, SECURITY_GROUP_PATTERN, StrictModel
from cluster_config.model_site import CustomActions

# One Auto Scaling group per login pool; a handful of login nodes serve thousands of users' shells.
MAX_LOGIN_NODES = 20


class LoginPool(StrictModel):
    """A group of identical login nodes: the cluster's compute image running the Slurm clients and `sackd`
    (configless: no slurm.conf on their disks), kept at `count` instances by an Auto Scaling group."""

    name: str = Field(
        pattern=NAME_PATTERN, max_length=32, description="Login pool name (lowercase letters and digits)."
    )
    instance_type: str = Field(
        default="c7i.large", pattern=INSTANCE_TYPE_PATTERN, description="Instance type of the login nodes."
    )
    count: int = Field(
        default=1,
        ge=0,
        le=MAX_LOGIN_NODES,
        description="Login nodes kept running (an Auto Scaling group replaces one that fails its EC2 status checks).",
    )
    security_groups: list[Annotated[str, Field(pattern=SECURITY_GROUP_PATTERN)]] = Field(
        default_factory=list,
        description="Extra security groups (of the cluster's VPC) on the login nodes, e.g. SSH from your network; "
        "they also get the cluster's SSH group (clusters[].ssh_allowed_cidrs).",
    )
    custom_actions: CustomActions = Field(default_factory=CustomActions, description="Boot scripts of the login nodes.")
