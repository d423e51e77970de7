"""slurm.conf's comma-separated parameter lists the product sets (pure): LaunchParameters, SchedulerParameters,
SlurmctldParameters and AccountingStorageTRES, merged with a site's own.

- LaunchParameters: `clusters[].nss_slurm` renders `enable_nss_slurm`: slurmstepd then answers passwd/group lookups of
  its job's processes from the job's credential (Slurm's nss_slurm; the compute node's bootstrap points nsswitch.conf
  at it, docs/users.md).
- SchedulerParameters: `batch_sched_delay=0`. slurmctld schedules a submitted batch job in its 1 s background pass, but
  only once `batch_sched_delay` (default 3 s) has passed since the last scheduling pass: with Slurm's default a job
  submitted while other jobs come and go waits up to 3 s more before it is even allocated, and a cold node's launch
  waits with it (bench/README.md, cold start). 0: at most one main-scheduler pass per second while jobs arrive, each
  bounded by Slurm's own default_queue_depth. And `nohold_on_prolog_fail`: a batch job whose launch failed on a
  node (its prolog failed; slurmd already ran it after a controller takeover, "Duplicate jobid") is requeued to run
  elsewhere, not held with priority 0 until an administrator notices (Slurm's default); MaxBatchRequeue (5) bounds the
  retries, then Slurm holds it. The node is drained and the cluster manager replaces it (manager/reconcile.py).
- SlurmctldParameters: `enable_configless` and the power-save plugin's `idle_on_node_suspend,power_save_interval=1`
  (cluster_config.slurm_settings.PRODUCT_SLURMCTLD_PARAMETERS; written by render/base.py or the power-save fragment).
  A site adds its own (conmgr_*, enable_rpc_queue, ...); one naming a product parameter with another value is refused
  by `validate` (cluster_config/slurm_checks.py), so here the product's entries are only added to the site's.
- AccountingStorageTRES: `gres/gpu` when a pool has GPUs and accounting is on: Slurm accounts only the TRES the list
  names besides its defaults (billing, cpu, energy, mem, node, fs/disk, vmem, pages), so without it `sacct`/`sreport`
  show no GPU use and GPU limits (GrpTRES=gres/gpu=N) are not enforced.

All are keys sites may set in `clusters[].slurm_settings`. Slurm keeps only the last line of a key, so a site's line
(written last, in the `custom` part) would silently drop the product's parameters: `custom_settings` writes the
site's value with the product's parameters appended instead, except those the site set themselves (same name before
`=`: a site's `batch_sched_delay=3` wins).
"""

from __future__ import annotations

from cluster_config import Cluster
from cluster_config.slurm_settings import SettingValue, render_value

__all__ = ["GPU_TRES", "NSS_SLURM", "custom_settings", "launch_lines", "product_parameters"]

NSS_SLURM = "enable_nss_slurm"
SCHEDULER = ("batch_sched_delay=0", "nohold_on_prolog_fail")
GPU_TRES = "gres/gpu"
_COMMENTS = {
    "LaunchParameters": "# ---- job launch: nss_slurm answers a job's passwd/group lookups from its credential "
    "(clusters[].nss_slurm)",
    "SchedulerParameters": "# ---- scheduling: a submitted batch job is considered at slurmctld's next 1 s pass, "
    "not up to 3 s later; a job whose launch failed on a node is requeued, not held (render/parameter_lists.py)",
    "AccountingStorageTRES": "# ---- accounting: GPU use is recorded and GPU limits (GrpTRES=gres/gpu=N) enforced",
}


def product_parameters(
    cluster: Cluster, slurmctld: tuple[str, ...] = (), gpu_tres: bool = False
) -> dict[str, tuple[str, ...]]:
    """The parameters the product sets, by slurm.conf key (a key with none is left out). `slurmctld`: the
    SlurmctldParameters this render writes; `gpu_tres`: a pool has GPUs and accounting is on."""
    lists = {
        "LaunchParameters": (NSS_SLURM,) if cluster.nss_slurm else (),
        "SchedulerParameters": SCHEDULER,
        "SlurmctldParameters": slurmctld,
        "AccountingStorageTRES": (GPU_TRES,) if gpu_tres else (),
    }
    return {key: params for key, params in lists.items() if params}


def launch_lines(cluster: Cluster, gpu_tres: bool = False) -> list[str]:
    """The product's parameter-list lines of the `launch` fragment, each with its comment (SlurmctldParameters is
    written with the power-save settings or the base file instead)."""
    lines: list[str] = []
    for key, params in product_parameters(cluster, gpu_tres=gpu_tres).items():
        lines += [_COMMENTS[key], f"{key}={','.join(params)}"]
    return lines


def _name(word: str) -> str:
    return word.split("=", 1)[0].strip().lower()


def custom_settings(
    cluster: Cluster, slurmctld: tuple[str, ...] = (), gpu_tres: bool = False
) -> dict[str, SettingValue]:
    """`clusters[].slurm_settings` as rendered: a site's LaunchParameters, SchedulerParameters, SlurmctldParameters or
    AccountingStorageTRES (any case) gets the product's parameters it lacks (by name) appended, keeping the site's
    order and spelling; every other setting is unchanged."""
    settings = dict(cluster.slurm_settings)
    wanted = {key.lower(): params for key, params in product_parameters(cluster, slurmctld, gpu_tres).items()}
    for key, value in settings.items():
        params = wanted.get(key.lower())
        if not params:
            continue
        words = [w for w in render_value(value).split(",") if w]
        have = {_name(w) for w in words}
        settings[key] = ",".join([*words, *(p for p in params if _name(p) not in have)])
    return settings
