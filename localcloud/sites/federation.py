"""LocalFederation: every cluster of one config as local clouds sharing ONE emulated AWS, munged, MariaDB and slurmdbd.

    fed = LocalFederation(state_dir)
    fed.up(config_path)          # first cluster: a full LocalCloud; then the accounting state of the config
                                 # (clusters, federation + features, licenses, accounts, QOS) applied with
                                 # slurm_plugin.accounting.sacctmgr; then one LocalCloud per other cluster, reusing the first
    fed.cloud("fed-b").sbatch(...)
    fed.down()                   # the other clusters first, then the first one (which owns the shared daemons)

Each cluster has its own sub-directory of the state dir (`<state_dir>/<cluster>`), slurmctld, instance runner and
loopback ports; `up` returns once every slurmctld sees every sibling of the federation connected and synced.
"""

from __future__ import annotations

import json
import logging
import re
import subprocess
from pathlib import Path

from cluster_config import ElasticSlurmConfig, load
from localcloud.cloud import CloudInfo, LocalCloud, LocalCloudError
from localcloud.layout import DEFAULT_STATE_DIR
from localcloud.services import procs
from slurm_plugin.accounting.diff import desired_state
from slurm_plugin.accounting.sacctmgr import SacctmgrCli, SacctmgrError, apply

LOG = logging.getLogger(__name__)
FEDERATION_JSON = "federation.json"
DEFAULT_FEDERATION_DIR = DEFAULT_STATE_DIR.with_name("elastic-slurm-federation")
FEDERATION_TIMEOUT = 60.0
_SIBLING = re.compile(r"^\s*Sibling:\s+(\S+?):\S*\s.*?PersistConnSend/Recv:(\w+)/(\w+)\s+Synced:(\w+)", re.MULTILINE)


def synced_siblings(show_federation: str) -> set[str]:
    """Names of the siblings an `scontrol show federation` output reports connected both ways and synced."""
    return {
        name
        for name, send, recv, synced in _SIBLING.findall(show_federation)
        if (send, recv, synced) == ("Yes", "Yes", "Yes")
    }


