"""The config model's on-prem clusters: existing Slurm clusters, run by their site, that burst into the deployment.

The deployment does not build or run them. It gives each one what it needs to join (docs/onprem-burst.md): the
cluster and its users' associations in the shared accounting database (so `sbatch -M site,cloud` finds both), its
share of the remote licenses, and security-group rules that let its hosts reach slurmdbd and the slurmctld of the
clusters it bursts to.
"""

from __future__ import annotations

import ipaddress
from typing import Annotated

from pydantic import Field, field_validator

from cluster_config.model_base import CLUSTER_NAME_PATTERN, StrictModel


def site_cidr(value: str) -> str:
    """An IPv4 CIDR of site hosts: no host bits, and never the whole internet (slurmdbd and slurmctld are behind it)."""
    try:
        net = ipaddress.IPv4Network(value)
    except ValueError as exc:  # AddressValueError and NetmaskValueError are ValueErrors
        raise ValueError(f"'{value}' is not an IPv4 CIDR: {exc}") from None
    if net.prefixlen < 8:
        raise ValueError(
            f"'{value}' opens slurmdbd and slurmctld to /{net.prefixlen}; name the site's hosts (/8 or longer)"
        )
    return net.with_prefixlen  # an address alone is its /32: CDK's Peer.ipv4 refuses a CIDR without a mask


class OnpremCluster(StrictModel):
    """An existing Slurm cluster outside the deployment whose users burst into its clusters (docs/onprem-burst.md)."""

    name: str = Field(
        pattern=CLUSTER_NAME_PATTERN,
        max_length=32,
        description="The site's ClusterName (its slurm.conf); registered in the shared accounting database.",
    )
    burst_to: list[Annotated[str, Field(pattern=CLUSTER_NAME_PATTERN)]] = Field(
        min_length=1,
        description="Clusters of this file the site's users submit to (`sbatch -M <site>,<cluster>`); several only "
        "when they are members of the federation (one munge key).",
    )
    controller_cidrs: list[str] = Field(
        min_length=1,
        description="Addresses of the site's slurmctld hosts: they reach slurmdbd (accounting) and the `burst_to` "
        "clusters' slurmctld.",
    )
    submit_cidrs: list[str] = Field(
        default_factory=list,
        description="Addresses of the site's login/submit hosts: `sbatch -M` asks slurmdbd for the clusters and "
        "the chosen cluster's slurmctld directly.",
    )

    @field_validator("controller_cidrs", "submit_cidrs")
    @classmethod
    def _cidrs(cls, values: list[str]) -> list[str]:
        return [site_cidr(value) for value in values]

    @property
    def cidrs(self) -> list[str]:
        """Every address range of the site's hosts, each once."""
        return list(dict.fromkeys([*self.controller_cidrs, *self.submit_cidrs]))
