"""The config model's site customizations: custom boot actions, capacity reservations, extra managed IAM policies, how
jobs resolve their users (nss_slurm)."""

from __future__ import annotations

import base64
import json
from typing import Annotated

from pydantic import Field

from cluster_config.model_base import MANAGED_POLICY_PATTERN, StrictModel


class CustomAction(StrictModel):
    """A script a node runs at boot, as root, its output in the boot log; a failure fails the boot."""

    script: str = Field(
        pattern=r"^(s3://[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]/[^\s*?]+|/\S+)$",
        description="s3://bucket/key (downloaded with the node's role, which may read exactly these objects, so no * "
        "or ? in the key) or an absolute path on the image.",
    )
    args: list[Annotated[str, Field(pattern=r"^[^\n\r]*$")]] = Field(
        default_factory=list, description="Arguments passed to the script."
    )


class CustomActions(StrictModel):
    """Scripts run at two points of a node's boot, in order (docs/custom-actions.md)."""

    on_node_start: list[CustomAction] = Field(
        default_factory=list,
        description="After the munge key and the shared file systems, before any Slurm daemon starts.",
    )
    on_node_configured: list[CustomAction] = Field(
        default_factory=list,
        description="Controller: once slurmctld (and slurmdbd) answer, before the stack is told it is healthy. "
        "Compute: right before slurmd starts and the node registers.",
    )

    def empty(self) -> bool:
        """No action at all."""
        return not (self.on_node_start or self.on_node_configured)

    def encoded(self) -> str:
        """The actions as the user data carries them (ES_ACTIONS): base64 of their JSON, so no quoting reaches the
        node's env file; assets/bootstrap/elastic-slurm-custom-actions decodes it."""
        return base64.b64encode(json.dumps(self.model_dump(), sort_keys=True).encode()).decode()


NSS_SLURM_DESCRIPTION = (
    "Users resolve inside jobs from what slurmd knows of the job's user, without a local account or directory lookup "
    "on the compute node: Slurm's nss_slurm (LaunchParameters=enable_nss_slurm; each compute node puts `slurm` first "
    "for passwd and group in its nsswitch.conf at boot). Only the job's own user and groups resolve this way "
    "(docs/users.md)."
)

# EC2 takes at most 16 KB of user data; the boot script itself takes about 10 KB (controller) and 6.5 KB (compute)
MAX_ENCODED_ACTIONS = 4096


class CapacityReservation(StrictModel):
    """An On-Demand Capacity Reservation or a Capacity Block for ML the pool launches into (docs/capacity-reservations.md)."""

    id: str = Field(pattern=r"^cr-[0-9a-f]{8,17}$", description="The reservation id (cr-...).")
    capacity_block: bool = Field(
        default=False,
        description="A Capacity Block for ML: launches use market type capacity-block, and only inside the block's "
        "time window.",
    )


class IamPolicies(StrictModel):
    """Managed policies added to the nodes' roles (e.g. to read a site bucket), beside what the stacks grant."""

    controller: list[Annotated[str, Field(pattern=MANAGED_POLICY_PATTERN)]] = Field(
        default_factory=list, description="Managed policy ARNs for the controllers' role."
    )
    compute: list[Annotated[str, Field(pattern=MANAGED_POLICY_PATTERN)]] = Field(
        default_factory=list, description="Managed policy ARNs for the compute nodes' role (every region)."
    )
    login: list[Annotated[str, Field(pattern=MANAGED_POLICY_PATTERN)]] = Field(
        default_factory=list, description="Managed policy ARNs for the login nodes' role."
    )
