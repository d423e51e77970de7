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


def _answers(tmp_path: Path) -> str:
    """Shell lines of a fake scontrol: `show config` prints config.txt, anything else the node lines."""
    return (
        f'if [ "$1 $2" = "show config" ]; then cat {tmp_path / "config.txt"}; else cat {tmp_path / "nodes.txt"}; fi\n'
    )


def _fakes(tmp_path: Path, nodes: str) -> dict[str, str]:
    (tmp_path / "nodes.txt").write_text(nodes)
    (tmp_path / "config.txt").write_text(
        "LaunchParameters        = (null)\nSlurmdSpoolDir          = /var/spool/slurmd\n"
    )
    scontrol = tmp_path / "scontrol"
    scontrol.write_text("#!/bin/sh\n" + _answers(tmp_path))
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
        f'#!/bin/sh\ncat "$SLURM_CONF" > {tmp_path / "seen.conf"}\n' + _answers(tmp_path)
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
        "SlurmUser=slurm",
    ]


# ---- nss_slurm (clusters[].nss_slurm): the bootstrap reads LaunchParameters and SlurmdSpoolDir from slurmctld
NSSWITCH = "# /etc/nsswitch.conf\n\npasswd:         files\ngroup:          files\nshadow:         files\nhosts:          files dns\n"
SHOW_CONFIG = """Configuration data as of 2026-01-01T00:00:00
LaunchParameters        = {params}
SlurmdSpoolDir          = {spool}/%n
SlurmdUser              = root(0)

Slurmctld(primary) at 127.16.0.4 is DOWN
"""


def _nss_fakes(tmp_path: Path, params: str, libnss: bool = True) -> dict[str, str]:
    env = _fakes(tmp_path, NODES)
    (tmp_path / "config.txt").write_text(SHOW_CONFIG.format(params=params, spool=tmp_path / "spool"))
    # the bootstrap reads the output, not scontrol's exit status (that of its closing controller ping)
    (tmp_path / "scontrol").write_text("#!/bin/sh\n" + _answers(tmp_path) + '[ "$1 $2" != "show config" ]\n')
    cache = "\tlibnss_slurm.so.2 (libc6,x86-64) => /lib/libnss_slurm.so.2\\n" if libnss else ""
    ldconfig = tmp_path / "ldconfig"
    ldconfig.write_text(
        f"#!/bin/sh\nprintf '1 libs found in cache\\n\tlibc.so.6 (libc6,x86-64) => /lib/libc.so.6\\n{cache}'\n"
    )
    ldconfig.chmod(0o755)
    (tmp_path / "nsswitch.conf").write_text(NSSWITCH)
    return {
        **env,
        "ELASTIC_SLURM_PRIVATE_IP": "127.16.0.5",
        "ELASTIC_SLURM_NSS_SLURM_CONF": str(tmp_path / "nss_slurm.conf"),
        "ELASTIC_SLURM_NSSWITCH": str(tmp_path / "nsswitch.conf"),
        "ELASTIC_SLURM_LDCONFIG": str(ldconfig),
    }


def test_with_enable_nss_slurm_the_node_names_itself_and_its_spool_and_puts_slurm_first(tmp_path: Path) -> None:
    env = _nss_fakes(tmp_path, "slurmstepd_memlock,enable_nss_slurm")
    for _ in range(2):  # a second boot of the same disk changes nothing more
        result = _run(env)
        assert result.stdout.strip() == "slurmd -D -N cpu-small-2 -f /etc/slurm/slurm.conf", result.stderr
    conf = (tmp_path / "nss_slurm.conf").read_text().splitlines()
    assert conf[1:] == ["NodeName=cpu-small-2", f"SlurmdSpoolDir={tmp_path / 'spool' / 'cpu-small-2'}"]
    assert (tmp_path / "spool" / "cpu-small-2").is_dir()
    switch = (tmp_path / "nsswitch.conf").read_text()
    assert switch == NSSWITCH.replace("passwd:         files", "passwd:         slurm files").replace(
        "group:          files", "group:          slurm files"
    )


def test_without_enable_nss_slurm_the_name_service_is_left_alone(tmp_path: Path) -> None:
    env = _nss_fakes(tmp_path, "(null)")
    assert _run(env).stdout.startswith("slurmd -D -N cpu-small-2")
    assert (tmp_path / "nsswitch.conf").read_text() == NSSWITCH
    assert not (tmp_path / "nss_slurm.conf").exists()


def test_an_image_without_libnss_slurm_keeps_its_nsswitch_and_says_why(tmp_path: Path) -> None:
    env = _nss_fakes(tmp_path, "enable_nss_slurm", libnss=False)
    result = _run(env)
    assert result.stdout.startswith("slurmd -D -N cpu-small-2")
    assert (tmp_path / "nsswitch.conf").read_text() == NSSWITCH
    assert "no libnss_slurm.so.2" in result.stderr


def test_a_config_slurmctld_does_not_give_fails_the_boot_within_the_bound(tmp_path: Path) -> None:
    env = {**_nss_fakes(tmp_path, "enable_nss_slurm"), "ELASTIC_SLURM_NODE_WAIT": "1"}
    (tmp_path / "scontrol").write_text(
        f'#!/bin/sh\n[ "$1 $2" = "show config" ] && exit 1\ncat {tmp_path / "nodes.txt"}\n'
    )
    result = _run(env)
    assert result.returncode == 5 and result.stdout == ""
    assert "cannot read the cluster's config from slurmctld" in result.stderr
