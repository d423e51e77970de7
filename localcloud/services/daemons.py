"""Start daemons of the local cloud directly: MariaDB (the RDS stand-in, on the host) for every local cloud; munged,
slurmdbd and slurmctld only for tests that run them without a controller boot (a local cloud's controller starts its
own from its user data, localcloud/instances/controller_boot.py).

munged, slurmdbd and slurmctld run on the controller's view of the Slurm root (localcloud.instances.machines) as the users
they run as on EC2 — munge, slurm, slurm. Each runs in the foreground
in its own session, with a PID file under run/ and a log under log/; each start function waits (bounded) until the
daemon answers and raises DaemonError with the log's last lines otherwise. None of them touches the system's own
munge, MariaDB or Slurm configuration.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from localcloud.conf import db_setup_sql, db_tls, mariadb_tmpdir
from localcloud.image.slurm_root import JOB_USER
from localcloud.instances import enter
from localcloud.layout import Layout
from localcloud.services import procs
from localcloud.services.db_tls import make_tls_files

SLURM_BIN = Path("/usr/bin")  # inside the Slurm root
SLURM_SBIN = Path("/usr/sbin")
HOST_SBIN = Path("/usr/sbin")  # MariaDB: on the host


class DaemonError(RuntimeError):
    """A daemon did not come up (one line plus the tail of its log)."""


def slurm_env(layout: Layout) -> dict[str, str]:
    """Environment for Slurm commands of this local cloud on the host: its client wrappers first on PATH (they run
    the root's clients on the controller, where slurm.conf is at Slurm's default path: no SLURM_CONF)."""
    env = {k: v for k, v in os.environ.items() if k != "SLURM_CONF"}
    env["PATH"] = f"{layout.hostbin}:{env.get('PATH', '/usr/bin:/bin')}"
    env[CLOUD_MARKER] = str(layout.root)
    return env


# Every process of a local cloud carries this variable (the state dir): teardown proves ownership with it.
CLOUD_MARKER = "ELASTIC_SLURM_LOCAL_CLOUD"


def run_on(view: enter.View, argv: list[str], as_user: enter.User | None = None, timeout: float = 30) -> bool:
    """Run a command on a machine; True when it exits 0 within `timeout`."""
    env = enter.user_env(as_user or enter.user(view.root, "root"))
    return _ok(enter.argv(view, argv, as_user), env, timeout)


def _tail(path: Path, lines: int = 8) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


def _ok(argv: list[str], env: dict[str, str] | None = None, timeout: float = 20) -> bool:
    try:
        return subprocess.run(argv, env=env, capture_output=True, timeout=timeout).returncode == 0
    except subprocess.TimeoutExpired:
        return False


def start_munged(layout: Layout, view: enter.View) -> int:
    """munged as `munge` on the controller: own key and state under the state dir, socket at /run/munge."""
    munge = enter.user(view.root, "munge")
    if not layout.munge_key.exists():
        layout.munge_key.write_bytes(os.urandom(1024))
    os.chown(layout.munge_key, munge.uid, munge.gid)
    os.chmod(layout.munge_key, 0o400)
    home = layout.state / "munge"
    home.mkdir(exist_ok=True)
    for path in (layout.munge_dir, home):
        path.mkdir(exist_ok=True)
        os.chown(path, munge.uid, munge.gid)
        os.chmod(path, 0o755)
    log = layout.log_file("munged")
    argv = [
        str(SLURM_SBIN / "munged"),
        "--foreground",
        f"--key-file={layout.munge_key}",
        f"--pid-file={home / 'munged.pid'}",
        f"--seed-file={home / 'munged.seed'}",
        f"--log-file={home / 'munged.log'}",
    ]
    env = enter.user_env(munge, {CLOUD_MARKER: str(layout.root)})
    proc = procs.spawn(enter.argv(view, argv, munge), log, layout.pid_file("munged"), env=env)

    def up() -> bool:
        return proc.poll() is not None or run_on(view, [str(SLURM_BIN / "munge"), "-n"])

    if not procs.wait_until(up, 20) or proc.poll() is not None:
        raise DaemonError(f"munged did not start:\n{_tail(log)}\n{_tail(home / 'munged.log')}")
    return proc.pid


def start_mariadb(layout: Layout, db_password: str) -> int:
    """Our own mariadbd (datadir under mysql/, 127.0.0.1 only) with the accounting database and user."""
    defaults = f"--defaults-file={layout.my_cnf}"
    log = layout.log_file("mariadbd")
    tls = db_tls(layout)  # the server requires TLS (my.cnf); slurmdbd checks its certificate against this CA
    make_tls_files(Path(tls.directory), Path(tls.ca), Path(tls.cert), Path(tls.key))
    install = ["/usr/bin/mariadb-install-db", defaults, "--user=root", "--auth-root-authentication-method=socket"]
    mariadb_tmpdir(layout).mkdir(parents=True, exist_ok=True)
    for attempt in (1, 2):  # seen once on a loaded machine: a bootstrap that aborted and then succeeded
        if (layout.mysql / "data" / "mysql").is_dir():
            break
        result = subprocess.run([*install, "--skip-test-db"], capture_output=True, text=True)
        if result.returncode == 0:
            break
        errors = [line for line in result.stderr.splitlines() if "ERROR" in line][-3:]
        if attempt == 2:
            raise DaemonError(f"mariadb-install-db failed: {' | '.join(errors) or result.stderr.strip()[-300:]}")
        shutil.rmtree(layout.mysql / "data", ignore_errors=True)
    proc = procs.spawn([str(HOST_SBIN / "mariadbd"), defaults], log, layout.pid_file("mariadbd"))
    client = ["/usr/bin/mariadb", defaults]
    if not procs.wait_until(lambda: _ok([*client, "-e", "select 1"]), 60, 0.5):
        raise DaemonError(f"mariadbd did not start:\n{_tail(log)}")
    result = subprocess.run([*client, "-e", db_setup_sql(db_password)], capture_output=True, text=True)
    if result.returncode != 0:
        raise DaemonError(f"creating the accounting database failed: {result.stderr.strip()}")
    return proc.pid


def start_slurmdbd(layout: Layout, view: enter.View, cluster: str) -> int:
    """slurmdbd as `slurm` on the controller (slurmdbd.conf beside slurm.conf), then the cluster, an account and the
    users root and the job user (an ordinary user, neither root nor an admin) with their associations."""
    slurm = enter.user(view.root, "slurm")
    os.chown(layout.slurmdbd_conf, slurm.uid, slurm.gid)
    log = layout.log_file("slurmdbd")
    env = enter.user_env(slurm, {CLOUD_MARKER: str(layout.root)})
    proc = procs.spawn(
        enter.argv(view, [str(SLURM_SBIN / "slurmdbd"), "-D"], slurm),
        layout.log / "slurmdbd.stdout",
        layout.pid_file("slurmdbd"),
        env=env,
    )
    sacctmgr = str(SLURM_BIN / "sacctmgr")
    if not procs.wait_until(lambda: run_on(view, [sacctmgr, "-n", "show", "cluster"]), 60, 0.5):
        raise DaemonError(f"slurmdbd did not answer:\n{_tail(log)}")
    for args in (
        ["add", "cluster", cluster],
        ["add", "account", "local", "Description=local-cloud", "Organization=local"],
        ["add", "user", "root", "Account=local", "DefaultAccount=local"],
        ["add", "user", JOB_USER, "Account=local", "DefaultAccount=local"],
    ):
        # 'Nothing new added' on a re-run is fine: only the final association check matters.
        run_on(view, [sacctmgr, "-i", *args])
    out = subprocess.run(
        enter.argv(view, [sacctmgr, "-n", "-P", "show", "assoc", "format=cluster,user"]),
        env=enter.user_env(enter.user(view.root, "root")),
        capture_output=True,
        text=True,
        timeout=30,
    ).stdout
    if f"{cluster}|root" not in out or f"{cluster}|{JOB_USER}" not in out:
        raise DaemonError(f"sacctmgr could not create the associations of root and {JOB_USER} on cluster {cluster}")
    return proc.pid


def start_slurmctld(layout: Layout, view: enter.View) -> int:
    """slurmctld as `slurm` on the controller, in the foreground (-D); waits until `scontrol ping` says UP."""
    slurm = enter.user(view.root, "slurm")
    env = enter.user_env(slurm, {CLOUD_MARKER: str(layout.root)})
    argv = enter.argv(view, [str(SLURM_SBIN / "slurmctld"), "-D"], slurm)
    proc = procs.spawn(argv, layout.log / "slurmctld.stdout", layout.pid_file("slurmctld"), env=env)

    def up() -> bool:
        try:
            out = subprocess.run(
                enter.argv(view, [str(SLURM_BIN / "scontrol"), "ping"]),
                env=enter.user_env(enter.user(view.root, "root")),
                capture_output=True,
                text=True,
                timeout=10,
            ).stdout
        except subprocess.TimeoutExpired:
            return False
        return "is UP" in out

    if not procs.wait_until(up, 60, 0.5) or proc.poll() is not None:
        raise DaemonError(f"slurmctld did not start:\n{_tail(layout.log_file('slurmctld'))}")
    return proc.pid


def add_job_user(view: enter.View, cluster: str) -> None:
    """Give the local cloud's job user (an ordinary user, neither root nor an admin) an account and association on
    `cluster`, as a site adds its users (`accounts:` in the config does the same on EC2, through the boot)."""
    sacctmgr = str(SLURM_BIN / "sacctmgr")
    for args in (
        ["add", "account", "local", "Description=local-cloud", "Organization=local"],
        ["add", "user", JOB_USER, "Account=local", "DefaultAccount=local"],
    ):
        run_on(view, [sacctmgr, "-i", *args])  # 'Nothing new added' on a re-run is fine: the check below decides
    out = subprocess.run(
        enter.argv(view, [sacctmgr, "-n", "-P", "show", "assoc", "format=cluster,user"]),
        env=enter.user_env(enter.user(view.root, "root")),
        capture_output=True,
        text=True,
        timeout=30,
    ).stdout
    if f"{cluster}|{JOB_USER}" not in out:
        raise DaemonError(f"sacctmgr could not create the association of {JOB_USER} on cluster {cluster}")
