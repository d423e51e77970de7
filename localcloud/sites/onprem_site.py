"""An emulated on-prem Slurm site that bursts into a local cloud: its own munged, slurmctld and static slurmd nodes.

    site = OnpremSite(state_dir, cloud)      # the local cloud it bursts into (already up)
    site.up(config_path, "onprem")           # the admin's steps, then the daemons; returns when every node is idle
    site.slurm("sbatch", "-M", "onprem,sky", ..., user=JOB_USER)
    site.down()

What a site admin does (docs/onprem-burst.md) is what `up` does: it runs `elastic-slurm onprem-kit` (the deployment's
CLI, against the emulated AWS) for the slurm.conf lines and the munge key, and appends those lines to the site's own
hand-written slurm.conf (localcloud/sites/onprem/slurm.conf.in; only addresses, ports and paths are filled in). Nothing
here is rendered by the plugin and nothing is launched through EC2: the nodes are always up and never power-save.

The site's machines are one view of the same Slurm root as the cloud's (its binaries, users and Slurm version):
its own /etc/slurm, /etc/munge, /run and state directory, laid out as a local cloud's (localcloud/layout.py), so its
munged and slurmctld start exactly as a cloud's do (localcloud/services/daemons.py). Every daemon carries
$ELASTIC_SLURM_LOCAL_CLOUD = the site's state dir and a PID file under run/; `down` stops only processes with both.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from localcloud.aws.emulated_aws import free_port
from localcloud.cloud import LocalCloud
from localcloud.instances import enter
from localcloud.layout import Layout
from localcloud.services import daemons, procs
from localcloud.services.daemons import CLOUD_MARKER

TEMPLATE = Path(__file__).resolve().parent / "onprem" / "slurm.conf.in"
CONTROL_HOST = "sitectl"
ADDRESS = "127.0.0.1"
NODES = ("site1", "site2")
UP_TIMEOUT = 60.0


class SiteError(RuntimeError):
    """The site did not come up (one line plus the tail of a log)."""


class OnpremSite:
    """One emulated site under `state_dir`, bursting into `cloud`."""

    def __init__(self, state_dir: str | Path, cloud: LocalCloud) -> None:
        self.root = Path(state_dir).resolve()
        self.layout = Layout(self.root)  # the local cloud's layout: its munged and slurmctld start as the cloud's do
        self.cloud = cloud
        self.name = ""

    # ------------------------------------------------------------------ layout
    def _dir(self, name: str) -> Path:
        path = self.root / name
        path.mkdir(parents=True, exist_ok=True)
        return path

    def view(self) -> enter.View:
        """The site's machines: the cloud's Slurm root with the site's own /etc/slurm, /etc/munge and /run."""
        hosts = self.root / "hosts"
        if not hosts.exists():
            hosts.write_text(f"127.0.0.1 localhost\n{ADDRESS} {CONTROL_HOST}\n")
        machine = self.layout.machine_dir("controller")
        return enter.View(self.cloud.root(), hostname=CONTROL_HOST).with_binds(
            (hosts, "/etc/hosts"),
            (self.layout.etc, "/etc/slurm"),
            (self.layout.munge_key.parent, "/etc/munge"),
            (machine / "run", "/run"),
            *enter.same_path(self.root),
        )

    def env(self, user: enter.User) -> dict[str, str]:
        return enter.user_env(user, {CLOUD_MARKER: str(self.root)})

    # ------------------------------------------------------------------ the admin's steps
    def _kit(self, config_path: Path, name: str) -> str:
        """`elastic-slurm onprem-kit` as the site admin runs it: slurm.conf lines, the munge key written."""
        key = self.layout.munge_key  # the kit writes it as the site admin copies it to every host
        key.unlink(missing_ok=True)
        admin = self.cloud.principals().admin  # the operator's credentials (IAM is enforced)
        env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
        env.update(
            AWS_ENDPOINT_URL=self.cloud.info().aws_endpoint_url,
            AWS_ACCESS_KEY_ID=admin.access_key_id,
            AWS_SECRET_ACCESS_KEY=admin.secret_access_key,
        )
        argv = [sys.executable, "-m", "elastic_slurm.cli", "onprem-kit", str(config_path), "--site", name]
        argv += ["--slurmdbd-port", str(self.cloud.info().ports["slurmdbd"]), "--munge-key-out", str(key)]
        result = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=120)
        if result.returncode != 0:
            raise SiteError(f"elastic-slurm onprem-kit failed: {result.stderr.strip()}")
        return result.stdout

    def _write_conf(self, kit: str, ports: dict[str, int]) -> None:
        values = {
            "@CLUSTER@": self.name,
            "@CONTROL_HOST@": CONTROL_HOST,
            "@CONTROL_ADDR@": ADDRESS,
            "@NODE_ADDR@": ADDRESS,
            "@SLURMCTLD_PORT@": str(ports["slurmctld"]),
            "@NODE1_PORT@": str(ports[NODES[0]]),
            "@NODE2_PORT@": str(ports[NODES[1]]),
            "@STATE@": str(self.root),
        }
        text = TEMPLATE.read_text()
        for key, value in values.items():
            text = text.replace(key, value)
        (self.layout.etc / "slurm.conf").write_text(f"{text}\n{kit}")
        (self.layout.etc / "cgroup.conf").write_text("CgroupPlugin=disabled\n")

    # ------------------------------------------------------------------ daemons
    def up(self, config_path: str | Path, name: str) -> None:
        """Run the kit, write slurm.conf, start munged, slurmctld and the nodes; wait until every node is idle."""
        self.name = name
        self.layout.create()
        for sub in ("etc-munge", "run"):
            (self.layout.machine_dir("controller") / sub).mkdir(parents=True, exist_ok=True)
        root = self.cloud.root()
        slurm, superuser = enter.user(root, "slurm"), enter.user(root, "root")
        kit = self._kit(Path(config_path).resolve(), name)
        self._write_conf(kit, {"slurmctld": free_port(), NODES[0]: free_port(), NODES[1]: free_port()})
        # what slurm.conf.in names that slurmctld (as slurm) writes; log/ also gets root's slurmd logs
        for sub in ("slurmctld", "slurm-run"):
            os.chown(self._dir(sub), slurm.uid, slurm.gid)
        self.layout.log.chmod(0o777)
        view = self.view()
        daemons.start_munged(self.layout, view)
        daemons.start_slurmctld(self.layout, view)
        for node in NODES:
            procs.spawn(
                enter.argv(view, ["/usr/sbin/slurmd", "-D", "-N", node], superuser),
                self.layout.log / f"slurmd-{node}.stdout",
                self.layout.pid_file(f"slurmd-{node}"),
                env=self.env(superuser),
            )
        self._wait(lambda: self.idle_nodes() == set(NODES), "the site's nodes", self.log("slurmctld"))

    def log(self, daemon: str) -> Path:
        return self.root / "log" / f"{daemon}.log"

    def _wait(self, predicate: Callable[[], bool], what: str, log: Path) -> None:
        if not procs.wait_until(predicate, UP_TIMEOUT, 0.5):
            tail = "\n".join(log.read_text(errors="replace").splitlines()[-8:]) if log.exists() else "(no log)"
            raise SiteError(f"{what} of the on-prem site did not come up:\n{tail}")

    def idle_nodes(self) -> set[str]:
        out = self.slurm("sinfo", "-h", "-N", "-t", "idle", "-o", "%N", check=False)
        return set(out.split())

    # ------------------------------------------------------------------ clients
    def slurm(self, *args: str, check: bool = True, timeout: float = 30, user: str | None = None) -> str:
        """A Slurm client run on the site's submit host (as `user`, default root); stdout."""
        who = enter.user(self.cloud.root(), user or "root")
        argv = enter.argv(self.view(), [f"/usr/bin/{args[0]}", *args[1:]], who if user else None, cwd="/tmp")
        result = subprocess.run(argv, env=self.env(who), capture_output=True, text=True, timeout=timeout)
        if check and result.returncode != 0:
            raise SiteError(f"{shlex.join(args)} on the site: {result.stderr.strip()}")
        return result.stdout

    # ------------------------------------------------------------------ teardown
    def down(self) -> list[str]:
        """Cancel the site's jobs, stop its daemons (ours by PID file and marker), then any process left with the
        marker (job steps); returns what was stopped."""
        if procs.read_pid(self.root / "run" / "slurmctld.pid") is not None:
            self.slurm("scancel", "--partition=site", check=False)
        stopped = []
        names = [*(f"slurmd-{n}" for n in NODES), "slurmctld", "munged"]
        for name in names:
            pid_file = self.root / "run" / f"{name}.pid"
            pid = procs.read_pid(pid_file)
            ours = pid is not None and procs.environ_has(pid, [f"{CLOUD_MARKER}={self.root}".encode()])
            if ours and pid is not None and procs.stop_pid(pid, name.split("-")[0], timeout=15):
                stopped.append(name)
            pid_file.unlink(missing_ok=True)
        left = [pid for pid in _all_pids() if procs.environ_has(pid, [f"{CLOUD_MARKER}={self.root}".encode()])]
        procs.kill_all(left)
        return stopped + [f"process {pid}" for pid in left]


def _all_pids() -> list[int]:
    return [
        int(entry.name) for entry in Path("/proc").iterdir() if entry.name.isdigit() and int(entry.name) != os.getpid()
    ]