class LocalFederation:
    """All clusters of one config, each a LocalCloud under `<state_dir>/<cluster>`."""

    def __init__(self, state_dir: str | Path = DEFAULT_FEDERATION_DIR) -> None:
        self.root = Path(state_dir).resolve()

    # ------------------------------------------------------------------ clusters
    def cluster_names(self) -> list[str]:
        """The clusters `up` started, first (the one owning the shared daemons) first; [] when none."""
        try:
            names = json.loads((self.root / FEDERATION_JSON).read_text())["clusters"]
        except (OSError, ValueError, KeyError, TypeError):
            return []
        return [str(name) for name in names]

    def cloud(self, cluster: str) -> LocalCloud:
        """The local cloud of one cluster (LocalCloudError for a cluster `up` did not start)."""
        if cluster not in self.cluster_names():
            raise LocalCloudError(f"--cluster: no cluster '{cluster}' in the federation in {self.root}")
        return LocalCloud(self.root / cluster)

    def clouds(self) -> dict[str, LocalCloud]:
        return {name: LocalCloud(self.root / name) for name in self.cluster_names()}

    # ------------------------------------------------------------------ up / down
    def up(
        self, config_path: str | Path, boot_delay: float = 2.0, boot_failure_rate: float = 0.0
    ) -> dict[str, CloudInfo]:
        """Start every cluster of the config; on failure stop what was started and raise LocalCloudError."""
        config = load(config_path)
        names = [cluster.name for cluster in config.clusters]
        if any(cloud.is_up() for cloud in self.clouds().values()):
            raise LocalCloudError(f"a local federation is already running in {self.root} (`down` it first)")
        if self.root.is_dir() and any(self.root.iterdir()) and not (self.root / FEDERATION_JSON).exists():
            raise LocalCloudError(
                f"--state-dir: {self.root} is not empty and holds no local federation; choose another"
            )
        self.root.mkdir(parents=True, exist_ok=True)
        self.root.chmod(0o755)  # munged wants every directory above its socket searchable by all
        (self.root / FEDERATION_JSON).write_text(json.dumps({"clusters": names, "config": str(config_path)}) + "\n")
        infos: dict[str, CloudInfo] = {}
        try:
            first = LocalCloud(self.root / names[0])
            infos[names[0]] = first.up(config_path, names[0], boot_delay, boot_failure_rate)
            # Federation last: a slurmctld that registers after the federation was created stays unknown
            # (`fed-b::0`, PersistConnSend No, Synced No) to the members that were already up (Slurm 22.05).
            self._apply_accounting(config.model_copy(update={"federation": None}), first)
            for name in names[1:]:
                cloud = LocalCloud(self.root / name)
                infos[name] = cloud.up(config_path, name, boot_delay, boot_failure_rate, shared_with=first)
            if config.federation is not None:
                self._wait_registered(first, names)
                self._apply_accounting(config, first)
                self._wait_federated(config)
        except BaseException:
            self.down()
            raise
        return infos

    def down(self) -> list[str]:
        """Stop every process of every cluster (the first cluster last: it owns munged, slurmdbd, MariaDB, AWS)."""
        stopped: list[str] = []
        for name, cloud in reversed(list(self.clouds().items())):
            stopped += [f"{name}: {what}" for what in cloud.down()]
        return stopped

    # ------------------------------------------------------------------ helpers
    @staticmethod
    def _apply_accounting(config: ElasticSlurmConfig, first: LocalCloud) -> None:
        """The config's accounting state (what `slurm-accounting-apply` does on the head node), plus user root in
        the local cloud's own account `local` on every other cluster; sacctmgr of the root, on the first controller."""
        env = first.env()
        try:
            changes = apply(SacctmgrCli(str(first.layout.hostbin / "sacctmgr"), env=env), desired_state(config))
        except SacctmgrError as exc:
            raise LocalCloudError(f"applying the accounting state failed: {exc}") from None
        LOG.info("accounting: %d change(s) applied", len(changes))
        for cluster in config.clusters[1:]:
            subprocess.run(
                [
                    str(first.layout.hostbin / "sacctmgr"),
                    "-i",
                    "add",
                    "user",
                    "root",
                    "Account=local",
                    f"Cluster={cluster.name}",
                ],
                env=env,
                capture_output=True,
                timeout=30,
            )

    @staticmethod
    def _wait_registered(first: LocalCloud, names: list[str]) -> None:
        """Until slurmdbd knows every cluster's slurmctld address (it learns it when the slurmctld registers)."""

        def registered() -> set[str]:
            out = first.slurm("sacctmgr", "-n", "-P", "show", "cluster", "format=cluster,controlport", check=False)
            return {
                line.split("|")[0] for line in out.splitlines() if line.count("|") == 1 and line.split("|")[1] != "0"
            }

        if not procs.wait_until(lambda: set(names) <= registered(), FEDERATION_TIMEOUT, 0.5):
            raise LocalCloudError(f"clusters {sorted(set(names) - registered())} did not register with slurmdbd")

    def _wait_federated(self, config: ElasticSlurmConfig) -> None:
        """Until each member's slurmctld reports every other member as a connected, synced sibling."""
        assert config.federation is not None
        members = config.federation.clusters

        def show(cloud: LocalCloud) -> str:
            return cloud.slurm("scontrol", "show", "federation", check=False)

        def all_synced() -> bool:
            return all(set(members) - {name} <= synced_siblings(show(LocalCloud(self.root / name))) for name in members)

        if not procs.wait_until(all_synced, FEDERATION_TIMEOUT, 1.0):
            views = "; ".join(f"{name}: {show(LocalCloud(self.root / name)).strip()!r}" for name in members)
            raise LocalCloudError(
                f"federation {config.federation.name} did not sync within {FEDERATION_TIMEOUT:.0f} s: {views}"
            )
