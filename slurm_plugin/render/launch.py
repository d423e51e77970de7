"""slurm.conf's LaunchParameters (pure): what the product needs there, merged with a user's own LaunchParameters.

`clusters[].nss_slurm` renders `enable_nss_slurm`: slurmstepd then answers passwd/group lookups of its job's processes
from the job's credential (Slurm's nss_slurm; the compute node's bootstrap points nsswitch.conf at it, docs/users.md).
LaunchParameters is also a key users may set in `clusters[].slurm_settings`. Slurm keeps only the last
LaunchParameters line, so a user's line (written last, in the `custom` part) would silently drop the product's
parameters: `custom_settings` writes the user's value with the product's parameters appended instead.
"""

from __future__ import annotations

from cluster_config import Cluster
from cluster_config.slurm_settings import SettingValue, render_value

__all__ = ["KEY", "NSS_SLURM", "custom_settings", "launch_lines", "product_parameters"]

KEY = "LaunchParameters"
NSS_SLURM = "enable_nss_slurm"


def product_parameters(cluster: Cluster) -> tuple[str, ...]:
    """The LaunchParameters the config asks for (empty: none)."""
    return (NSS_SLURM,) if cluster.nss_slurm else ()


def launch_lines(cluster: Cluster) -> list[str]:
    """The product's LaunchParameters line with its comment, or nothing."""
    params = product_parameters(cluster)
    if not params:
        return []
    return [
        "# ---- job launch: nss_slurm answers a job's passwd/group lookups from its credential (clusters[].nss_slurm)",
        f"{KEY}={','.join(params)}",
    ]


def custom_settings(cluster: Cluster) -> dict[str, SettingValue]:
    """`clusters[].slurm_settings` as rendered: a user's LaunchParameters (any case) gets the product's parameters it
    lacks appended, keeping the user's order and spelling; every other setting is unchanged."""
    settings = dict(cluster.slurm_settings)
    wanted = product_parameters(cluster)
    for key, value in settings.items():
        if key.lower() != KEY.lower() or not wanted:
            continue
        words = [w for w in render_value(value).split(",") if w]
        have = {w.lower() for w in words}
        settings[key] = ",".join([*words, *(p for p in wanted if p.lower() not in have)])
    return settings
