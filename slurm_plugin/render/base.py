"""Render the production base slurm.conf (site settings) and cgroup.conf of one cluster on EC2 (pure).

`render_cluster` (render.py) writes the fragments: nodes, partitions, power saving, preemption. The base written here
holds everything else — ClusterName, SlurmctldHost (primary and backup), munge auth, StateSaveLocation on the
controllers' own file system, plugins, accounting, logs, health check — and ends with `Include` of the fragment file, so no key is set
twice. The one key both need, SlurmctldParameters, is written here only: render with
`RenderOptions(slurmctld_parameters_in_base=True)` and this file carries `enable_configless` plus the fragment's own
parameters (`PRODUCT_SLURMCTLD_PARAMETERS`), because Slurm keeps only the last SlurmctldParameters line; a site's own
SlurmctldParameters (clusters[].slurm_settings) replaces this line with the merged list, written in the fragments'
`custom` part (render/parameter_lists.py).
Compute nodes run `slurmd --conf-server <controllers>` (configless) and get this file and its fragments from slurmctld.
The controller hostnames are known only at boot, so they come in through `BaseSettings`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import PurePosixPath

from cluster_config import Cluster, ElasticSlurmConfig
from cluster_config.slurm_settings import PRODUCT_SLURMCTLD_PARAMETERS, SettingValue, drop_replaced, setting_lines
from slurm_plugin.controller_state import controller_state_dir
from slurm_plugin.render import rest_api
from slurm_plugin.render.cluster import HEADER
from slurm_plugin.render.manifest import RenderError, shared_mount

__all__ = [
    "BaseSettings",
    "conf_server",
    "parse_controller_host",
    "render_base_conf",
    "render_cgroup_conf",
    "shared_mount",  # from render/manifest.py, re-exported for its callers
    "state_save_location",
]

HEALTHCHECK_PROGRAM = "/opt/elastic-slurm/bin/elastic-slurm-healthcheck"
# The ports srun listens on for its job steps: the one setting the node security group opens (stacks/network.py).
SRUN_PORT_RANGE = (60001, 63000)
_HOST = re.compile(r"^(?P<name>[A-Za-z0-9][A-Za-z0-9.-]*)(?:\((?P<addr>[A-Za-z0-9.:-]+)\))?$")


@dataclass(frozen=True)
class BaseSettings:
    """What only the boot script knows, and the production paths (tests redirect them to a temporary directory)."""

    controller_hosts: tuple[str, ...]  # "name" or "name(address)"; first is the primary, second the backup
    fragments_path: str = (
        "/etc/slurm/slurm-elastic.conf"  # must sit beside slurm.conf (configless): only its name is used
    )
    slurmdbd_host: str | None = None  # needed when accounting.mode is not none
    state_save_location: str | None = None  # default: on the controllers' own file system (manifest.py)
    log_dir: str = "/var/log/slurm"
    slurmd_spool_dir: str = "/var/spool/slurmd"
    pid_dir: str = "/run"  # slurmd's PID file (slurmd runs as root)
    # slurmctld runs as SlurmUser, which cannot write /run itself: its unit's RuntimeDirectory=slurmctld can
    slurmctld_pid_file: str = "/run/slurmctld/slurmctld.pid"
    slurm_user: str = "slurm"
    slurmctld_port: int | None = None  # None: Slurm's default 6817
    slurmd_port: int | None = None  # None: Slurm's default 6818
    slurmdbd_port: int | None = None  # AccountingStoragePort; None: Slurm's default 6819
    healthcheck_program: str | None = HEALTHCHECK_PROGRAM
    # What differs only where many slurmd share one machine (the local cloud, docs/local-cloud.md): per-node PID and
    # log files (`%n`), no cgroup plugins, node hardware taken from the config (SlurmdParameters=config_overrides),
    # and shorter Slurm timers (`timers`: Key -> value, e.g. SlurmdTimeout). Production leaves them at the defaults.
    per_node_files: bool = False
    cgroup: bool = True
    config_overrides: bool = False
    timers: tuple[tuple[str, str], ...] = ()
    # clusters[].rest_api where the machine differs: slurmrestd's port (None: the config's) and the web page's
    # listen address (None: 0.0.0.0:<rest_api.web_port>)
    rest_api_port: int | None = None
    web_ui_listen: str | None = None


def parse_controller_host(text: str) -> tuple[str, str | None]:
    """`name` or `name(address)` → (name, address); ValueError (one line) otherwise."""
    match = _HOST.match(text.strip())
    if not match:
        raise ValueError(f"'{text}' is not a host name or name(address)")
    return match["name"], match["addr"]


def conf_server(settings: BaseSettings) -> str:
    """The `slurmd --conf-server` argument: the controllers' addresses (or names), primary first, with `:port`
    when SlurmctldPort is not Slurm's default."""
    hosts = [parse_controller_host(h) for h in settings.controller_hosts]
    port = f":{settings.slurmctld_port}" if settings.slurmctld_port is not None else ""
    return ",".join(f"{addr or name}{port}" for name, addr in hosts)


