"""What a local cloud is made of and says about itself: its daemons (PID files, the markers `down` checks), the
units the controllers start, `local status`'s snapshot and `cloud.json` (what `up` decided), plus the small pieces
`LocalCloud.up` builds from (a free port block, the plugin programs' wrappers)."""

from __future__ import annotations

import secrets
import shlex
import socket
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cluster_config.model import Cluster
from localcloud import port_claims
from localcloud.aws.emulated_aws import DAEMON_PORTS_FROM
from localcloud.image import slurm_root
from localcloud.ops import Instance

# name -> (PID file name, marker its /proc/PID/cmdline must contain), in the order `down` stops them.
DAEMONS: list[tuple[str, str]] = [
    ("instance-runner", "localcloud.instances.instance_runner"),
    ("license-sync-timer", "while sleep"),
    ("longcheck-timer", "while sleep"),
    ("config-sync-timer", "while sleep"),
    ("prometheus", "prometheus"),
    ("exporter", "slurm-exporter"),
    ("webui", "slurm_plugin.webui"),
    ("slurmrestd", "slurmrestd"),
    ("bootwatch", "slurm_plugin.bootwatch"),
    ("clustermgr", "slurm_plugin.manager"),
    ("slurmctld", "slurmctld"),
    ("slurmdbd", "slurmdbd"),
    ("mariadbd", "mariadbd"),
    ("slapd", "slapd"),
    ("munged", "munged"),
    ("sssd", "sssd"),
    ("emulated-aws", "localcloud.aws.emulated_aws"),
]
# Started on the controller by its user data through the systemctl stand-in (PID files in run/units/): name -> unit
UNIT_PID_FILES = {
    "license-sync-timer": "slurm-license-sync.timer",
    "longcheck-timer": "slurm-longcheck.timer",
    "config-sync-timer": "slurm-config-sync.timer",
    "clustermgr": "slurm-clustermgr.service",
    "exporter": "slurm-exporter.service",
    "webui": "slurm-webui.service",  # with clusters[].rest_api
    "slurmrestd": "slurmrestd.service",
    "bootwatch": "slurm-bootwatch.service",
    "slurmctld": "slurmctld.service",
    "slurmdbd": "slurmdbd.service",
    "munged": "munge.service",
    "sssd": "sssd.service",  # with clusters[].directory
}
# The backup controller's (controller 1) units: the same names with "@1" (run/units-1/; `down` stops them first)
BACKUP = 1
BACKUP_DAEMONS: list[tuple[str, str]] = [(f"{n}@{BACKUP}", m) for n, m in DAEMONS if n in UNIT_PID_FILES]
# only on the primary: slurmdbd (the accounting host is controller 0) and the long health check's timer
PRIMARY_ONLY = {"slurmdbd", "longcheck-timer"}


class LocalCloudError(RuntimeError):
    """The local cloud cannot be started or used (one line)."""


@dataclass(frozen=True)
class Status:
    """A snapshot for `local status`."""

    state_dir: str
    daemons: dict[str, int | None]
    nodes: dict[str, str]
    instances: list[Instance]
    controllers: dict[str, str] = field(default_factory=dict)  # host -> acting/standby/down (scontrol ping)


@dataclass(frozen=True)
class CloudInfo:
    """What `up` decided; saved as state/cloud.json."""

    cluster: str
    config_path: str
    aws_endpoint_url: str
    regions: list[str]
    ports: dict[str, int]
    resume_timeout: int
    suspend_time: int
    accounting: bool
    slurm_root: str = ""
    slurm_version: str = ""
    shared_mount: str = "/shared"
    compute_user_data: dict[str, str] = field(default_factory=dict)  # the values of the compute user data
    pool_user_data: dict[str, dict[str, str]] = field(default_factory=dict)  # each pool's launch template adds these
    login_user_data: dict[str, dict[str, str]] = field(default_factory=dict)  # each login pool's template adds these
    controller: str = ""  # the controller's host name (its EC2 name, ip-a-b-c-d)
    controller_hosts: list[str] = field(default_factory=list)  # every controller's host name, primary first
    directory: bool = False  # the config has clusters[].directory: slapd and the controller's sssd run
    prometheus_url: str = (
        ""  # the host's Prometheus scraping the controller's exporter (localcloud/services/prometheus.py)
    )
    rest_api: bool = False  # clusters[].rest_api: slurmrestd and the web page run (ports: restd, webui)

    def to_json(self) -> dict[str, Any]:
        return dict(self.__dict__)


def port_block(size: int) -> int:
    """A base port such that base..base+size-1 are all free on 127.0.0.1, claimed for this process."""
    # below the kernel's ephemeral range (32768+ by default): an outgoing connection never takes a slurmd's port;
    # and below free_port's range (the daemons' ports), so a daemon never takes one either
    low = min(int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0]), DAEMON_PORTS_FROM)
    for _ in range(50):
        base = 10000 + secrets.randbelow(max(1, low - 10000 - size))
        try:
            for port in range(base, base + size):
                with socket.socket() as sock:
                    sock.bind(("127.0.0.1", port))
        except OSError:
            continue
        if port_claims.claim(range(base, base + size)):  # each slurmd binds its port only when its node boots
            return base
    raise LocalCloudError(f"no block of {size} free TCP ports found on 127.0.0.1")


def node_count(cluster: Cluster) -> int:
    return sum(pool.max_nodes for part in cluster.partitions for pool in part.pools)


def plugin_wrapper(program: str, env: dict[str, str]) -> str:
    """A ResumeProgram-style wrapper: export what an instance profile and the default manifest path give on EC2
    (the emulated AWS endpoint and credentials, the manifest's path), then exec the image's program."""
    exports = "\n".join(f"export {k}={shlex.quote(v)}" for k, v in env.items())
    return (
        f"#!/bin/sh\n# {program} for the local cloud (written by `elastic-slurm local up`).\n{exports}\n"
        f'exec {slurm_root.BIN_IN_ROOT}/{program} "$@"\n'
    )
