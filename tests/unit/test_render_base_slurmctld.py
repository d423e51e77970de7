"""The production base slurm.conf (render_base) + the fragments start the real slurmctld 22.05, and `scontrol show
config` reports the rendered ClusterName and SlurmctldHost.

Only the paths move into a temporary directory (through `BaseSettings`), plus two test-only lines appended to the
base: `AuthInfo` (our own munged socket, so the host's munge is untouched) and nothing else — the cgroup plugins,
select, accounting-none and health-check settings are the production ones. SlurmUser is root because pytest's
temporary directories are private to root. Needs root, slurmctld and munged; skipped otherwise. Every daemon started
here is stopped by PID, also on failure.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from cluster_config import load
from slurm_plugin.render import RenderOptions, render_cluster
from slurm_plugin.render_base import BaseSettings, render_base_conf, render_cgroup_conf
from slurm_plugin.render_manifest import placeholder_infra
from tests.unit.cache_fixture import fixture_cache
from tests.unit.test_render_slurm_parse import READY, SLURMCTLD, _free_port

MUNGED = Path("/usr/sbin/munged")
SCONTROL = Path("/usr/bin/scontrol")
MINIMAL = Path(__file__).parents[2] / "cluster_config" / "examples" / "minimal.yaml"

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(
        not SLURMCTLD.exists() or not MUNGED.exists() or os.geteuid() != 0, reason="needs root, slurmctld and munged"
    ),
]


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _wait(check: object, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if callable(check) and check():
            return True
        time.sleep(0.2)
    return False


@pytest.fixture(scope="module")
def munge_socket() -> Iterator[Path]:
    # munged wants every directory above its socket executable by all: pytest's tmp dirs are 0700
    root = Path(tempfile.mkdtemp(prefix="elastic-slurm-base-munge-", dir="/var/tmp"))
    root.chmod(0o755)
    key = root / "munge.key"
    key.write_bytes(os.urandom(1024))
    key.chmod(0o600)
    sock = root / "munge.socket"
    proc = subprocess.Popen(
        [
            str(MUNGED),
            "--foreground",
            f"--socket={sock}",
            f"--key-file={key}",
            f"--pid-file={root / 'munged.pid'}",
            f"--seed-file={root / 'munged.seed'}",
            f"--log-file={root / 'munged.log'}",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        assert _wait(lambda: sock.exists() or proc.poll() is not None, 20) and proc.poll() is None, "munged died"
        yield sock
    finally:
        _stop(proc)
        shutil.rmtree(root, ignore_errors=True)


@pytest.mark.parametrize("controllers", [1, 2])
def test_slurmctld_starts_from_the_production_base(controllers: int, munge_socket: Path, tmp_path: Path) -> None:
    text = MINIMAL.read_text().replace(
        "  - name: minimal", f"  - name: minimal\n    controller: {{count: {controllers}}}"
    )
    config_path = tmp_path / "cluster.yaml"
    config_path.write_text(text)
    config = load(config_path)
    me = socket.gethostname().split(".")[0]
    hosts = (f"{me}(127.0.0.1)", "ctl-backup(127.0.0.2)")[:controllers]
    port = _free_port()
    settings = BaseSettings(
        controller_hosts=hosts,
        fragments_path=str(tmp_path / "slurm-elastic.conf"),
        state_save_location=str(tmp_path / "state"),
        log_dir=str(tmp_path / "log"),
        slurmd_spool_dir=str(tmp_path / "spool"),
        pid_dir=str(tmp_path),
        slurm_user="root",
        slurmctld_port=port,
        slurmd_port=_free_port(),
    )
    rendered = render_cluster(
        config,
        "minimal",
        placeholder_infra(config.cluster("minimal")),
        fixture_cache(),
        RenderOptions(slurmctld_parameters_in_base=True),
    )
    for sub in ("state", "log", "spool"):
        (tmp_path / sub).mkdir()
    (tmp_path / "slurm-elastic.conf").write_text(rendered.slurm_conf)
    (tmp_path / "cgroup.conf").write_text(render_cgroup_conf())
    base = render_base_conf(config, "minimal", settings)
    (tmp_path / "slurm.conf").write_text(base + f"AuthInfo=socket={munge_socket}\n")
    log = tmp_path / "log" / "slurmctld.log"
    proc = subprocess.Popen(
        [str(SLURMCTLD), "-D", "-i", "-f", str(tmp_path / "slurm.conf")],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        _wait(lambda: proc.poll() is not None or (log.exists() and READY in log.read_text(errors="replace")), 60)
        text = log.read_text(errors="replace") if log.exists() else ""
        assert READY in text, text[-2000:]
        shown = subprocess.run(
            [str(SCONTROL), "show", "config"],
            env={**os.environ, "SLURM_CONF": str(tmp_path / "slurm.conf")},
            capture_output=True,
            text=True,
            timeout=30,
        )
    finally:
        _stop(proc)
    assert shown.returncode == 0, shown.stderr
    config_lines = [" ".join(line.split()) for line in shown.stdout.splitlines()]
    assert "ClusterName = minimal" in config_lines
    assert f"SlurmctldHost[0] = {me}(127.0.0.1)" in config_lines
    if controllers == 2:
        assert "SlurmctldHost[1] = ctl-backup(127.0.0.2)" in config_lines
    assert "SlurmctldParameters = enable_configless,idle_on_node_suspend" in config_lines
    assert "ProctrackType = proctrack/cgroup" in config_lines
    assert "TaskPlugin = task/cgroup,task/affinity" in config_lines