def render_base_conf(config: ElasticSlurmConfig, cluster_name: str, settings: BaseSettings) -> str:
    """The base slurm.conf of `cluster_name`; RenderError (one line naming the setting) on bad input."""
    try:
        cluster = config.cluster(cluster_name)
    except KeyError:
        raise RenderError(f"--cluster: no cluster '{cluster_name}' in the config") from None
    lines = [HEADER.format(name=cluster.name), ""]
    lines += _controllers(cluster, settings)
    lines += _daemons(settings)
    lines += _plugins(settings)
    lines += _accounting(config, settings)
    lines += _health(cluster, settings)
    lines += rest_api.slurm_conf_lines(cluster, state_save_location(cluster, settings))
    if settings.timers:
        lines += ["# ---- Slurm timers of this machine", *(f"{key}={value}" for key, value in settings.timers)]
    # clusters[].slurm_settings replace the same keys here; they are written last, in the included file
    lines = drop_replaced(lines, cluster.slurm_settings)
    lines += ["", "# ---- the cluster shape (nodes, partitions, power saving) from `elastic-slurm render`"]
    # Relative, beside slurm.conf: configless slurmctld ships an included file to slurmd only in that form (an
    # absolute path is read from the compute node's own disk, where nothing is: the node would lack every partition).
    lines += [f"Include {PurePosixPath(settings.fragments_path).name}", ""]
    return "\n".join(lines)


def render_cgroup_conf(settings: BaseSettings | None = None, custom: dict[str, SettingValue] | None = None) -> str:
    """cgroup.conf for proctrack/cgroup and task/cgroup: confine jobs to their cores and memory (with
    `settings.cgroup` off: no cgroup plugin at all; slurmd 24.11+ initializes one even without cgroup plugins).
    `custom` (clusters[].cgroup_settings) replaces the same keys and adds the others."""
    if settings is not None and not settings.cgroup:
        lines = ["# Generated by `elastic-slurm render`: no cgroup plugin on this machine.", "CgroupPlugin=disabled"]
    else:
        lines = [
            "# Generated by `elastic-slurm render --controller-hosts ...`: do not edit, re-render instead.",
            "CgroupPlugin=autodetect",
            "ConstrainCores=yes",
            "ConstrainRAMSpace=yes",
            "ConstrainSwapSpace=yes",
            "ConstrainDevices=yes",
        ]
    if custom:
        lines = [*drop_replaced(lines, custom), "# clusters[].cgroup_settings of the config", *setting_lines(custom)]
    return "\n".join([*lines, ""])


def _controllers(cluster: Cluster, settings: BaseSettings) -> list[str]:
    hosts = settings.controller_hosts
    if len(hosts) != cluster.controller.count:
        raise RenderError(
            f"--controller-hosts: cluster {cluster.name} has {cluster.controller.count} controller(s),"
            f" {len(hosts)} host(s) given"
        )
    parsed = []
    for host in hosts:
        try:
            parsed.append(parse_controller_host(host))
        except ValueError as exc:
            raise RenderError(f"--controller-hosts: {exc}") from None
    state = settings.state_save_location or _state_dir(cluster)
    lines = [
        f"ClusterName={cluster.name}",
        "# primary, then backup: the backup takes over from the state on the controllers' own file system",
        *(f"SlurmctldHost={name}({addr})" if addr else f"SlurmctldHost={name}" for name, addr in parsed),
        "# configless: compute nodes run `slurmd --conf-server <controllers>` and fetch this file from slurmctld",
        f"SlurmctldParameters={','.join(PRODUCT_SLURMCTLD_PARAMETERS)}",
        f"StateSaveLocation={state}",
    ]
    if settings.slurmctld_port is not None:
        lines.append(f"SlurmctldPort={settings.slurmctld_port}")
    if settings.slurmd_port is not None:
        lines.append(f"SlurmdPort={settings.slurmd_port}")
    return lines


