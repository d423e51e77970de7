"""The compute-node bootstrap script (assets/bootstrap): reads its node name from the file resume wrote for its
instance id, asks Slurm about that one node until its NodeAddr is the instance's IP (bounded), writes slurmd's options
for Slurm's slurmd.service and starts it (`systemctl enable --now slurmd.service`), then returns.

Fake `sinfo`/`scontrol` answer from files and log every call (each call is a slurmctld RPC on a real cluster), and a
fake `systemctl` prints its arguments and the options file the unit reads, so the real script runs unchanged.
"""

from __future__ import annotations

import subprocess
import threading
import time
from pathlib import Path

import pytest

BOOTSTRAP = Path(__file__).resolve().parents[2] / "assets" / "bootstrap" / "elastic-slurm-node-bootstrap"
INSTANCE = "i-0abc1234def567890"
# node -> NodeAddr, what `sinfo -n NODE -o %o` answers
ADDRS = {"cpu-small-1": "cpu-small-1", "cpu-small-2": "127.16.0.5", "cpu-small-3": "127.16.0.4"}


def _answers(tmp_path: Path) -> str:
    """Shell lines of a fake scontrol: `show config` prints config.txt, anything else fails (the bootstrap must not
    read the node table)."""
    return f'if [ "$1 $2" = "show config" ]; then cat {tmp_path / "config.txt"}; else exit 1; fi\n'


def _fakes(tmp_path: Path, addrs: dict[str, str] | None = None, node: str | None = "cpu-small-2") -> dict[str, str]:
    """Fake Slurm clients, the node-names directory (with this instance's file naming `node`, unless None)."""
    calls = tmp_path / "calls.log"
    for name, addr in (addrs or ADDRS).items():
        (tmp_path / f"addr-{name}").write_text(addr + "\n")
    (tmp_path / "config.txt").write_text(
        "LaunchParameters        = (null)\nSlurmdSpoolDir          = /var/spool/slurmd\n"
    )
    scontrol = tmp_path / "scontrol"
    scontrol.write_text(f'#!/bin/sh\necho "scontrol $*" >> {calls}\n' + _answers(tmp_path))
    sinfo = tmp_path / "sinfo"
    # answers `sinfo -a -h -N -n NODE -o %o` from addr-NODE, and logs the call once it has answered (a test that
    # changes the answer after the first call sees it logged only when that call's answer is final)
    sinfo.write_text(
        '#!/bin/sh\nargs="$*"\n'
        'while [ $# -gt 0 ]; do [ "$1" = -n ] && node=$2; shift; done\n'
        f'cat {tmp_path}/addr-"$node" 2>/dev/null\n'
        f'echo "sinfo $args" >> {calls}\n'
    )
    systemctl = tmp_path / "systemctl"
    systemctl.write_text(f'#!/bin/sh\necho "systemctl $*"\ngrep -v "^#" {tmp_path / "slurmd.env"}\n')
    for path in (scontrol, sinfo, systemctl):
        path.chmod(0o755)
    names = tmp_path / "names"
    names.mkdir(exist_ok=True)
    if node is not None:
        (names / INSTANCE).write_text(node + "\n")
    return {
        "PATH": "/usr/bin:/bin",
        "SLURM_BIN_DIR": str(tmp_path),
        "SLURM_SBIN_DIR": str(tmp_path),
        "SLURM_CONF": "/etc/slurm/slurm.conf",
        "ELASTIC_SLURM_INSTANCE_ID": INSTANCE,
        "ELASTIC_SLURM_PRIVATE_IP": "127.16.0.5",
        "ES_NODE_NAMES_DIR": str(names),
        "ELASTIC_SLURM_POLL": "0.05",
        "ELASTIC_SLURM_SLURM_POLL": "0.1",
        "ELASTIC_SLURM_SYSTEMCTL": str(systemctl),
        "ELASTIC_SLURM_SLURMD_ENV": str(tmp_path / "slurmd.env"),
    }


def _run(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(BOOTSTRAP)], env=env, capture_output=True, text=True, timeout=30)


def _started(options: str) -> str:
    """What the fake systemctl prints when the bootstrap started slurmd.service with these SLURMD_OPTIONS."""
    return f"systemctl enable --now slurmd.service\nSLURMD_OPTIONS='{options}'"


