"""One local cloud (real Slurm daemons + emulated AWS) shared by every e2e test of the session, always torn down.

The tests need root (mount namespaces, chroot), the Slurm root file system of the default release (built, or waited
for while scripts/test.sh builds it, before each test: tests/conftest.py), MariaDB and util-linux's `unshare`; without
them they are skipped with the reason.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from localcloud.cloud import LocalCloud
from localcloud.ops import LIVE, Instance

CONFIG = Path(__file__).resolve().parents[2] / "cluster_config" / "examples" / "local-demo.yaml"
NEEDED = ["mariadbd", "mariadb-install-db", "unshare", "chroot"]
BOOT_DELAY = 1.0


def missing_prereqs() -> str | None:
    """Why the local cloud cannot run here (None when it can)."""
    if os.geteuid() != 0:
        return "needs root"
    absent = [p for p in NEEDED if shutil.which(p, path="/usr/sbin:/usr/bin:/sbin:/bin") is None]
    return f"missing: {', '.join(absent)}" if absent else None


@pytest.fixture(scope="session")
def cloud(request: pytest.FixtureRequest) -> Iterator[LocalCloud]:
    """The running local cloud of the session (state dir in /var/tmp, removed unless a test failed)."""
    reason = missing_prereqs()
    if reason:
        pytest.skip(f"local cloud e2e: {reason}")
    # Not under pytest's tmp dir: munged wants every directory above its socket to be world-searchable.
    state_dir = Path(tempfile.mkdtemp(prefix="elastic-slurm-e2e-", dir="/var/tmp"))
    local = LocalCloud(state_dir)
    passed = False
    try:
        local.up(CONFIG, boot_delay=BOOT_DELAY)
        yield local
        passed = True
    finally:
        local.down()
        if passed and request.session.testsfailed == 0 and not os.environ.get("ELASTIC_SLURM_E2E_KEEP"):
            shutil.rmtree(state_dir, ignore_errors=True)
        else:
            print(f"local cloud e2e: logs kept in {state_dir / 'log'} (ELASTIC_SLURM_E2E_KEEP=1 keeps them always)")


@contextmanager
def kept_on_failure(request: pytest.FixtureRequest, state_dir: Path, label: str) -> Iterator[None]:
    """Removes `state_dir` after the block, unless a test failed meanwhile or ELASTIC_SLURM_E2E_KEEP is set: then it
    says where the logs are. Stop the block's daemons inside it."""
    failed_before = request.session.testsfailed
    try:
        yield
    finally:
        if request.session.testsfailed == failed_before and not os.environ.get("ELASTIC_SLURM_E2E_KEEP"):
            shutil.rmtree(state_dir, ignore_errors=True)
        else:
            print(f"{label}: logs kept in {state_dir}")


@contextmanager
def module_cloud(request: pytest.FixtureRequest, config: Path, state_dir: Path, label: str) -> Iterator[LocalCloud]:
    """A local cloud of its own for one test module (`config`, in `state_dir`), always torn down; its state dir (logs)
    is kept only when a test of the module failed or ELASTIC_SLURM_E2E_KEEP is set. Skips without the prerequisites."""
    reason = missing_prereqs()
    if reason:
        pytest.skip(f"{label}: {reason}")
    cloud = LocalCloud(state_dir)
    if cloud.is_up():  # another run's (this module in another checkout): never ours to stop or remove
        pytest.fail(f"{label}: a local cloud is already running in {state_dir}", pytrace=False)
    with kept_on_failure(request, state_dir, label):
        try:
            cloud.up(config, boot_delay=1.0)
            yield cloud
        finally:
            cloud.down()


@pytest.fixture(autouse=True)
def _healthy_cloud_after_each_test(request: pytest.FixtureRequest) -> Iterator[None]:
    """Every test leaves the emulated AWS without faults and instances booting normally."""
    yield
    if "cloud" in request.fixturenames:
        local: LocalCloud = request.getfixturevalue("cloud")
        local.clear_faults()
        local.set_boot(boot_failure_rate=0.0)


