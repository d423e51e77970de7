"""The production base slurm.conf (slurm_plugin/render/base.py), the `render --controller-hosts` CLI and the boot-time
host lookup of the controller's user data (run with a fake `aws`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from cluster_config import ConfigInvalid, ElasticSlurmConfig
from elastic_slurm.cli import main
from slurm_plugin.instance_cache import write_cache
from slurm_plugin.render.base import BaseSettings, conf_server, render_base_conf, render_cgroup_conf
from slurm_plugin.render.cluster import RenderOptions, render_cluster
from slurm_plugin.render.manifest import RenderError, placeholder_infra
from stacks import user_data
from tests.unit.cache_fixture import fixture_cache
from tests.unit.test_render import small_config

ROOT = Path(__file__).resolve().parents[2]
ONE = BaseSettings(controller_hosts=("ip-1-2-3-4(127.0.0.4)",))


def config_with(accounting: str = "none", controllers: int = 1, efs: bool = True) -> ElasticSlurmConfig:
    overrides: dict[str, Any] = {"controller": {"count": controllers}, "health_checks": {"interval": 120}}
    if efs:
        overrides["storage"] = {"efs": {"mount_point": "/shared"}}
    config = small_config(**overrides)
    if accounting == "none":
        return config
    acct = {
        "mode": "existing",
        "endpoint": "db.example.com:3306",
        "secret_arn": "arn:aws:secretsmanager:us-east-1:123456789012:secret:x",
    }
    return config.model_copy(update={"accounting": config.accounting.model_validate(acct)})


def keys(text: str) -> list[str]:
    """The key of every setting line (the first key of NodeName=/PartitionName= lines), `Include` for includes."""
    found = []
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            found.append(line.split()[0] if line.startswith("Include") else line.split("=", 1)[0])
    return found


def test_small_config_base_is_exact() -> None:
    text = render_base_conf(config_with(), "small", ONE)
    settings = [line for line in text.splitlines() if line and not line.startswith("#")]
    assert settings == [
        "ClusterName=small",
        "SlurmctldHost=ip-1-2-3-4(127.0.0.4)",
        "SlurmctldParameters=enable_configless,idle_on_node_suspend,power_save_interval=1",
        "StateSaveLocation=/var/spool/slurm-state/small/slurmctld",
        "SlurmUser=slurm",
        "SlurmdUser=root",
        "AuthType=auth/munge",
        "CredType=cred/munge",
        "SlurmdSpoolDir=/var/spool/slurmd",
        "SlurmctldPidFile=/run/slurmctld/slurmctld.pid",
        "SlurmdPidFile=/run/slurmd.pid",
        "SlurmctldLogFile=/var/log/slurm/slurmctld.log",
        "SlurmdLogFile=/var/log/slurm/slurmd.log",
        "SlurmctldDebug=info",
        "SlurmdDebug=info",
        "MailProg=/bin/true",
        "SrunPortRange=60001-63000",
        "ProctrackType=proctrack/cgroup",
        "TaskPlugin=task/cgroup,task/affinity",
        "SelectType=select/cons_tres",
        "SelectTypeParameters=CR_Core_Memory",
        "SchedulerType=sched/backfill",
        "MpiDefault=none",
        "JobAcctGatherType=jobacct_gather/cgroup",
        "AccountingStorageType=accounting_storage/none",
        "JobCompType=jobcomp/none",
        "HealthCheckProgram=/opt/elastic-slurm/bin/elastic-slurm-healthcheck",
        "HealthCheckInterval=120",
        "HealthCheckNodeState=ANY,CYCLE",
        "Include slurm-elastic.conf",
    ]
    assert text.splitlines()[-1] == "Include slurm-elastic.conf"  # relative: configless ships it to slurmd


def test_two_controllers_are_primary_then_backup_and_both_are_conf_servers() -> None:
    settings = BaseSettings(controller_hosts=("ip-a(127.0.0.10)", "ip-b(127.0.0.11)"))
    lines = render_base_conf(config_with(controllers=2), "small", settings).splitlines()
    assert [line for line in lines if line.startswith("SlurmctldHost=")] == [
        "SlurmctldHost=ip-a(127.0.0.10)",
        "SlurmctldHost=ip-b(127.0.0.11)",
    ]
    assert conf_server(settings) == "127.0.0.10,127.0.0.11"
    assert conf_server(BaseSettings(controller_hosts=("ctl",))) == "ctl"


def test_controller_host_count_must_match_the_config() -> None:
    with pytest.raises(RenderError, match=r"^--controller-hosts: cluster small has 2 controller\(s\), 1 host"):
        render_base_conf(config_with(controllers=2), "small", ONE)
    with pytest.raises(RenderError, match=r"^--controller-hosts: 'bad host' is not"):
        render_base_conf(config_with(), "small", BaseSettings(controller_hosts=("bad host",)))


def test_a_cluster_without_shared_storage_is_refused_before_render() -> None:
    # the users' files and the node-names directory live on the shared file system
    with pytest.raises(ConfigInvalid, match="needs a shared file system"):
        small_config(storage={}, controller={"count": 2})


def test_accounting_goes_through_slurmdbd_when_the_config_has_a_database() -> None:
    settings = BaseSettings(controller_hosts=ONE.controller_hosts, slurmdbd_host="127.0.0.20")
    lines = render_base_conf(config_with(accounting="existing"), "small", settings).splitlines()
    assert "AccountingStorageType=accounting_storage/slurmdbd" in lines
    assert "AccountingStorageHost=127.0.0.20" in lines
    assert "AccountingStorageEnforce=associations,limits,qos" in lines
    assert "JobAcctGatherFrequency=task=30" in lines
    assert "AccountingStorageType=accounting_storage/none" not in lines


def test_accounting_without_a_slurmdbd_host_names_the_option() -> None:
    with pytest.raises(RenderError, match=r"^--slurmdbd-host: needed because accounting\.mode is existing$"):
        render_base_conf(config_with(accounting="existing"), "small", ONE)


@pytest.mark.parametrize("accounting", ["none", "existing"])
def test_base_and_fragments_never_set_the_same_key(accounting: str) -> None:
    config = config_with(accounting=accounting)
    settings = BaseSettings(controller_hosts=ONE.controller_hosts, slurmdbd_host="127.0.0.20")
    base = keys(render_base_conf(config, "small", settings))
    options = RenderOptions(slurmctld_parameters_in_base=True)
    fragments = keys(
        render_cluster(config, "small", placeholder_infra(config.cluster("small")), fixture_cache(), options).slurm_conf
    )
    assert base.count("Include") == 1
    singles = [k for k in base if k not in ("SlurmctldHost", "Include")]
    assert len(singles) == len(set(singles)), "a key is repeated in the base"
    assert not set(base) & set(fragments)


def test_the_fragment_keeps_its_slurmctld_parameters_without_a_base() -> None:
    config = config_with()
    infra = placeholder_infra(config.cluster("small"))
    assert "SlurmctldParameters" in keys(render_cluster(config, "small", infra, fixture_cache()).slurm_conf)


def test_cgroup_conf_constrains_cores_and_memory() -> None:
    lines = render_cgroup_conf().splitlines()
    assert "ConstrainCores=yes" in lines
    assert "ConstrainRAMSpace=yes" in lines


def _cli_inputs(tmp_path: Path) -> tuple[str, str]:
    cache = tmp_path / "cache.json"
    write_cache(fixture_cache(), cache)
    return str(ROOT / "cluster_config" / "examples" / "minimal.yaml"), str(cache)


def test_render_with_controller_hosts_writes_the_base_beside_the_fragment(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config, cache = _cli_inputs(tmp_path)
    out = tmp_path / "out"
    hosts = ["--controller-hosts", "ip-a(127.0.0.10)", "--slurmdbd-host", "127.0.0.10"]
    assert main(["render", config, "--cache", cache, "--out", str(out), *hosts]) == 0
    assert "slurm.conf + cgroup.conf" in capsys.readouterr().out
    base = (out / "slurm.conf").read_text()
    assert base.splitlines()[-1] == "Include slurm-elastic.conf"
    assert (out / "slurm-elastic.conf").exists()  # beside slurm.conf, where the relative Include finds it
    assert "SlurmctldParameters" not in (out / "slurm-elastic.conf").read_text()
    assert (out / "cgroup.conf").read_text() == render_cgroup_conf()
    assert (out / "conf-server").read_text() == "127.0.0.10\n"


def test_render_without_controller_hosts_writes_no_base(tmp_path: Path) -> None:
    config, cache = _cli_inputs(tmp_path)
    assert main(["render", config, "--cache", cache, "--out", str(tmp_path / "out")]) == 0
    assert not (tmp_path / "out" / "slurm.conf").exists()
    assert (
        "SlurmctldParameters=idle_on_node_suspend,power_save_interval=1"
        in (tmp_path / "out" / "slurm-elastic.conf").read_text()
    )


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--controller-hosts", "a,b"], "--controller-hosts: cluster minimal has 1 controller(s), 2 host(s) given"),
        (["--slurmdbd-host", "db"], "--slurmdbd-host/--fragments-path: only used with --controller-hosts"),
    ],
)
def test_bad_base_options_are_one_line(
    extra: list[str], message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config, cache = _cli_inputs(tmp_path)
    assert main(["render", config, "--cache", cache, "--out", str(tmp_path / "out"), *extra]) == 2
    assert capsys.readouterr().err.splitlines() == [f"elastic-slurm render: {message}"]
    assert not (tmp_path / "out" / "slurm.conf").exists()


def test_compute_boot_exports_the_conf_server_before_the_bootstrap() -> None:
    script = "\n".join(user_data.boot_commands("compute", {"ES_CLUSTER": "c1"}))
    assert 'ELASTIC_SLURM_CONF_SERVER=$(aws ssm get-parameter --name "$ES_CONF_SERVER_PARAMETER"' in script
    assert script.index("ELASTIC_SLURM_CONF_SERVER") < script.index("exec /opt/elastic-slurm/bin/elastic-slurm-node")
