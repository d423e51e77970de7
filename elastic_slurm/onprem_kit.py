"""What a site admin adds to an on-prem cluster so it bursts into the deployment (`elastic-slurm onprem-kit`).

Pure text from the config: the slurm.conf lines that put the site's accounting in the deployment's slurmdbd (the
multi-cluster operation `sbatch -M` needs one accounting database for all clusters), the submit environment of its
users, and the firewall openings on both sides. Which secret holds the munge key the site must use is here too; the
command (elastic_slurm/commands/onprem_cmd.py) looks up slurmdbd's host and fetches the key. docs/onprem-burst.md.
"""

from __future__ import annotations

from dataclasses import dataclass

from cluster_config.model import ElasticSlurmConfig
from cluster_config.model_onprem import OnpremCluster
from slurm_plugin.naming import SLURMCTLD_PORT, SLURMDBD_PORT, munge_secret_name


@dataclass(frozen=True)
class MungeSource:
    """The Secrets Manager secret (and its region) whose key every host of the site must use."""

    secret_id: str
    region: str


def site(config: ElasticSlurmConfig, name: str) -> OnpremCluster:
    """The on-prem cluster `name` of the config (KeyError if none)."""
    for candidate in config.onprem_clusters:
        if candidate.name == name:
            return candidate
    raise KeyError(name)


def munge_source(config: ElasticSlurmConfig) -> MungeSource:
    """The key of the accounting host cluster: slurmdbd checks the site's credentials with it, and the checks
    (cluster_config/onprem_checks.py) let a site burst only to clusters that share it."""
    host = config.accounting_host
    return MungeSource(munge_secret_name(host), config.cluster(host).region)


def slurm_conf_lines(
    config: ElasticSlurmConfig, onprem: OnpremCluster, slurmdbd_host: str, slurmdbd_port: int = SLURMDBD_PORT
) -> str:
    """The lines the site's slurm.conf gets (its own accounting lines give way to these), with what to do besides."""
    clusters = ",".join([onprem.name, *onprem.burst_to])
    source = munge_source(config)
    return "\n".join(
        [
            f"# On-prem cluster {onprem.name} bursting into {', '.join(onprem.burst_to)} (elastic-slurm onprem-kit).",
            f"# ClusterName must stay {onprem.name}: the accounting database knows the site by it.",
            "AccountingStorageType=accounting_storage/slurmdbd",
            f"AccountingStorageHost={slurmdbd_host}",
            f"AccountingStoragePort={slurmdbd_port}",
            f"# munge: every host of the site uses the key of secret {source.secret_id} ({source.region}):",
            f"#   elastic-slurm onprem-kit CONFIG --site {onprem.name} --munge-key-out /etc/munge/munge.key",
            f"# Users submit with `sbatch -M {clusters}` (or SBATCH_CLUSTERS={clusters} in their profile): the job",
            "# goes to the site while it has room (a tie goes to the local cluster), else to the cloud.",
            f"# Firewall: the site's hosts reach TCP {SLURMDBD_PORT} (slurmdbd on cluster "
            f"{config.accounting_host}'s controller) and {SLURMCTLD_PORT} (slurmctld of "
            f"{', '.join(onprem.burst_to)});",
            "# slurmdbd reaches the site's SlurmctldPort (it pushes account and license changes to every cluster).",
            "# The deployment's security groups open its side to onprem_clusters[].controller_cidrs and submit_cidrs.",
            "",
        ]
    )
