"""Where everything of one local cloud lives: one state directory with etc/ run/ log/ spool/ state/ mysql/ bin/.

Pure path arithmetic (no I/O but `create`), so every module agrees on file names.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from slurm_plugin.controller_state import CONTROLLER_STATE_MOUNT

DEFAULT_STATE_DIR = Path("/var/tmp/elastic-slurm-local")
REPO_ROOT = Path(__file__).resolve().parent.parent
BOOTSTRAP_DIR = REPO_ROOT / "assets" / "bootstrap"


@dataclass(frozen=True)
class Layout:
    """Paths under one state directory."""

    root: Path

    @property
    def etc(self) -> Path:
        return self.root / "etc"

    @property
    def run(self) -> Path:
        return self.root / "run"

    @property
    def log(self) -> Path:
        return self.root / "log"

    @property
    def spool(self) -> Path:
        return self.root / "spool"

    @property
    def state(self) -> Path:
        return self.root / "state"

    @property
    def mysql(self) -> Path:
        return self.root / "mysql"

    @property
    def bin(self) -> Path:
        return self.root / "bin"

    @property
    def jobs(self) -> Path:
        """Working directory of jobs submitted by the helpers (world-writable)."""
        return self.root / "jobs"

    @property
    def slurm_conf(self) -> Path:
        return self.etc / "slurm.conf"

    @property
    def fragments_conf(self) -> Path:
        return self.etc / "slurm-elastic.conf"

    @property
    def slurmdbd_conf(self) -> Path:
        return self.etc / "slurmdbd.conf"

    @property
    def my_cnf(self) -> Path:
        return self.etc / "my.cnf"

    @property
    def munge_key(self) -> Path:
        """The controller's munge key (its /etc/munge/munge.key, written by its boot from the secret)."""
        return self.machine_dir("controller") / "etc-munge" / "munge.key"

    @property
    def munge_dir(self) -> Path:
        """The controller's munged socket directory (its /run/munge)."""
        return self.machine_dir("controller") / "run" / "munge"

    @property
    def munge_socket(self) -> Path:
        """The socket as the host sees it (inside the root: /run/munge/munge.socket.2, Slurm's default)."""
        return self.munge_dir / "munge.socket.2"

    @property
    def slurm_run(self) -> Path:
        """PID files slurmctld and slurmdbd write themselves (owned by SlurmUser)."""
        return self.state / "slurm-run"

    @property
    def shared(self) -> Path:
        """Stands in for the cluster's shared file system (EFS): mounted at its mount point on every machine."""
        return self.root / "shared"

    @property
    def controller_state(self) -> Path:
        """Stands in for the controllers' own file system (slurm_plugin/controller_state.py): mounted on the
        controllers only, at CONTROLLER_STATE_MOUNT."""
        return self.root / "controller-state"

    def on_controller_state(self, inside: str) -> Path:
        """The host path of `inside`, a path on the controllers' own file system (e.g. their StateSaveLocation)."""
        return self.controller_state / Path(inside).relative_to(CONTROLLER_STATE_MOUNT)

    @property
    def hostbin(self) -> Path:
        """Slurm client wrappers for the host (sbatch, squeue, ...): each runs the root's client on the controller."""
        return self.root / "hostbin"

    def machine_dir(self, name: str) -> Path:
        """Private /run and /tmp of one emulated machine (`controller` or an instance id)."""
        return self.root / "machines" / name

    @property
    def manifest(self) -> Path:
        return self.etc / "manifest.json"

    @property
    def instance_cache(self) -> Path:
        return self.state / "instance-cache.json"

    @property
    def plugin_state(self) -> Path:
        return self.state / "plugin"

    @property
    def cloud_json(self) -> Path:
        """What `local up` decided (ports, config path, cluster): read by `down`, `status` and the tests."""
        return self.state / "cloud.json"

    @property
    def runner_control(self) -> Path:
        """Boot delay / failure knobs the instance runner re-reads every loop."""
        return self.state / "runner-control.json"

    @property
    def instances_dir(self) -> Path:
        """One JSON record per booted instance (pid, time namespace, node) written by the runner."""
        return self.run / "instances"

    def pid_file(self, name: str) -> Path:
        return self.run / f"{name}.pid"

    def log_file(self, name: str) -> Path:
        return self.log / f"{name}.log"

    def create(self) -> None:
        """Create every directory (idempotent); jobs/ is world-writable like /tmp; munged needs a+x on the path."""
        self.root.mkdir(parents=True, exist_ok=True)
        os.chmod(self.root, 0o755)
        for path in (
            self.etc,
            self.run,
            self.log,
            self.spool,
            self.state,
            self.mysql,
            self.bin,
            self.instances_dir,
            self.shared,
            self.controller_state,
            self.hostbin,
            self.munge_dir,
        ):
            path.mkdir(parents=True, exist_ok=True)
        self.plugin_state.mkdir(parents=True, exist_ok=True)
        self.jobs.mkdir(parents=True, exist_ok=True)
        os.chmod(self.jobs, 0o1777)