def state_save_location(cluster: Cluster, settings: BaseSettings) -> str:
    """StateSaveLocation of `cluster` on this machine."""
    return settings.state_save_location or _state_dir(cluster)


def _state_dir(cluster: Cluster) -> str:
    return controller_state_dir(cluster.name, "slurmctld")


def _daemons(settings: BaseSettings) -> list[str]:
    log, pid = settings.log_dir.rstrip("/"), settings.pid_dir.rstrip("/")
    slurmd = "slurmd-%n" if settings.per_node_files else "slurmd"
    return [
        f"SlurmUser={settings.slurm_user}",
        "SlurmdUser=root",
        "AuthType=auth/munge",
        "CredType=cred/munge",
        f"SlurmdSpoolDir={settings.slurmd_spool_dir}",
        f"SlurmctldPidFile={settings.slurmctld_pid_file}",
        f"SlurmdPidFile={pid}/{slurmd}.pid",
        f"SlurmctldLogFile={log}/slurmctld.log",
        f"SlurmdLogFile={log}/{slurmd}.log",
        "SlurmctldDebug=info",
        "SlurmdDebug=info",
        "MailProg=/bin/true",
        f"SrunPortRange={SRUN_PORT_RANGE[0]}-{SRUN_PORT_RANGE[1]}",
    ]


def _plugins(settings: BaseSettings) -> list[str]:
    if not settings.cgroup:
        return [
            "# ---- no cgroup plugins on this machine (cgroup.conf: CgroupPlugin=disabled)",
            "ProctrackType=proctrack/linuxproc",
            "TaskPlugin=task/none",
            "SelectType=select/cons_tres",
            "SelectTypeParameters=CR_Core_Memory",
            "SchedulerType=sched/backfill",
            "MpiDefault=none",
            "JobAcctGatherType=jobacct_gather/none",
            *(["SlurmdParameters=config_overrides"] if settings.config_overrides else []),
        ]
    return [
        "# ---- process tracking, task binding and resource selection (cgroup.conf sits beside this file)",
        "ProctrackType=proctrack/cgroup",
        "TaskPlugin=task/cgroup,task/affinity",
        "SelectType=select/cons_tres",
        "SelectTypeParameters=CR_Core_Memory",
        "SchedulerType=sched/backfill",
        "# MPI: no default plugin; MPI jobs ask `srun --mpi=pmix` (the images build mpi/pmix: docs/images.md)",
        "MpiDefault=none",
        "JobAcctGatherType=jobacct_gather/cgroup",
        *(["SlurmdParameters=config_overrides"] if settings.config_overrides else []),
    ]


def _accounting(config: ElasticSlurmConfig, settings: BaseSettings) -> list[str]:
    if config.accounting.mode == "none":
        return [
            "# ---- accounting: none (accounting.mode is none)",
            "AccountingStorageType=accounting_storage/none",
            "JobCompType=jobcomp/none",
        ]
    if not settings.slurmdbd_host:
        raise RenderError(f"--slurmdbd-host: needed because accounting.mode is {config.accounting.mode}")
    return [
        "# ---- accounting through slurmdbd (the cluster is registered by `slurm-accounting-apply`)",
        "AccountingStorageType=accounting_storage/slurmdbd",
        f"AccountingStorageHost={settings.slurmdbd_host}",
        *([f"AccountingStoragePort={settings.slurmdbd_port}"] if settings.slurmdbd_port is not None else []),
        "AccountingStorageEnforce=associations,limits,qos",
        "JobAcctGatherFrequency=task=30",
        "JobCompType=jobcomp/none",
    ]


def _health(cluster: Cluster, settings: BaseSettings) -> list[str]:
    if not settings.healthcheck_program:
        return []
    return [
        "# ---- node health check (assets/health): a failure drains the node with reason (Health:<check>)",
        f"HealthCheckProgram={settings.healthcheck_program}",
        f"HealthCheckInterval={cluster.health_checks.interval}",
        "HealthCheckNodeState=ANY,CYCLE",
    ]
