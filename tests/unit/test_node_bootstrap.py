"""The compute-node bootstrap script (assets/bootstrap): finds its Slurm node by NodeAddr, waits with a bound, execs slurmd.

A fake `scontrol` prints node lines and a fake `slurmd` prints its arguments, so the real script runs unchanged.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

BOOTSTRAP = Path(__file__).resolve().parents[2] / "assets" / "bootstrap" / "elastic-slurm-node-bootstrap"

NODES = """NodeName=cpu-small-1 Arch=x86_64 NodeAddr=127.16.0.4 NodeHostName=cpu-small-1 State=IDLE+CLOUD+POWERED_DOWN
NodeName=cpu-small-2 Arch=x86_64 NodeAddr=127.16.0.5 NodeHostName=cpu-small-2 State=IDLE+CLOUD+POWERING_UP
NodeName=cpu-small-3 Arch=x86_64 NodeAddr=127.16.0.4 NodeHostName=cpu-small-3 State=ALLOCATED+CLOUD+POWERING_UP
"""


def _fakes(tmp_path: Path, nodes: str) -> dict[str, str]:
    (tmp_path / "nodes.txt").write_text(nodes)
    scontrol = tmp_path / "scontrol"
    scontrol.write_text(f"#!/bin/sh\ncat {tmp_path / 'nodes.txt'}\n")
    slurmd = tmp_path / "slurmd"
    slurmd.write_text('#!/bin/sh\necho "slurmd $*"\n')
    for path in (scontrol, slurmd):
        path.chmod(0o755)
    return {
        "PATH": "/usr/bin:/bin",
        "SLURM_BIN_DIR": str(tmp_path),
        "SLURM_SBIN_DIR": str(tmp_path),
        "SLURM_CONF": "/etc/slurm/slurm.conf",
        "ELASTIC_SLURM_INSTANCE_ID": "i-0abc",
        "ELASTIC_SLURM_POLL": "0.1",
    }


def _run(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(BOOTSTRAP)], env=env, capture_output=True, text=True, timeout=30)


def test_bootstrap_starts_slurmd_for_the_node_whose_nodeaddr_is_its_ip(tmp_path: Path) -> None:
    env = {**_fakes(tmp_path, NODES), "ELASTIC_SLURM_PRIVATE_IP": "127.16.0.5"}
    result = _run(env)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "slurmd -D -N cpu-small-2 -f /etc/slurm/slurm.conf"


def test_a_stale_address_loses_to_the_node_that_is_powering_up(tmp_path: Path) -> None:
    env = {**_fakes(tmp_path, NODES), "ELASTIC_SLURM_PRIVATE_IP": "127.16.0.4"}
    assert _run(env).stdout.split()[3] == "cpu-small-3"


def test_bootstrap_runs_slurmd_through_the_prefix_command(tmp_path: Path) -> None:
    env = {
        **_fakes(tmp_path, NODES),
        "ELASTIC_SLURM_PRIVATE_IP": "127.16.0.5",
        "ELASTIC_SLURM_SLURMD_PREFIX": "echo via",
    }
    assert _run(env).stdout.startswith("via ")


def test_bootstrap_gives_up_when_no_node_claims_its_ip_within_the_bound(tmp_path: Path) -> None:
    env = {**_fakes(tmp_path, NODES), "ELASTIC_SLURM_PRIVATE_IP": "127.16.9.9", "ELASTIC_SLURM_NODE_WAIT": "1"}
    result = _run(env)
    assert result.returncode == 3
    assert "NodeAddr=127.16.9.9" in result.stderr and result.stdout == ""


def test_with_a_conf_server_and_no_slurm_conf_slurmd_runs_configless(tmp_path: Path) -> None:
    env = {**_fakes(tmp_path, NODES), "ELASTIC_SLURM_PRIVATE_IP": "127.16.0.5"}
    del env["SLURM_CONF"]
    (tmp_path / "scontrol").write_text(
        f'#!/bin/sh\ncat "$SLURM_CONF" > {tmp_path / "seen.conf"}\ncat {tmp_path / "nodes.txt"}\n'
    )
    env |= {
        "ELASTIC_SLURM_CONF_SERVER": "ctl-a:6817,ctl-b:6817",
        "ELASTIC_SLURM_CLUSTER": "c1",
        "ELASTIC_SLURM_RUN_DIR": str(tmp_path / "run"),
    }
    result = _run(env)
    assert result.stdout.strip() == "slurmd -D -N cpu-small-2 --conf-server ctl-a:6817,ctl-b:6817", result.stderr
    seen = (tmp_path / "seen.conf").read_text().splitlines()
    assert seen == [
        "ClusterName=c1",
        "SlurmctldHost=ctl-a",
        "SlurmctldHost=ctl-b",
        "SlurmctldPort=6817",
        "AuthType=auth/munge",
    ]