def _calls(tmp_path: Path) -> list[str]:
    path = tmp_path / "calls.log"
    return path.read_text().splitlines() if path.exists() else []


def test_bootstrap_starts_slurmd_for_the_node_its_instance_file_names(tmp_path: Path) -> None:
    result = _run(_fakes(tmp_path))
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == _started("-N cpu-small-2 -f /etc/slurm/slurm.conf")
    # one question to Slurm, about this node only, and the config read (nss_slurm)
    assert _calls(tmp_path) == ["sinfo -a -h -N -n cpu-small-2 -o %o", "scontrol show config"]


def test_waiting_for_the_node_name_costs_slurm_nothing(tmp_path: Path) -> None:
    env = _fakes(tmp_path, node=None)

    def name_it_later() -> None:
        time.sleep(0.6)  # the instance boots before resume has written its file
        (tmp_path / "names" / INSTANCE).write_text("cpu-small-2\n")

    writer = threading.Thread(target=name_it_later)
    writer.start()
    result = _run(env)
    writer.join()
    assert result.stdout.strip() == _started("-N cpu-small-2 -f /etc/slurm/slurm.conf"), result.stderr
    assert [c for c in _calls(tmp_path) if c.startswith("sinfo")] == ["sinfo -a -h -N -n cpu-small-2 -o %o"]


def test_it_waits_until_slurm_has_the_nodes_address(tmp_path: Path) -> None:
    env = _fakes(tmp_path, {**ADDRS, "cpu-small-2": "cpu-small-2"})  # NodeAddr not set yet

    def set_address_later() -> None:  # once the bootstrap has asked (and been told the name) at least once
        deadline = time.monotonic() + 60
        while not any(c.startswith("sinfo") for c in _calls(tmp_path)) and time.monotonic() < deadline:
            time.sleep(0.05)
        (tmp_path / "addr-cpu-small-2").write_text("127.16.0.5\n")

    setter = threading.Thread(target=set_address_later)
    setter.start()
    result = _run(env)
    setter.join()
    assert result.stdout.strip() == _started("-N cpu-small-2 -f /etc/slurm/slurm.conf"), result.stderr
    asked = [c for c in _calls(tmp_path) if c.startswith("sinfo")]
    assert len(asked) >= 2 and set(asked) == {"sinfo -a -h -N -n cpu-small-2 -o %o"}


def test_bootstrap_returns_once_slurmd_service_started_and_fails_when_it_did_not(tmp_path: Path) -> None:
    env = _fakes(tmp_path)
    result = _run(env)
    assert result.returncode == 0 and "slurmd.service started: node cpu-small-2" in result.stderr
    (tmp_path / "systemctl").write_text("#!/bin/sh\necho 'slurmd.service: failed' >&2\nexit 1\n")
    result = _run(env)
    assert result.returncode == 4 and "slurmd.service did not start" in result.stderr


@pytest.mark.parametrize(
    ("node", "conf_server"),
    [
        ("cpu-small-2 --conf-server evil", "ctl-a:6817"),  # a word more for slurmd
        ("cpu-small-2", "ctl-a:6817' ExecStartPre=/bin/sh"),  # out of the quotes in the env file
        ("$(reboot)", "ctl-a:6817"),
        ("cpu-small-2", "ctl-a:6817\nLD_PRELOAD=/tmp/x.so"),  # a second variable for the unit
        ("-D", "ctl-a:6817"),  # an option, not a name
        ("cpu-*", "ctl-a:6817"),  # a glob
        ("cpu small", "ctl-a:6817"),
        ("cpu-small-2", "ctl-a:6817,"),
    ],
)
def test_a_node_name_or_conf_server_that_is_not_plain_never_reaches_the_unit(
    tmp_path: Path, node: str, conf_server: str
) -> None:
    env = _fakes(tmp_path, {**ADDRS, node: "127.16.0.5"}, node=node)
    del env["SLURM_CONF"]
    env |= {"ELASTIC_SLURM_CONF_SERVER": conf_server, "ELASTIC_SLURM_RUN_DIR": str(tmp_path / "run")}
    result = _run(env)
    assert result.returncode == 6 and "not a plain value" in result.stderr, result.stderr
    assert result.stdout == "" and not (tmp_path / "slurmd.env").exists()
    assert _calls(tmp_path) == []  # refused before any Slurm call (and a bad conf server before the client config)
    assert (tmp_path / "run" / "client.conf").exists() == (conf_server == "ctl-a:6817")


