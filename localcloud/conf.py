"""What the local cloud's machine differs in, as data (pure): render overrides, the database secret, my.cnf.

The controller renders its slurm.conf, cgroup.conf and slurmdbd.conf itself, with the production commands its user
data runs; `render_overrides` is what those commands change on this machine ($ES_RENDER_OVERRIDES): ports, paths
under the state dir, no cgroup plugins (this machine mounts only cgroup v1 controllers), node hardware from the config,
shorter Slurm timers. MariaDB (the RDS stand-in) runs on the host with `my_cnf`; `db_secret` is its RDS-style secret.
`slurmdbd_conf` remains for tests that run slurmdbd without a controller boot.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from localcloud.layout import Layout

DB_NAME = "slurm_acct_db"
DB_USER = "slurm"
CRED_EXPIRE = 20
# Two controllers (controller.count: 2): the backup takes over after SlurmctldTimeout without an answer from the
# primary (Slurm's default 120 s; short here so a failover test takes seconds). Each slurmctld binds its own address
# (NoCtldInAddrAny: the address its host name resolves to, in its machine's /etc/hosts): all machines here share one
# network namespace, and two slurmctld bound to every address would want the same SlurmctldPort.
SLURMCTLD_TIMEOUT = 10
FAILOVER_TIMERS = (("SlurmctldTimeout", str(SLURMCTLD_TIMEOUT)), ("CommunicationParameters", "NoCtldInAddrAny"))


@dataclass(frozen=True)
class DbTls:
    """The local MariaDB's TLS files (localcloud/services/db_tls.py makes them at `local up`)."""

    directory: str
    ca: str  # slurmdbd's StorageParameters=SSL_CA (the RDS bundle on EC2)
    cert: str
    key: str


def db_tls(layout: Layout) -> DbTls:
    """Where the local MariaDB's CA, certificate and key live (under the state dir's mysql/)."""
    base = layout.mysql / "tls"
    return DbTls(str(base), str(base / "ca.pem"), str(base / "server.pem"), str(base / "server-key.pem"))


@dataclass(frozen=True)
class Ports:
    """Loopback TCP ports of one local cloud."""

    aws: int
    mysql: int
    slurmctld: int
    slurmdbd: int
    slurmd_base: int
    sackd: int  # SlurmdPort: every node has its own Port=, so only login nodes' sackd listen here
    exporter: int = 0  # the controller's metrics exporter (9464 on EC2)
    prometheus: int = 0  # the host's Prometheus scraping it
    restd: int = 0  # slurmrestd (clusters[].rest_api; rest_api.port on EC2), on 127.0.0.1 on both
    webui: int = 0  # the REST API's web page (rest_api.web_port on EC2, every address there)


def render_overrides(
    layout: Layout, ports: Ports, state_dir: str | None = None, controllers: int = 1
) -> dict[str, dict[str, Any]]:
    """What the controller's `elastic-slurm render` and `render-slurmdbd` change for this machine
    ($ES_RENDER_OVERRIDES, slurm_plugin/render/overrides.py); every key is listed in docs/local-cloud.md.
    `state_dir`: the plugin's state directory as the controllers see it (default: state/plugin); with two
    `controllers`, the failover timers (FAILOVER_TIMERS)."""
    bin_dir = layout.bin
    return {
        "options": {
            # wrappers that add the emulated endpoint and credentials (the instance profile on EC2), then exec the
            # image's program: slurmctld runs these with an environment of its own making
            "resume_program": str(bin_dir / "slurm-resume"),
            "suspend_program": str(bin_dir / "slurm-suspend"),
            "resume_fail_program": str(bin_dir / "slurm-resume-fail"),
            "state_dir": state_dir or str(layout.plugin_state),
            "log_file": str(layout.log_file("plugin")),
            "prolog_log": str(layout.log_file("prolog")),
            "slurmd_port_base": ports.slurmd_base,  # one slurmd port per node: they share one address family
        },
        "base": {
            "slurmctld_port": ports.slurmctld,
            "slurmd_port": ports.sackd,
            "slurmdbd_port": ports.slurmdbd,
            "log_dir": str(layout.log),
            "pid_dir": str(layout.run),
            "slurmd_spool_dir": f"{layout.spool}/%n",
            "per_node_files": True,
            "cgroup": False,
            "config_overrides": True,
            # clusters[].rest_api: picked ports, and the web page on the loopback only
            "rest_api_port": ports.restd or None,
            "web_ui_listen": f"127.0.0.1:{ports.webui}" if ports.webui else None,
            "timers": [
                ["SlurmdTimeout", "20"],
                ["MessageTimeout", "10"],
                ["KillWait", "5"],
                # also how long a requeued job waits before it may start again (default 120 s)
                ["AuthInfo", f"cred_expire={CRED_EXPIRE}"],
                *([key, value] for key, value in (FAILOVER_TIMERS if controllers > 1 else ())),
            ],
        },
        # the local MariaDB's CA instead of the RDS bundle: slurmdbd connects over TLS as on EC2
        "dbd": {"port": ports.slurmdbd, "log_file": str(layout.log_file("slurmdbd")), "ssl_ca": db_tls(layout).ca},
    }


def db_secret(ports: Ports, db_password: str) -> dict[str, Any]:
    """The accounting database's secret as RDS writes it, for the local MariaDB."""
    return {
        "engine": "mariadb",
        "host": "127.0.0.1",
        "port": ports.mysql,
        "username": DB_USER,
        "password": db_password,
        "dbname": DB_NAME,
    }


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
            f"StorageParameters=SSL_CA={db_tls(layout).ca}",
            "",
        ]
    )


def mariadb_tmpdir(layout: Layout) -> Path:
    """Where our MariaDB keeps its temporary tables (made by daemons.start_mariadb)."""
    return layout.mysql / "tmp"


def my_cnf(layout: Layout, ports: Ports) -> str:
    """MariaDB server + client options: our own datadir and socket, 127.0.0.1 only."""
    data = layout.mysql
    return "\n".join(
        [
            "[mysqld]",
            f"datadir={data / 'data'}",
            f"socket={data / 'mysqld.sock'}",
            f"pid-file={layout.pid_file('mariadbd')}",
            # temporary tables in the state dir, not the host's /tmp, which every test and local cloud shares (seen:
            # a bootstrap failing on "Error on delete of '/tmp/#sql-temptable-…'" with 6 local clouds booting at once)
            f"tmpdir={mariadb_tmpdir(layout)}",
            "bind-address=127.0.0.1",
            f"port={ports.mysql}",
            "user=root",
            "skip-log-bin",
            "innodb_buffer_pool_size=64M",
            "innodb_lock_wait_timeout=900",
            # TLS required on TCP, as the accounting stack's parameter group has it on RDS (the socket the setup
            # client uses counts as secure); the certificate names 127.0.0.1, where slurmdbd connects
            "require_secure_transport=ON",
            f"ssl-ca={db_tls(layout).ca}",
            f"ssl-cert={db_tls(layout).cert}",
            f"ssl-key={db_tls(layout).key}",
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
