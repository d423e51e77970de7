"""The local cloud's own config: loopback networks, its render overrides, and `elastic-slurm local` bad input."""

from __future__ import annotations

import ipaddress
import json
import os
from pathlib import Path

import pytest
import yaml

from cluster_config import load, parse
from elastic_slurm.cli import main
from localcloud.aws.aws_setup import plan_networks
from localcloud.conf import Ports, render_overrides
from localcloud.layout import Layout
from slurm_plugin.render.base import BaseSettings, render_base_conf, render_cgroup_conf
from slurm_plugin.render.dbd import DbdPaths, render_slurmdbd_conf
from slurm_plugin.render.manifest import RenderError
from slurm_plugin.render.overrides import apply
from slurm_plugin.render.overrides import load as load_overrides

EXAMPLES = Path(__file__).resolve().parents[2] / "cluster_config" / "examples"
LOOPBACK = ipaddress.ip_network("127.0.0.0/8")


def test_every_emulated_subnet_is_a_loopback_slash20_one_per_az() -> None:
    cluster = load(EXAMPLES / "local-demo.yaml").clusters[0]
    home = plan_networks(cluster)[0]
    assert home.vpc_cidr == "127.16.0.0/16"
    assert list(home.subnets) == ["us-east-1a", "us-east-1b", "us-east-1c"]
    nets = [ipaddress.ip_network(c) for c in home.subnets.values()]
    assert all(n.prefixlen == 20 and n.subnet_of(LOOPBACK) for n in nets)
    assert len(set(nets)) == 3


def test_remote_regions_get_their_own_loopback_vpc() -> None:
    data = yaml.safe_load((EXAMPLES / "local-demo.yaml").read_text())
    data["clusters"][0]["remote_regions"] = [
        {"region": "us-west-2", "network": {"mode": "create", "availability_zones": ["us-west-2a", "us-west-2b"]}}
    ]
    plans = plan_networks(parse(data).clusters[0])
    assert [(p.region, p.vpc_cidr) for p in plans] == [("us-east-1", "127.16.0.0/16"), ("us-west-2", "127.17.0.0/16")]
    assert plans[1].subnets == {"us-west-2a": "127.17.0.0/20", "us-west-2b": "127.17.16.0/20"}


def test_local_overrides_change_only_ports_paths_cgroup_and_timers_of_the_production_render(tmp_path: Path) -> None:
    layout = Layout(tmp_path)
    overrides = render_overrides(layout, Ports(1, 2, 3, 4, 5, 6))
    config = load(EXAMPLES / "local-demo.yaml")
    plain = BaseSettings(controller_hosts=("ip-127-16-0-4(127.16.0.4)",), slurmdbd_host="127.16.0.4")
    settings = apply(plain, overrides["base"], "base")
    lines = render_base_conf(config, "local", settings).splitlines()
    production = render_base_conf(config, "local", plain).splitlines()
    assert "SlurmUser=slurm" in lines and "SlurmdUser=root" in lines
    assert "SlurmctldParameters=enable_configless,idle_on_node_suspend,power_save_interval=1" in lines
    assert "AuthInfo=cred_expire=20" in lines and "SlurmdTimeout=20" in lines
    assert "ProctrackType=proctrack/linuxproc" in lines and "TaskPlugin=task/none" in lines
    assert {"SlurmctldPort=3", "SlurmdPort=6", "AccountingStoragePort=4"} <= set(lines)
    assert f"SlurmdPidFile={layout.run}/slurmd-%n.pid" in lines
    # configless ships an included file only when it sits beside slurm.conf and is named relatively
    assert lines[-1] == "Include slurm-elastic.conf" == production[-1]
    keys = [line.split("=", 1)[0] for line in lines if "=" in line and not line.startswith("#")]
    assert len(keys) == len(set(keys)), "no key twice"
    # everything else is the production text: the same controllers, accounting enforcement, health check, srun ports
    same = {
        "AccountingStorageEnforce=associations,limits,qos",
        "SrunPortRange=60001-63000",
        "SelectTypeParameters=CR_Core_Memory",
    }
    assert same <= set(lines) & set(production)
    assert render_cgroup_conf(settings).splitlines()[-1] == "CgroupPlugin=disabled"
    dbd = render_slurmdbd_conf(
        {"host": "127.0.0.1", "port": 2, "username": "slurm", "password": "pw"},
        "ip-127-16-0-4",
        paths=apply(DbdPaths(), overrides["dbd"], "dbd"),
    ).splitlines()
    assert "DbdPort=4" in dbd and f"LogFile={layout.log}/slurmdbd.log" in dbd


def test_an_unknown_override_is_one_line_naming_it(tmp_path: Path) -> None:
    path = tmp_path / "o.json"
    path.write_text(json.dumps({"base": {"slurmctld_prot": 1}}))
    sections = load_overrides({"ES_RENDER_OVERRIDES": str(path)})
    with pytest.raises(RenderError, match=r"^ES_RENDER_OVERRIDES: base.slurmctld_prot is not a setting"):
        apply(BaseSettings(controller_hosts=("c",)), sections["base"], "base")
    path.write_text("[1]")
    with pytest.raises(RenderError, match=r"expected an object"):
        load_overrides({"ES_RENDER_OVERRIDES": str(path)})


@pytest.mark.parametrize(
    ("argv", "names"),
    [
        (["local", "up", "no-such.yaml"], "CONFIG"),
        (["local", "up", str(EXAMPLES / "local-demo.yaml"), "--boot-failure-rate", "2"], "--boot-failure-rate"),
        (["local", "up", str(EXAMPLES / "local-demo.yaml"), "--boot-delay", "-1"], "--boot-delay"),
    ],
)
def test_local_up_bad_input_is_one_line_naming_the_argument(
    argv: list[str], names: str, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    assert main([*argv, "--state-dir", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and names in err


@pytest.mark.parametrize("command", [["status"], ["interrupt", "cpu-small-1"]])
def test_local_commands_without_a_cloud_say_so_in_one_line(
    command: list[str], capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    assert main(["local", *command, "--state-dir", str(tmp_path / "none")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "no local cloud" in err


@pytest.mark.skipif(os.geteuid() != 0, reason="local up checks for root first")
def test_local_up_refuses_a_non_empty_foreign_state_dir(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    (tmp_path / "precious.txt").write_text("mine")
    code = main(["local", "up", str(EXAMPLES / "local-demo.yaml"), "--state-dir", str(tmp_path)])
    assert code == 2
    assert "--state-dir" in capsys.readouterr().err
    assert (tmp_path / "precious.txt").read_text() == "mine"
