"""slurm.conf's comma-separated parameter lists the product sets (pure): LaunchParameters and SchedulerParameters,
merged with a user's own.

- LaunchParameters: `clusters[].nss_slurm` renders `enable_nss_slurm`: slurmstepd then answers passwd/group lookups of
  its job's processes from the job's credential (Slurm's nss_slurm; the compute node's bootstrap points nsswitch.conf
  at it, docs/users.md).
- SchedulerParameters: `batch_sched_delay=0`. slurmctld schedules a submitted batch job in its 1 s background pass, but
  only once `batch_sched_delay` (default 3 s) has passed since the last scheduling pass: with Slurm's default a job
  submitted while other jobs come and go waits up to 3 s more before it is even allocated, and a cold node's launch
  waits with it (bench/README.md, cold start). 0: at most one main-scheduler pass per second while jobs arrive, each
  bounded by Slurm's own default_queue_depth.

Both are keys users may set in `clusters[].slurm_settings`. Slurm keeps only the last line of a key, so a user's line
(written last, in the `custom` part) would silently drop the product's parameters: `custom_settings` writes the
user's value with the product's parameters appended instead, except those the user set themselves (same name before
`=`: a user's `batch_sched_delay=3` wins).
"""

from __future__ import annotations

from cluster_config import Cluster
from cluster_config.slurm_settings import SettingValue, render_value

__all__ = ["NSS_SLURM", "custom_settings", "launch_lines", "product_parameters"]

NSS_SLURM = "enable_nss_slurm"
SCHEDULER = ("batch_sched_delay=0",)
_COMMENTS = {
    "LaunchParameters": "# ---- job launch: nss_slurm answers a job's passwd/group lookups from its credential "
    "(clusters[].nss_slurm)",
    "SchedulerParameters": "# ---- scheduling: a submitted batch job is considered at slurmctld's next 1 s pass, "
    "not up to 3 s later (render/parameter_lists.py)",
}


def product_parameters(cluster: Cluster) -> dict[str, tuple[str, ...]]:
    """The parameters the product sets, by slurm.conf key (a key with none is left out)."""
    lists = {"LaunchParameters": (NSS_SLURM,) if cluster.nss_slurm else (), "SchedulerParameters": SCHEDULER}
    return {key: params for key, params in lists.items() if params}


def launch_lines(cluster: Cluster) -> list[str]:
    """The product's parameter-list lines, each with its comment."""
    lines: list[str] = []
    for key, params in product_parameters(cluster).items():
        lines += [_COMMENTS[key], f"{key}={','.join(params)}"]
    return lines


def _name(word: str) -> str:
    return word.split("=", 1)[0].strip().lower()


def custom_settings(cluster: Cluster) -> dict[str, SettingValue]:
    """`clusters[].slurm_settings` as rendered: a user's LaunchParameters or SchedulerParameters (any case) gets the
    product's parameters it lacks (by name) appended, keeping the user's order and spelling; every other setting is
    unchanged."""
    settings = dict(cluster.slurm_settings)
    wanted = {key.lower(): params for key, params in product_parameters(cluster).items()}
    for key, value in settings.items():
        params = wanted.get(key.lower())
        if not params:
            continue
        words = [w for w in render_value(value).split(",") if w]
        have = {_name(w) for w in words}
        settings[key] = ",".join([*words, *(p for p in params if _name(p) not in have)])
    return settings