def cold_nodes(cloud: LocalCloud, count: int, prefix: str = "cpu-small-", wait: float = 90) -> list[str]:
    """`count` powered-down nodes of a pool (a job pinned to them must launch instances); waits for idle ones to
    power down when an earlier test left the pool warm."""

    def cold() -> list[str]:
        names = (n for n, s in cloud.nodes().items() if n.startswith(prefix) and s == "idle~")
        return sorted(names, key=lambda n: (n.rsplit("-", 1)[0], int(n.rsplit("-", 1)[1])))

    cloud.wait_until(lambda: len(cold()) >= count, wait, f"{count} powered-down {prefix}* node(s)")
    return cold()[:count]


@contextmanager
def kept_up(cloud: LocalCloud, *nodes: str) -> Iterator[Callable[[str], None]]:
    """The nodes (and any the caller adds with the function this yields) are never powered down by SuspendTime while
    the block runs (`SuspendExcNodes+=`, removed at the end): a test that reads a node's instance, slurmd or address
    after its job ended does not race the 15 s idle power-down of the e2e configs. Lost when slurmctld restarts."""
    kept: list[str] = []

    def keep(node: str) -> None:
        cloud.slurm("scontrol", "update", f"SuspendExcNodes+={node}")
        kept.append(node)

    for node in nodes:
        keep(node)
    try:
        yield keep
    finally:
        for node in kept:
            cloud.slurm("scontrol", "update", f"SuspendExcNodes-={node}", check=False)


def manager_cycle(cloud: LocalCloud) -> None:
    """One cycle of the cluster manager's real CLI on the controller, as its systemd unit runs it (user slurm)."""
    cmd = ["/opt/elastic-slurm/bin/slurm-clustermgr", "--once", "--manifest", str(cloud.layout.manifest),
           "--orphan-grace", "900"]  # fmt: skip
    role = cloud.principals().controller.env()  # the controller role, as its instance profile
    done = cloud.on_controller(cmd, user="slurm", env={**role, "AWS_DEFAULT_REGION": "us-east-1"})
    log = cloud.layout.log / "clustermgr.log"
    tail = "\n".join(log.read_text().splitlines()[-20:]) if log.exists() else ""
    assert done.returncode == 0, f"manager cycle failed ({done.returncode}): {done.stderr}\n{tail}"


def warm_nodes(cloud: LocalCloud) -> list[str]:
    """Nodes that are not powered down (to exclude them when a test needs a launch but cannot pin nodes)."""
    return sorted(n for n, s in cloud.nodes().items() if not s.endswith("~"))


def exclude_warm(cloud: LocalCloud) -> list[str]:
    """sbatch arguments excluding every node that is up, so the job must power up a node."""
    warm = warm_nodes(cloud)
    return ["-x", ",".join(warm)] if warm else []


def assert_no_orphans(cloud: LocalCloud, timeout: float = 60) -> None:
    """Eventually every live instance belongs to a powered-up node (powering-down nodes get a moment)."""
    cloud.wait_until(lambda: not cloud.orphan_instances(), timeout, "no orphan instances")
    live = {i.private_ip for i in cloud.instances(LIVE)}
    assert not cloud.orphan_instances(), live


def plugin_events(cloud: LocalCloud) -> list[dict[str, object]]:
    """The plugin's and the manager's event log (slurm_plugin/telemetry/events.py), oldest first."""
    path = cloud.layout.plugin_state / "events.jsonl"
    lines = path.read_text().splitlines() if path.exists() else []
    return [json.loads(line) for line in lines if line.strip()]


def replaced_boots(cloud: LocalCloud, instances: Iterable[Instance]) -> set[str]:
    """The ids of the `instances` Slurm gave up on: a boot past ResumeTimeout (a busy machine) is ended by
    ResumeFailProgram (its `terminated` event says `resume-fail`) and the job requeued onto a new instance. An exact
    count of launches or requeues adds these; any other extra launch or requeue still fails it."""
    ids = {i.instance_id for i in instances}
    return {
        str(e["instance_id"])
        for e in plugin_events(cloud)
        if e.get("event") == "terminated" and e.get("reason") == "resume-fail" and e.get("instance_id") in ids
    }
