"""Custom Slurm settings: what users may add to slurm.conf, cgroup.conf, gres.conf and slurmdbd.conf, and the keys the
product owns.

`clusters[].slurm_settings` (slurm.conf), `clusters[].cgroup_settings` (cgroup.conf),
`clusters[].partitions[].slurm_settings` (that partition's PartitionName line),
`clusters[].partitions[].pools[].slurm_settings` (the pool's NodeName line), `clusters[].gres_settings` (gres.conf's
global lines), `clusters[].partitions[].pools[].gres_settings` (the pool's gres.conf line) and
`accounting.slurmdbd_settings` (slurmdbd.conf, by `elastic-slurm render-slurmdbd`) are merged into what elastic-slurm
writes: a key the product also writes replaces the product's value, any other key is added. Keys the product owns
(below, each with where to set it instead) are refused by `validate` with a one-line error naming the key — as
ParallelCluster's and AWS PCS's custom settings refuse theirs. Slurm reads keys case-insensitively, so do we.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Annotated

from pydantic import Field

SettingValue = str | int | bool
SlurmSettings = dict[Annotated[str, Field(pattern=r"^[A-Za-z][A-Za-z0-9]*$")], SettingValue]

_SET_AT_BOOT = "set from the controllers and file systems at boot"
_PLUGIN = "the elastic-slurm power-save plugin needs it"
# slurm.conf, cluster level: key -> why the product owns it / where to set it instead (compared case-insensitively).
CLUSTER_OWNED = {
    "ClusterName": "it is clusters[].name",
    "SlurmctldHost": _SET_AT_BOOT,
    "ControlMachine": _SET_AT_BOOT,
    "BackupController": _SET_AT_BOOT,
    "ControlAddr": _SET_AT_BOOT,
    "BackupAddr": _SET_AT_BOOT,
    "StateSaveLocation": "on the controllers' own file system (`/var/spool/slurm-state/<cluster>/slurmctld`)",
    "SlurmctldPort": "the security groups open Slurm's ports",
    "SlurmdPort": "the security groups open Slurm's ports",
    "SrunPortRange": "the security groups open exactly this range",
    "SlurmUser": "the images run slurmctld as the `slurm` user",
    "SlurmdUser": "slurmd runs as root",
    "AuthType": "munge is set up by the images",
    "CredType": "munge is set up by the images",
    "SlurmdSpoolDir": "set by the images",
    "SlurmctldPidFile": "the systemd units expect it",
    "SlurmdPidFile": "the systemd units expect it",
    "SlurmctldLogFile": "the log shipping expects it",
    "SlurmdLogFile": "the log shipping expects it",
    "ResumeProgram": _PLUGIN,
    "SuspendProgram": _PLUGIN,
    "ResumeFailProgram": _PLUGIN,
    "ResumeRate": _PLUGIN,
    "SuspendRate": _PLUGIN,
    "TreeWidth": _PLUGIN,
    "ReturnToService": _PLUGIN,
    "PrologSlurmctld": "it starts jobs on freshly booted nodes: set clusters[].slurm.early_start",
    "ResumeTimeout": "set clusters[].slurm.resume_timeout",
    "SuspendTime": "set clusters[].slurm.suspend_time",
    "SuspendTimeout": "set clusters[].slurm.suspend_timeout",
    "SuspendExcNodes": "set the pools' min_nodes",
    "HealthCheckProgram": "set clusters[].health_checks",
    "HealthCheckInterval": "set clusters[].health_checks.interval",
    "PreemptType": "set clusters[].preemption.type",
    "PreemptMode": "set clusters[].preemption.mode",
    "AccountingStorageType": "set accounting.mode",
    "AccountingStorageHost": "set accounting.mode",
    "AccountingStoragePort": "set accounting.mode",
    "SelectType": "memory and GPU scheduling need select/cons_tres",
    "ProctrackType": "job clean-up needs proctrack/cgroup",
    "GresTypes": "GPU pools set it",
    "NodeName": "nodes come from the pools",
    "NodeSet": "node sets come from the pools",
    "PartitionName": "partitions come from clusters[].partitions",
    "DownNodes": "node states are the plugin's",
    "Include": "the rendered files are included by the product",
}
PARTITION_OWNED = {
    "PartitionName": "it is partitions[].name",
    "Nodes": "the partition's nodes come from its pools and share_nodes_of",
    "Default": "set partitions[].default",
    "MaxTime": "set partitions[].max_time",
    "PriorityTier": "set partitions[].priority_tier",
    "GraceTime": "set clusters[].preemption.grace_time",
    "ResumeTimeout": "the plugin and the cluster manager time boots by clusters[].slurm.resume_timeout",
    "SuspendTime": "the power-save timers are clusters[].slurm's",
    "SuspendTimeout": "the power-save timers are clusters[].slurm's",
    "State": "the partition is UP; drain nodes instead",
}
POOL_OWNED = {
    "NodeName": "node names are {partition}-{pool}-{index}",
    "NodeAddr": "the plugin sets each node's address at launch",
    "NodeHostname": "the plugin sets each node's host name at launch",
    "Port": "slurmd listens on Slurm's port",
    "CPUs": "it comes from the instance type (the smallest of the pool); set Sockets/CoresPerSocket to shape it",
    "Procs": "it comes from the instance type (the smallest of the pool)",
    "RealMemory": "it comes from the instance type, less a reserve",
    "Gres": "GPUs come from the instance type",
    "Features": "set pools[].features",
    "Feature": "set pools[].features",
    "Weight": "set pools[].weight",
    "State": "nodes are CLOUD nodes powered up and down by the plugin",
}
# SlurmctldParameters (a comma-separated list, merged like SchedulerParameters by slurm_plugin/render/
# parameter_lists.py): what the product writes, and what a site's own list may not hold. A site's entry naming one of
# these with another value is refused by `validate` (cluster_config/slurm_checks.py); its other entries (conmgr_*,
# enable_rpc_queue, ...) are added.
# enable_configless: compute nodes fetch slurm.conf from slurmctld; idle_on_node_suspend, power_save_interval=1: the
# power-save plugin's (slurm_plugin/render/cluster.py)
PRODUCT_SLURMCTLD_PARAMETERS = ("enable_configless", "idle_on_node_suspend", "power_save_interval=1")
REFUSED_SLURMCTLD_PARAMETERS = {
    "cloud_dns": "the plugin tells slurmctld each node's address at launch (scontrol update NodeAddr=...)",
}
# A pool's node topology (NodeName Sockets/CoresPerSocket/ThreadsPerCore, from the instance cache): a pool that sets
# one of these in its slurm_settings sets the topology itself, and the product writes none of them
NODE_TOPOLOGY_KEYS = ("Boards", "SocketsPerBoard", "Sockets", "CoresPerSocket", "ThreadsPerCore")

CGROUP_OWNED = {"CgroupPlugin": "the images pick the cgroup plugin (autodetect)"}
_SECRET = "it comes from the accounting database's secret"
# slurmdbd.conf (render/dbd.py writes every one of these but DbdAddr and the backups)
DBD_OWNED = {
    "AuthType": "munge is set up by the images",
    "DbdHost": "slurmdbd runs on the primary controller of accounting.host_cluster, set at its boot",
    "DbdAddr": "the controllers reach slurmdbd at DbdHost (slurm.conf's AccountingStorageHost)",
    "DbdBackupHost": "one slurmdbd, on the primary controller of accounting.host_cluster",
    "DbdPort": "the controllers' security group opens it to the controllers only",
    "SlurmUser": "the images run slurmdbd as the `slurm` user",
    "LogFile": "the log shipping expects it",
    "PidFile": "the systemd unit expects it",
    "StorageType": "the accounting database is MySQL-compatible (RDS or Aurora)",
    "StorageHost": _SECRET,
    "StorageBackupHost": "the accounting database has one endpoint, in its secret",
    "StoragePort": _SECRET,
    "StorageUser": _SECRET,
    "StoragePass": _SECRET,
    "StorageLoc": "every cluster of the file keeps its records in slurm_acct_db",
}
_GPU_LINE = "a GPU line's key: set pools[].gres_settings"
_FROM_TYPE = "it comes from the instance type"
# gres.conf, global lines: what is left is AutoDetect (a line of its own; gres.conf(5); only `off`, AUTODETECT_ALLOWED)
GRES_OWNED = {
    "NodeName": "each GPU pool writes its nodes' line",
    "Name": "each GPU pool writes its nodes' line",
    "Type": "each GPU pool writes its nodes' line",
    "File": "each GPU pool writes its nodes' line",
    "MultipleFiles": "each GPU pool writes its nodes' line",
    "Count": _FROM_TYPE,
    "Cores": _GPU_LINE,
    "Links": _GPU_LINE,
    "Flags": _GPU_LINE,
}
# gres.conf, a GPU pool's line
GRES_POOL_OWNED = {
    "NodeName": "the line is the pool's nodes",
    "Name": "GPUs are the `gpu` GRES (slurm.conf's GresTypes)",
    "Type": "slurm.conf's Gres=gpu:N has no type, and gres.conf must agree with it",
    "File": "the NVIDIA device files follow the instance type's GPU count",
    "MultipleFiles": "the NVIDIA device files follow the instance type's GPU count",
    "Count": _FROM_TYPE,
}

# gres.conf AutoDetect: the images build Slurm without NVML, RSMI or oneAPI, and slurmd stops at start when asked to
# autodetect with a library it was not built with; GPUs come from the instance type (the pools' File= lines)
AUTODETECT_ALLOWED = {"off"}

# Keys that share one meaning: a user's DefMemPerNode replaces the product's DefMemPerCPU on a partition line, a site's
# PropagateResourceLimits the product's PropagateResourceLimitsExcept=MEMLOCK line (Slurm ignores the former beside
# the latter, slurm.conf(5)).
EXCLUSIVE = [
    frozenset({"defmempercpu", "defmempernode", "defmempergpu"}),
    frozenset({"propagateresourcelimits", "propagateresourcelimitsexcept"}),
]
_UNSAFE_VALUE = re.compile(r"[\s#\"'\\]")


def owned_key_errors(settings: dict[str, SettingValue], owned: dict[str, str]) -> list[str]:
    """One message per key of `settings` the product owns or whose value Slurm could not parse as one value."""
    errors = []
    lookup = {key.lower(): reason for key, reason in owned.items()}
    for key, value in settings.items():
        reason = lookup.get(key.lower())
        if reason is not None:
            errors.append(f"key '{key}' is set by elastic-slurm ({reason})")
        elif key.lower() == "autodetect" and render_value(value).lower() not in AUTODETECT_ALLOWED:
            errors.append(
                f"key '{key}': only 'off': the images build Slurm without GPU libraries (NVML, RSMI, oneAPI), so slurmd "
                "would stop at start; GPUs come from the instance type"
            )
        elif _UNSAFE_VALUE.search(render_value(value)):
            errors.append(
                f"key '{key}': value {str(value)!r} has a space, quote, '#' or backslash, which Slurm would split"
            )
    return errors


def render_value(value: SettingValue) -> str:
    """A YAML value as Slurm writes it: true/false → yes/no."""
    if isinstance(value, bool):
        return "yes" if value else "no"
    return str(value)


def overridden(key: str, settings: dict[str, SettingValue]) -> bool:
    """Whether the product's own `key` gives way to one of `settings` (same key, or one of the same meaning)."""
    mine = {k.lower() for k in settings}
    lower = key.lower()
    return lower in mine or any(lower in group and group & mine for group in EXCLUSIVE)