def test_bootstrap_gives_up_when_no_node_is_named_for_it_within_the_bound(tmp_path: Path) -> None:
    env = {**_fakes(tmp_path, node=None), "ELASTIC_SLURM_NODE_WAIT": "1"}
    result = _run(env)
    assert result.returncode == 3 and result.stdout == ""
    assert f"no node name for {INSTANCE}" in result.stderr
    assert _calls(tmp_path) == []


def test_bootstrap_gives_up_when_the_nodes_address_is_not_its_ip_within_the_bound(tmp_path: Path) -> None:
    env = {**_fakes(tmp_path, node="cpu-small-3"), "ELASTIC_SLURM_NODE_WAIT": "1"}  # cpu-small-3 is 127.16.0.4's
    result = _run(env)
    assert result.returncode == 3 and result.stdout == ""
    assert "node cpu-small-3 has no NodeAddr=127.16.0.5" in result.stderr


def test_without_a_node_names_directory_or_instance_id_the_boot_fails_at_once(tmp_path: Path) -> None:
    env = _fakes(tmp_path)
    no_dir = {k: v for k, v in env.items() if k != "ES_NODE_NAMES_DIR"}
    result = _run(no_dir)
    assert result.returncode == 3 and "ES_NODE_NAMES_DIR unset" in result.stderr
    no_id = {**env, "ELASTIC_SLURM_INSTANCE_ID": "", "ELASTIC_SLURM_NODE_WAIT": "1"}
    result = _run(no_id)
    assert result.returncode == 2 and "no instance id" in result.stderr


def test_with_a_conf_server_and_no_slurm_conf_slurmd_runs_configless(tmp_path: Path) -> None:
    env = _fakes(tmp_path)
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
    assert result.stdout.strip() == _started("-N cpu-small-2 --conf-server ctl-a:6817,ctl-b:6817"), result.stderr
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
    env = _fakes(tmp_path)
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
        assert result.stdout.strip() == _started("-N cpu-small-2 -f /etc/slurm/slurm.conf"), result.stderr
    conf = (tmp_path / "nss_slurm.conf").read_text().splitlines()
    assert conf[1:] == ["NodeName=cpu-small-2", f"SlurmdSpoolDir={tmp_path / 'spool' / 'cpu-small-2'}"]
    assert (tmp_path / "spool" / "cpu-small-2").is_dir()
    switch = (tmp_path / "nsswitch.conf").read_text()
    assert switch == NSSWITCH.replace("passwd:         files", "passwd:         slurm files").replace(
        "group:          files", "group:          slurm files"
    )


def test_without_enable_nss_slurm_the_name_service_is_left_alone(tmp_path: Path) -> None:
    env = _nss_fakes(tmp_path, "(null)")
    assert _run(env).stdout.strip() == _started("-N cpu-small-2 -f /etc/slurm/slurm.conf")
    assert (tmp_path / "nsswitch.conf").read_text() == NSSWITCH
    assert not (tmp_path / "nss_slurm.conf").exists()


def test_an_image_without_libnss_slurm_keeps_its_nsswitch_and_says_why(tmp_path: Path) -> None:
    env = _nss_fakes(tmp_path, "enable_nss_slurm", libnss=False)
    result = _run(env)
    assert result.stdout.strip() == _started("-N cpu-small-2 -f /etc/slurm/slurm.conf")
    assert (tmp_path / "nsswitch.conf").read_text() == NSSWITCH
    assert "no libnss_slurm.so.2" in result.stderr


def test_a_config_slurmctld_does_not_give_fails_the_boot_within_the_bound(tmp_path: Path) -> None:
    env = {**_nss_fakes(tmp_path, "enable_nss_slurm"), "ELASTIC_SLURM_NODE_WAIT": "1"}
    (tmp_path / "scontrol").write_text("#!/bin/sh\nexit 1\n")
    result = _run(env)
    assert result.returncode == 5 and result.stdout == ""
    assert "cannot read the cluster's config from slurmctld" in result.stderr
