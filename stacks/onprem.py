"""What a cluster's security groups open to on-prem clusters (`onprem_clusters`, docs/onprem-burst.md).

A site's slurmctld hosts and submit hosts reach, inside the VPC (over the site's VPN or Direct Connect):
- the slurmctld of every cluster they burst to (`sbatch -M` submits to it directly; its slurmctld answers will-run
  queries and, for a federation member, the site's slurmctld),
- slurmdbd on the accounting host cluster's controller (the site's slurmctld stores its accounting there; `sbatch -M`
  reads the cluster list from it).
"""

from __future__ import annotations

from dataclasses import dataclass

from cluster_config.model import ElasticSlurmConfig
from stacks.naming import SLURMCTLD_PORT, SLURMDBD_PORT


@dataclass(frozen=True)
class OnpremIngress:
    """One ingress rule on the cluster members' security group."""

    cidr: str
    port: int
    description: str


def onprem_ingress(config: ElasticSlurmConfig, cluster: str, accounting_host: str) -> tuple[OnpremIngress, ...]:
    """The rules `cluster`'s members' security group needs for the on-prem clusters of `config`."""
    rules: dict[tuple[str, int], OnpremIngress] = {}
    for site in config.onprem_clusters:
        if cluster in site.burst_to:
            for cidr in site.cidrs:
                rules.setdefault(
                    (cidr, SLURMCTLD_PORT),
                    OnpremIngress(cidr, SLURMCTLD_PORT, f"slurmctld from on-prem {site.name} {cidr}"),
                )
        if cluster == accounting_host and config.accounting.mode != "none":
            for cidr in site.cidrs:
                rules.setdefault(
                    (cidr, SLURMDBD_PORT),
                    OnpremIngress(cidr, SLURMDBD_PORT, f"slurmdbd from on-prem {site.name} {cidr}"),
                )
    return tuple(rules.values())
