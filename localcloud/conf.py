"""Text of the local cloud's own config files (pure): base slurm.conf, slurmdbd.conf, my.cnf.

The base slurm.conf is the local overlay: paths under the state dir, loopback ports, no cgroup plugins (this machine
mounts only cgroup v1 controllers), accounting through slurmdbd; SlurmUser is `slurm` as on EC2 and munge is reached at
its default socket (/run/munge, bound per machine). Compute nodes run configless: slurmctld ships this file, the
fragments it includes and cgroup.conf. It ends with `Include` of the fragments produced by the production `render`
code (nodes, partitions, power-save programs and timers), so the cluster shape is exactly what EC2 would get.
"""

from __future__ import annotations

from dataclasses import dataclass

from localcloud.layout import Layout
from slurm_plugin.render import FRAGMENT_SLURMCTLD_PARAMETERS

DB_NAME = "slurm_acct_db"
DB_USER = "slurm"
CRED_EXPIRE = 20


@dataclass(frozen=True)
class Ports:
    """Loopback TCP ports of one local cloud."""

    aws: int
    mysql: int
    slurmctld: int
    slurmdbd: int
    slurmd_base: int


def slurm_conf(cluster: str, hostname: str, layout: Layout, ports: Ports, accounting: bool, slurmd_timeout: int) -> str:
    """The base slurm.conf; the rendered fragments are included at the end."""
    # cred_expire is also how long a requeued job waits before it may start again (default 120 s).
    auth = f"cred_expire={CRED_EXPIRE}"
    lines = [
        "# Written by `elastic-slurm local up` — the local-cloud overlay. Cluster shape: see the Include at the end.",
        f"ClusterName={cluster}",
        f"SlurmctldHost={hostname}(127.0.0.1)",
        f"SlurmctldPort={ports.slurmctld}",
        f"SlurmdPort={ports.slurmd_base}",
        "SlurmUser=slurm",
        "SlurmdUser=root",
        "# compute nodes fetch this file (and what it includes, and cgroup.conf) from slurmctld",
        "SlurmctldParameters=" + ",".join(("enable_configless", *FRAGMENT_SLURMCTLD_PARAMETERS)),
        "AuthType=auth/munge",
        "CredType=cred/munge",
        f"AuthInfo={auth}",
        f"StateSaveLocation={layout.state / 'slurmctld'}",
        f"SlurmdSpoolDir={layout.spool}/%n",
        f"SlurmctldPidFile={layout.slurm_run / 'slurmctld.pid'}",
        f"SlurmdPidFile={layout.run}/slurmd-%n.pid",
        f"SlurmctldLogFile={layout.log_file('slurmctld')}",
        f"SlurmdLogFile={layout.log}/slurmd-%n.log",
        "SlurmctldDebug=info",
        "SlurmdDebug=info",
        "# No cgroup plugins: this machine mounts only cgroup v1 controllers (cgroup.conf: CgroupPlugin=disabled).",
        "ProctrackType=proctrack/linuxproc",
        "TaskPlugin=task/none",
        "JobAcctGatherType=jobacct_gather/none",
        "MpiDefault=none",
        "# Emulated instances claim the CPUs/memory of their instance type, more than this host has.",
        "SlurmdParameters=config_overrides",
        "SelectType=select/cons_tres",
        "SelectTypeParameters=CR_CPU",
        "SchedulerType=sched/backfill",
        "MailProg=/bin/true",
        f"SlurmdTimeout={slurmd_timeout}",
        "MessageTimeout=10",
        "KillWait=5",
        "MinJobAge=300",
        "JobRequeue=1",
    ]
    if accounting:
        lines += [
            "AccountingStorageType=accounting_storage/slurmdbd",
            "AccountingStorageHost=127.0.0.1",
            f"AccountingStoragePort={ports.slurmdbd}",
            "JobCompType=jobcomp/none",
        ]
    else:
        lines += ["AccountingStorageType=accounting_storage/none"]
    # relative: configless ships included files only when they sit beside slurm.conf and are named relatively
    lines += [f"Include {layout.fragments_conf.name}", ""]
    return "\n".join(lines)


def cgroup_conf() -> str:
    """cgroup.conf of the local cloud: slurmd 24.11+ initializes a cgroup plugin even without cgroup plugins in
    slurm.conf, and fails on this machine's cgroup v1 tmpfs unless told not to (production: cgroup/v2)."""
    return "# Written by `elastic-slurm local up`: no cgroup plugin on this machine (see docs/local-cloud.md).\nCgroupPlugin=disabled\n"


def slurmdbd_conf(layout: Layout, ports: Ports, db_password: str) -> str:
    """slurmdbd.conf (must be mode 0600: slurmdbd refuses a readable one)."""
    return "\n".join(
        [
            "AuthType=auth/munge",
            "DbdHost=localhost",
            "DbdAddr=127.0.0.1",
            f"DbdPort={ports.slurmdbd}",
            "SlurmUser=slurm",
            "DebugLevel=info",
            f"LogFile={layout.log_file('slurmdbd')}",
            f"PidFile={layout.slurm_run / 'slurmdbd.pid'}",
            "StorageType=accounting_storage/mysql",
            "StorageHost=127.0.0.1",
            f"StoragePort={ports.mysql}",
            f"StorageUser={DB_USER}",
            f"StoragePass={db_password}",
            f"StorageLoc={DB_NAME}",
            "",
        ]
    )


def my_cnf(layout: Layout, ports: Ports) -> str:
    """MariaDB server + client options: our own datadir and socket, 127.0.0.1 only."""
    data = layout.mysql
    return "\n".join(
        [
            "[mysqld]",
            f"datadir={data / 'data'}",
            f"socket={data / 'mysqld.sock'}",
            f"pid-file={layout.pid_file('mariadbd')}",
            "bind-address=127.0.0.1",
            f"port={ports.mysql}",
            "user=root",
            "skip-log-bin",
            "innodb_buffer_pool_size=64M",
            "innodb_lock_wait_timeout=900",
            "[client]",
            f"socket={data / 'mysqld.sock'}",
            "",
        ]
    )


def db_setup_sql(db_password: str) -> str:
    """Create the accounting database and its user (idempotent)."""
    users = [f"'{DB_USER}'@'127.0.0.1'", f"'{DB_USER}'@'localhost'"]
    sql = [f"CREATE DATABASE IF NOT EXISTS {DB_NAME};"]
    for user in users:
        sql.append(f"CREATE USER IF NOT EXISTS {user} IDENTIFIED BY '{db_password}';")
        sql.append(f"ALTER USER {user} IDENTIFIED BY '{db_password}';")
        sql.append(f"GRANT ALL ON {DB_NAME}.* TO {user};")
    sql.append("FLUSH PRIVILEGES;")
    return "\n".join(sql)
