"""The rendered fragments are accepted by the real slurmctld (parsed, partitions built), for every example.

Runs slurmctld in the foreground on a free loopback port with a throw-away base slurm.conf that Includes the rendered
text, waits for "Running as primary controller" (or for it to die), and stops it by PID. slurmctld is the one of the
local cloud's Slurm root (tests/slurm_in_root.py), the release the images build. No munged is needed: nothing talks to this controller.
"""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import pytest

from cluster_config import load
from localcloud.aws.emulated_aws import free_port
from slurm_plugin.render.cluster import RenderOptions, render_cluster
from slurm_plugin.render.manifest import placeholder_infra
from tests.slurm_in_root import SKIP_REASON, available, in_root, root_env, stop
from tests.unit.cache_fixture import fixture_cache

SLURMCTLD = Path("/usr/sbin/slurmctld")  # inside the root
EXAMPLES = sorted((Path(__file__).parents[2] / "cluster_config" / "examples").glob("*.yaml"))
READY = "Running as primary controller"

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(not available(), reason=SKIP_REASON),
]


def _base_conf(root: Path, include: Path, munge: Path) -> str:
    return "\n".join(
        [
            "ClusterName=rendertest",
            "SlurmctldHost=localhost(127.0.0.1)",
            f"SlurmctldPort={free_port()}",
            f"SlurmdPort={free_port()}",
            "SlurmUser=root",
            "AuthType=auth/munge",
            f"AuthInfo=socket={munge}",
            f"StateSaveLocation={root}/state",
            f"SlurmctldPidFile={root}/slurmctld.pid",
            f"SlurmctldLogFile={root}/slurmctld.log",
            "SlurmctldDebug=info",
            "ProctrackType=proctrack/linuxproc",
            "TaskPlugin=task/none",
            "JobAcctGatherType=jobacct_gather/none",
            "SelectType=select/cons_tres",
            "SelectTypeParameters=CR_CPU",
            "MailProg=/bin/true",
            f"Include {include}",
            "",
        ]
    )


def _slurmctld_accepts(root: Path, munge: Path) -> str:
    """Run slurmctld until it is primary or dies; return its log."""
    log = root / "slurmctld.log"
    proc = subprocess.Popen(
        in_root([str(SLURMCTLD), "-D", "-i", "-f", str(root / "slurm.conf")], root, munge.parent),
        env=root_env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and proc.poll() is None:
            if log.exists() and READY in log.read_text(errors="replace"):
                break
            time.sleep(0.2)
        return log.read_text(errors="replace") if log.exists() else ""
    finally:
        stop(proc)


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.stem)
def test_slurmctld_accepts_rendered_example(path: Path, tmp_path: Path, munge_socket: Path) -> None:
    config = load(path)
    # this slurmctld runs without slurmdbd (its base has no accounting), and Slurm refuses to start with
    # AccountingStorageTRES=gres/gpu (rendered for GPU pools when accounting is on) without one: render as without
    config = config.model_copy(update={"accounting": config.accounting.model_copy(update={"mode": "none"})})
    cluster = config.clusters[0]
    options = RenderOptions(slurmd_port_base=free_port() if path.stem == "local-demo" else None)
    rendered = render_cluster(config, cluster.name, placeholder_infra(cluster), fixture_cache(), options)
    (tmp_path / "state").mkdir()
    (tmp_path / "elastic.conf").write_text(rendered.slurm_conf)
    if rendered.gres_conf:
        (tmp_path / "gres.conf").write_text(rendered.gres_conf)
    if rendered.topology_conf:  # beside slurm.conf, where topology/tree reads it
        (tmp_path / "topology.conf").write_text(rendered.topology_conf)
    (tmp_path / "slurm.conf").write_text(_base_conf(tmp_path, tmp_path / "elastic.conf", munge_socket))
    log = _slurmctld_accepts(tmp_path, munge_socket)
    assert READY in log, log[-2000:]
    assert "fatal" not in log
    assert "switches lack access" not in log and "no switch can reach all nodes" not in log  # every node in one tree
    assert f"preparing for {len(cluster.partitions)} partitions" in log
