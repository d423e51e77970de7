"""Start the real Slurm-side daemons of the local cloud: munged, mariadbd, slurmdbd, slurmctld.

Each runs in the foreground in its own session, with a PID file under run/ and a log under log/; each start
function waits (bounded) until the daemon answers and raises DaemonError with the log's last lines otherwise.
None of them touches the system's own munge, MariaDB or Slurm configuration.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from localcloud import procs
from localcloud.conf import db_setup_sql
from localcloud.layout import Layout

SLURM_BIN = Path("/usr/bin")
SLURM_SBIN = Path("/usr/sbin")


class DaemonError(RuntimeError):
    """A daemon did not come up (one line plus the tail of its log)."""


def slurm_env(layout: Layout) -> dict[str, str]:
    """Environment for Slurm commands and daemons of this local cloud."""
    env = dict(os.environ)
    env["SLURM_CONF"] = str(layout.slurm_conf)
    return env


def _tail(path: Path, lines: int = 8) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


def _ok(argv: list[str], env: dict[str, str] | None = None) -> bool:
    try:
        return subprocess.run(argv, env=env, capture_output=True, timeout=20).returncode == 0
    except subprocess.TimeoutExpired:
        return False


def start_munged(layout: Layout) -> int:
    """Our own munged: own key, socket and PID file under the state dir."""
    if not layout.munge_key.exists():
        layout.munge_key.write_bytes(os.urandom(1024))
    os.chmod(layout.munge_key, 0o600)
    log = layout.log_file("munged")
    argv = [
        str(SLURM_SBIN / "munged"),
        "--foreground",
        f"--socket={layout.munge_socket}",
        f"--key-file={layout.munge_key}",
        f"--pid-file={layout.pid_file('munged')}",
        f"--seed-file={layout.state / 'munged.seed'}",
        f"--log-file={log}",
    ]
    proc = procs.spawn(argv, log, layout.pid_file("munged"))

    def up() -> bool:
        return proc.poll() is not None or _ok(["/usr/bin/munge", "-S", str(layout.munge_socket), "-n"])

    if not procs.wait_until(up, 20) or proc.poll() is not None:
        raise DaemonError(f"munged did not start:\n{_tail(log)}")
    return proc.pid


def start_mariadb(layout: Layout, db_password: str) -> int:
    """Our own mariadbd (datadir under mysql/, 127.0.0.1 only) with the accounting database and user."""
    defaults = f"--defaults-file={layout.my_cnf}"
    log = layout.log_file("mariadbd")
    if not (layout.mysql / "data" / "mysql").is_dir():
        result = subprocess.run(
            [
                "/usr/bin/mariadb-install-db",
                defaults,
                "--user=root",
                "--auth-root-authentication-method=socket",
                "--skip-test-db",
            ],
            capture_output=True,
            text=True,
        )
        if result.returncode != 0:
            raise DaemonError(f"mariadb-install-db failed: {result.stderr.strip().splitlines()[-1:]}")
    proc = procs.spawn([str(SLURM_SBIN / "mariadbd"), defaults], log, layout.pid_file("mariadbd"))
    client = ["/usr/bin/mariadb", defaults]
    if not procs.wait_until(lambda: _ok([*client, "-e", "select 1"]), 60, 0.5):
        raise DaemonError(f"mariadbd did not start:\n{_tail(log)}")
    result = subprocess.run([*client, "-e", db_setup_sql(db_password)], capture_output=True, text=True)
    if result.returncode != 0:
        raise DaemonError(f"creating the accounting database failed: {result.stderr.strip()}")
    return proc.pid


def start_slurmdbd(layout: Layout, cluster: str) -> int:
    """slurmdbd (it reads slurmdbd.conf next to $SLURM_CONF), then the cluster, an account and user root."""
    env = slurm_env(layout)
    log = layout.log_file("slurmdbd")
    proc = procs.spawn(
        [str(SLURM_SBIN / "slurmdbd"), "-D"], layout.log / "slurmdbd.stdout", layout.pid_file("slurmdbd"), env=env
    )
    sacctmgr = str(SLURM_BIN / "sacctmgr")
    if not procs.wait_until(lambda: _ok([sacctmgr, "-n", "show", "cluster"], env), 60, 0.5):
        raise DaemonError(f"slurmdbd did not answer:\n{_tail(log)}")
    for args in (
        ["add", "cluster", cluster],
        ["add", "account", "local", "Description=local-cloud", "Organization=local"],
        ["add", "user", "root", "Account=local", "DefaultAccount=local"],
    ):
        # 'Nothing new added' on a re-run is fine: only the final association check matters.
        subprocess.run([sacctmgr, "-i", *args], env=env, capture_output=True, timeout=30)
    out = subprocess.run(
        [sacctmgr, "-n", "-P", "show", "assoc", "format=cluster,user"],
        env=env,
        capture_output=True,
        text=True,
        timeout=30,
    ).stdout
    if f"{cluster}|root" not in out:
        raise DaemonError(f"sacctmgr could not create the association of root on cluster {cluster}")
    return proc.pid


def start_slurmctld(layout: Layout) -> int:
    """slurmctld in the foreground (-D); waits until `scontrol ping` says UP."""
    env = slurm_env(layout)
    argv = [str(SLURM_SBIN / "slurmctld"), "-D", "-f", str(layout.slurm_conf)]
    proc = procs.spawn(argv, layout.log / "slurmctld.stdout", layout.pid_file("slurmctld"), env=env)

    def up() -> bool:
        try:
            out = subprocess.run(
                [str(SLURM_BIN / "scontrol"), "ping"], env=env, capture_output=True, text=True, timeout=10
            ).stdout
        except subprocess.TimeoutExpired:
            return False
        return "is UP" in out

    if not procs.wait_until(up, 60, 0.5):
        raise DaemonError(f"slurmctld did not start:\n{_tail(layout.log_file('slurmctld'))}")
    return proc.pid
