"""The production base slurm.conf (render_base) + the fragments start the real slurmctld of the release the images
build (from the local cloud's Slurm root), and `scontrol show config` reports the rendered ClusterName and SlurmctldHost.

Only the paths move into a temporary directory (through `BaseSettings`), plus two test-only lines appended to the
base: `AuthInfo` (our own munged socket, so the host's munge is untouched) and nothing else — the cgroup plugins,
select, accounting-none and health-check settings are the production ones. SlurmUser is root because pytest's
temporary directories are private to root. Every daemon started here is stopped by PID, also on failure.
"""

from __future__ import annotations

import socket
import subprocess
import time
from pathlib import Path

import pytest

from cluster_config import load
from localcloud.aws.emulated_aws import free_port
from slurm_plugin.render.base import BaseSettings, render_base_conf, render_cgroup_conf
from slurm_plugin.render.cluster import RenderOptions, render_cluster
from slurm_plugin.render.manifest import placeholder_infra
from tests.slurm_in_root import SKIP_REASON, available, in_root, root_env, stop
from tests.unit.cache_fixture import fixture_cache
from tests.unit.test_render_slurm_parse import READY, SLURMCTLD

MUNGED = Path("/usr/sbin/munged")
SCONTROL = Path("/usr/bin/scontrol")
MINIMAL = Path(__file__).parents[2] / "cluster_config" / "examples" / "minimal.yaml"

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(not available(), reason=SKIP_REASON),
]


def _wait(check: object, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if callable(check) and check():
            return True
        time.sleep(0.2)
    return False


@pytest.mark.parametrize("controllers", [1, 2])
def test_slurmctld_starts_from_the_production_base(controllers: int, munge_socket: Path, tmp_path: Path) -> None:
    text = MINIMAL.read_text().replace(
        "  - name: minimal", f"  - name: minimal\n    controller: {{count: {controllers}}}"
    )
    text = text[: text.index("\naccounting:")] + "\naccounting: {mode: none}\n"  # no slurmdbd in this test
    config_path = tmp_path / "cluster.yaml"
    config_path.write_text(text)
    config = load(config_path)
    me = socket.gethostname().split(".")[0]
    hosts = (f"{me}(127.0.0.1)", "ctl-backup(127.0.0.2)")[:controllers]
    port = free_port()
    settings = BaseSettings(
        controller_hosts=hosts,
        fragments_path=str(tmp_path / "slurm-elastic.conf"),
        state_save_location=str(tmp_path / "state"),
        log_dir=str(tmp_path / "log"),
        slurmd_spool_dir=str(tmp_path / "spool"),
        pid_dir=str(tmp_path),
        slurm_user="root",
        slurmctld_port=port,
        slurmd_port=free_port(),
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
        in_root([str(SLURMCTLD), "-D", "-i", "-f", str(tmp_path / "slurm.conf")], tmp_path, munge_socket.parent),
        env=root_env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        _wait(lambda: proc.poll() is not None or (log.exists() and READY in log.read_text(errors="replace")), 60)
        text = log.read_text(errors="replace") if log.exists() else ""
        assert READY in text, text[-2000:]
        if controllers == 2:
            # Slurm 24.11+: a starting primary sends REQUEST_CONTROL to the backup's address; on one host 127.0.0.2
            # reaches the primary itself, which then shuts down. Parsed and primary is what this host can show.
            assert "backup_controller not specified" not in text
            return
        for _ in range(4):
            shown = subprocess.run(
                in_root([str(SCONTROL), "show", "config"], tmp_path, munge_socket.parent),
                env=root_env(SLURM_CONF=str(tmp_path / "slurm.conf")),
                capture_output=True,
                text=True,
                timeout=60,
            )
            if shown.returncode == 0:
                break
    finally:
        stop(proc)
    assert shown.returncode == 0, shown.stderr
    config_lines = [" ".join(line.split()) for line in shown.stdout.splitlines()]
    assert "ClusterName = minimal" in config_lines
    assert f"SlurmctldHost[0] = {me}(127.0.0.1)" in config_lines
    if controllers == 2:
        assert "SlurmctldHost[1] = ctl-backup(127.0.0.2)" in config_lines
    assert "SlurmctldParameters = enable_configless,idle_on_node_suspend,power_save_interval=1" in config_lines
    assert "ProctrackType = proctrack/cgroup" in config_lines
    assert "TaskPlugin = task/cgroup,task/affinity" in config_lines