def merge_line_settings(pairs: list[tuple[str, str]], settings: dict[str, SettingValue]) -> list[str]:
    """`Key=value` words of one Slurm line: the product's pairs less those the user replaces, then the user's."""
    kept = [f"{k}={v}" for k, v in pairs if not overridden(k, settings)]
    return kept + setting_lines(settings)


def drop_replaced(lines: list[str], settings: dict[str, SettingValue]) -> list[str]:
    """A file's lines less the product's `Key=value` lines that one of `settings` replaces."""
    return [line for line in lines if not _is_replaced(line, settings)]


def setting_lines(settings: dict[str, SettingValue]) -> list[str]:
    """The user's settings as `Key=value` lines."""
    return [f"{k}={render_value(v)}" for k, v in settings.items()]


def _is_replaced(line: str, settings: dict[str, SettingValue]) -> bool:
    head = line.split("=", 1)
    return len(head) == 2 and not line.lstrip().startswith("#") and overridden(head[0].strip(), settings)


def refuse_owned(owned: dict[str, str]) -> Callable[[dict[str, SettingValue]], dict[str, SettingValue]]:
    """A pydantic after-validator refusing the keys of `owned` (and values Slurm would split)."""

    def check(settings: dict[str, SettingValue]) -> dict[str, SettingValue]:
        errors = owned_key_errors(settings, owned)
        if errors:
            raise ValueError("; ".join(errors))
        return settings

    return check
