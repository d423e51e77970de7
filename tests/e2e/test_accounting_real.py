"""The sacctmgr adapter and the license sync against a real slurmdbd (own MariaDB, munged, slurmdbd, slurmctld).

One module-scoped set of daemons (the local cloud's start functions, our own tmp state dir and free ports). The
slurmctld of cluster `alpha` has a single FUTURE node: it is there so that `scontrol show licenses` shows what
slurmctld really got from slurmdbd. Cluster `beta` exists only in the database.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from cluster_config import ElasticSlurmConfig, parse
from localcloud import conf
from localcloud.aws.emulated_aws import free_port
from localcloud.image import slurm_root
from localcloud.instances import enter, machines
from localcloud.layout import Layout
from localcloud.services import daemons, procs
from slurm_plugin.accounting.diff import desired_state
from slurm_plugin.accounting.sacctmgr import SacctmgrCli, apply, plan, read_state
from tests.e2e.conftest import missing_prereqs
from tests.e2e.license_helpers import LMSTAT_FIXTURES, fake_lmutil, run_license_sync

pytestmark = pytest.mark.e2e

REPO = Path(__file__).resolve().parent.parent.parent
DAEMONS = (("slurmctld", "slurmctld"), ("slurmdbd", "slurmdbd"), ("mariadbd", "mariadbd"), ("munged", "munged"))


@dataclass(frozen=True)
class Dbd:
    """The running daemons: environment for Slurm clients and the state dir."""

    layout: Layout
    env: dict[str, str]
    view: enter.View

    def sacctmgr(self) -> SacctmgrCli:
        return SacctmgrCli(env=self.env)

    def show(self, *args: str) -> list[str]:
        out = subprocess.run(
            ["sacctmgr", "-P", "-n", "show", *args],
            env=self.env,
            capture_output=True,
            text=True,
            timeout=30,
            check=True,
        ).stdout
        return [line for line in out.splitlines() if line.strip()]

    def licenses_in_slurmctld(self, field: str = "Total") -> dict[str, str]:
        """License name -> `field` (Total, LastConsumed, ...) as slurmctld has it."""
        out = subprocess.run(
            ["scontrol", "show", "licenses", "-o"], env=self.env, capture_output=True, text=True, timeout=30, check=True
        ).stdout
        found = {}
        for line in out.splitlines():
            fields = dict(item.split("=", 1) for item in line.split() if "=" in item)
            found[fields["LicenseName"]] = fields.get(field, "")
        return found


def _slurm_conf(layout: Layout, ctld_port: int, dbd_port: int) -> str:
    return "\n".join(
        [
            "ClusterName=alpha",
            f"SlurmctldHost={socket.gethostname()}(127.0.0.1)",
            f"SlurmctldPort={ctld_port}",
            "SlurmUser=slurm",
            "AuthType=auth/munge",  # munged's socket: /run/munge on the controller view, as on EC2
            "AccountingStorageType=accounting_storage/slurmdbd",
            "AccountingStorageHost=127.0.0.1",
            f"AccountingStoragePort={dbd_port}",
            f"StateSaveLocation={layout.state / 'slurmctld'}",
            f"SlurmctldPidFile={layout.slurm_run / 'slurmctld.pid'}",
            f"SlurmctldLogFile={layout.log_file('slurmctld')}",
            "ProctrackType=proctrack/linuxproc",
            "TaskPlugin=task/none",
            "JobAcctGatherType=jobacct_gather/none",
            "MpiDefault=none",
            "MailProg=/bin/true",
            "NodeName=ghost1 CPUs=1 State=FUTURE",
            "PartitionName=debug Nodes=ghost1 Default=YES",
            "",
        ]
    )


@pytest.fixture(scope="module")
def dbd() -> Iterator[Dbd]:
    reason = missing_prereqs()
    if reason:
        pytest.skip(f"accounting e2e: {reason}")
    # munged wants every directory above its socket traversable by all: pytest's tmp dirs are 0700.
    root = Path(tempfile.mkdtemp(prefix="elastic-slurm-acct-"))
    root.chmod(0o755)
    layout = Layout(root)
    layout.create()
    view = machines.controller_view(layout, slurm_root.root_path(), "/shared")
    machines.write_client_wrappers(layout, view)
    slurm = enter.user(view.root, "slurm")
    for path in (layout.state / "slurmctld", layout.slurm_run, layout.log):
        path.mkdir(exist_ok=True)
        os.chown(path, slurm.uid, slurm.gid)
    ports = conf.Ports(aws=0, mysql=free_port(), slurmctld=free_port(), slurmdbd=free_port(), slurmd_base=0, sackd=0)
    layout.my_cnf.write_text(conf.my_cnf(layout, ports))
    layout.slurmdbd_conf.write_text(conf.slurmdbd_conf(layout, ports, "acct-test"))
    os.chmod(layout.slurmdbd_conf, 0o600)
    layout.slurm_conf.write_text(_slurm_conf(layout, ports.slurmctld, ports.slurmdbd))
    try:
        daemons.start_munged(layout, view)
        daemons.start_mariadb(layout, "acct-test")
        daemons.start_slurmdbd(layout, view, "alpha")
        daemons.start_slurmctld(layout, view)
        yield Dbd(layout=layout, env=daemons.slurm_env(layout), view=view)
    finally:
        for name, marker in DAEMONS:
            procs.stop_pid_file(layout.pid_file(name), marker)
        shutil.rmtree(root, ignore_errors=True)


def _cluster(name: str, second_octet: int) -> dict[str, Any]:
    # federation members are peered: their VPCs must not overlap
    return {
        "name": name,
        "region": "us-east-1",
        "storage": {"efs": {}},
        "network": {"mode": "create", "vpc_cidr": f"127.{second_octet}.0.0/16", "availability_zones": ["us-east-1a"]},
        "partitions": [{"name": "p", "pools": [{"name": "c", "instance_types": ["c7i.large"], "max_nodes": 1}]}],
    }


def make_config(**changes: Any) -> ElasticSlurmConfig:
    data: dict[str, Any] = {
        "clusters": [_cluster("alpha", 16), _cluster("beta", 17)],
        "accounting": {"mode": "create"},
        "licenses": [
            {
                "name": "vcs",
                "count": 50,
                "server_type": "flexlm",
                "server": "27020@flexsrv1",
                "feature": "VCSRuntime_Net",
                "sync_schedule": "*:0/5",
                "clusters": {"alpha": 100},
            },
            {
                "name": "xcelium",
                "count": 20,
                "server_type": "rlm",
                "server": "5053@licsrv2",
                "clusters": {"alpha": 60, "beta": 40},
            },
            {"name": "matlab", "count": 8},
        ],
        "federation": {
            "name": "eda",
            "clusters": ["alpha", "beta"],
            "cluster_features": {"alpha": ["onprem", "x86"], "beta": ["aws"]},
        },
        "accounts": [
            {"name": "chip", "description": "Chip Design", "users": ["alice", "bob"]},
            {"name": "ml", "users": ["bob"]},
        ],
        "qos": [{"name": "interactive", "priority": 100, "preempt": ["normal"], "preempt_mode": "requeue"}],
    }
    data.update(changes)
    return parse(data)


@pytest.fixture(scope="module")
def applied(dbd: Dbd) -> ElasticSlurmConfig:
    """The full config applied once (the first apply must change things)."""
    config = make_config()
    assert apply(dbd.sacctmgr(), desired_state(config))
    return config


def test_second_apply_changes_nothing(dbd: Dbd, applied: ElasticSlurmConfig) -> None:
    before = dbd.show("resource", "withclusters", "format=name,server,count,cluster,allowed")
    _, changes = plan(dbd.sacctmgr(), desired_state(applied))
    assert changes == []
    assert apply(dbd.sacctmgr(), desired_state(applied)) == []
    assert dbd.show("resource", "withclusters", "format=name,server,count,cluster,allowed") == before


def test_licenses_show_up_as_remote_licenses_with_their_shares(dbd: Dbd, applied: ElasticSlurmConfig) -> None:
    rows = set(dbd.show("resource", "withclusters", "format=name,server,servertype,count,cluster,allowed"))
    # `allowed` is each cluster's percentage of the count (slurmctld gets count * allowed / 100)
    assert "vcs|flexsrv1|flexlm|50|alpha|100" in rows
    assert {"xcelium|licsrv2|rlm|20|alpha|60", "xcelium|licsrv2|rlm|20|beta|40"} <= rows
    assert {"matlab|slurmdb||8|alpha|50", "matlab|slurmdb||8|beta|50"} <= rows


def test_slurmctld_sees_its_share_of_each_remote_license(dbd: Dbd, applied: ElasticSlurmConfig) -> None:
    seen = procs.wait_until(lambda: dbd.licenses_in_slurmctld().get("xcelium@licsrv2") == "12", 20)
    assert seen, dbd.licenses_in_slurmctld()
    assert dbd.licenses_in_slurmctld()["matlab@slurmdb"] == "4"


def test_federation_is_created_with_both_clusters_and_their_features(dbd: Dbd, applied: ElasticSlurmConfig) -> None:
    rows = {line.rstrip("|") for line in dbd.show("federation", "format=federation,cluster,features")}
    assert rows == {"eda|alpha|onprem,x86", "eda|beta|aws"}


def test_running_slurmctld_joins_the_federation_with_its_features(dbd: Dbd, applied: ElasticSlurmConfig) -> None:
    def federation() -> str:
        return subprocess.run(
            ["scontrol", "show", "federation"], env=dbd.env, capture_output=True, text=True, timeout=30
        ).stdout

    assert procs.wait_until(lambda: "Federation: eda" in federation(), 20)
    text = federation()
    assert "Self:" in text and "alpha:" in text and "Features:onprem,x86" in text
    assert "Sibling:" in text and "beta:" in text


def test_accounts_users_and_qos_are_created(dbd: Dbd, applied: ElasticSlurmConfig) -> None:
    assocs = set(dbd.show("association", "format=cluster,account,user"))
    assert {"alpha|chip|alice", "beta|chip|bob", "beta|ml|bob"} <= assocs
    assert "interactive|100|normal|requeue" in dbd.show("qos", "format=name,priority,preempt,preemptmode")


def test_config_changes_are_applied_once_then_stable(dbd: Dbd, applied: ElasticSlurmConfig) -> None:
    data = applied.model_dump(mode="json")
    data["licenses"][1]["clusters"] = {"alpha": 30, "beta": 70}  # shares swap: shrink before grow
    data["licenses"][2]["count"] = 12
    data["federation"]["cluster_features"] = {"alpha": ["onprem"]}
    data["qos"][0]["preempt"] = []
    data["accounts"][0]["description"] = "Chip design and verification"
    changed = parse(data)
    assert apply(dbd.sacctmgr(), desired_state(changed))
    assert plan(dbd.sacctmgr(), desired_state(changed))[1] == []
    rows = set(dbd.show("resource", "withclusters", "format=name,count,cluster,allowed"))
    assert {"xcelium|20|alpha|30", "xcelium|20|beta|70", "matlab|12|alpha|50"} <= rows
    # and back: the module's other tests see the original state again
    apply(dbd.sacctmgr(), desired_state(applied))
    assert plan(dbd.sacctmgr(), desired_state(applied))[1] == []


def test_license_removed_from_the_config_is_deleted(dbd: Dbd, applied: ElasticSlurmConfig) -> None:
    data = applied.model_dump(mode="json")
    data["licenses"] = [lic for lic in data["licenses"] if lic["name"] != "matlab"]
    apply(dbd.sacctmgr(), desired_state(parse(data)))
    assert not [row for row in dbd.show("resource", "format=name") if row == "matlab"]
    apply(dbd.sacctmgr(), desired_state(applied))
    assert "matlab" in dbd.show("resource", "format=name")


def _fake_lmutil(dbd: Dbd, fixture: str, exit_code: int) -> dict[str, str]:
    """PATH with an `lmutil` that prints a fixture (like a real one: output on stdout, exit code as given)."""
    return fake_lmutil(dbd.layout.bin, LMSTAT_FIXTURES / fixture, exit_code, dbd.env)


def _sync(dbd: Dbd, config: ElasticSlurmConfig, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return run_license_sync(config, "alpha", dbd.layout, env, dbd.view, by_manifest=False)  # no manifest here


def _count(dbd: Dbd, name: str) -> int:
    return int(next(row.split("|")[1] for row in dbd.show("resource", "format=name,count") if row.startswith(name)))


def _consumed(dbd: Dbd, name: str) -> int:
    rows = dbd.show("resource", "format=name,lastconsumed")
    return int(next(row.split("|")[1] for row in rows if row.startswith(name)) or 0)


def test_sync_sets_count_from_the_license_server_then_server_down_keeps_it(
    dbd: Dbd, applied: ElasticSlurmConfig
) -> None:
    state_file = dbd.layout.plugin_state / "license-sync" / "license-sync.json"
    up = _sync(dbd, applied, _fake_lmutil(dbd, "v11_16_eda.txt", 0))
    assert up.returncode == 0, up.stderr
    # Slurm 23.02+: count = issued, LastConsumed = used outside Slurm (slurmctld subtracts it itself)
    assert (_count(dbd, "vcs"), _consumed(dbd, "vcs")) == (50, 12)
    assert procs.wait_until(lambda: dbd.licenses_in_slurmctld("LastConsumed").get("vcs@flexsrv1") == "12", 20)
    # the rlm server of xcelium has no rlmutil here: logged and counted, not fatal
    assert "5053@licsrv2" in json.loads(state_file.read_text())["servers"]

    down = _sync(dbd, applied, _fake_lmutil(dbd, "server_down.txt", 1))
    assert down.returncode == 0, down.stderr
    assert "Cannot connect to license server" in down.stderr
    assert (_count(dbd, "vcs"), _consumed(dbd, "vcs")) == (50, 12)  # the last good values stay
    health = json.loads(state_file.read_text())["servers"]["27020@flexsrv1"]
    assert health["consecutive_failures"] == 1
    assert json.loads(state_file.read_text())["licenses"]["vcs@flexsrv1"]["count"] == 50

    garbage = _sync(dbd, applied, _fake_lmutil(dbd, "garbage.txt", 0))
    assert garbage.returncode == 0
    assert (_count(dbd, "vcs"), _consumed(dbd, "vcs")) == (50, 12)


def test_config_apply_does_not_reset_a_synced_count(dbd: Dbd, applied: ElasticSlurmConfig) -> None:
    dbd.sacctmgr().run(["modify", "resource", "where", "name=vcs", "server=flexsrv1", "set", "count=41"])
    assert plan(dbd.sacctmgr(), desired_state(applied))[1] == []
    assert read_state(dbd.sacctmgr()).resources["vcs@flexsrv1"].count == 41


def test_sync_with_a_missing_config_file_is_a_one_line_error(dbd: Dbd) -> None:
    argv = [
        sys.executable,
        "-m",
        "slurm_plugin.licenses.cli",
        "--config",
        "/nonexistent.json",
        "--state-dir",
        str(dbd.layout.state / "x"),
    ]
    result = subprocess.run(argv, env={**dbd.env, "PYTHONPATH": str(REPO)}, capture_output=True, text=True, timeout=60)
    assert result.returncode == 2
    assert result.stderr.strip().count("\n") == 0
    assert "--config /nonexistent.json: cannot read" in result.stderr
    assert shutil.which("sacctmgr", path=dbd.env["PATH"])


def test_apply_cli_reports_up_to_date_and_rejects_a_bad_desired_file(dbd: Dbd, applied: ElasticSlurmConfig) -> None:
    desired = dbd.layout.etc / "accounting.json"
    desired.write_text(desired_state(applied).model_dump_json())
    env = {**dbd.env, "PYTHONPATH": str(REPO)}
    argv = [sys.executable, "-m", "slurm_plugin.accounting.sacctmgr", "--desired"]
    ok = subprocess.run([*argv, str(desired)], env=env, capture_output=True, text=True, timeout=60)
    assert ok.returncode == 0, ok.stderr
    assert "accounting is up to date" in ok.stderr
    (dbd.layout.etc / "bad.json").write_text('{"clusters": 5}')
    bad = subprocess.run([*argv, str(dbd.layout.etc / "bad.json")], env=env, capture_output=True, text=True, timeout=60)
    assert bad.returncode == 1
    assert bad.stderr.strip().count("\n") == 0
    assert "bad.json: clusters" in bad.stderr


def test_new_cluster_in_the_config_gets_registered_with_accounts_and_users(
    dbd: Dbd, applied: ElasticSlurmConfig
) -> None:
    data = applied.model_dump(mode="json")
    data["clusters"].append(_cluster("gamma", 18))
    data["federation"]["clusters"].append("gamma")  # clusters sharing slurmdbd share its munge key: members
    grown = parse(data)
    apply(dbd.sacctmgr(), desired_state(grown))
    assert plan(dbd.sacctmgr(), desired_state(grown))[1] == []
    assert "gamma" in dbd.show("cluster", "format=cluster")
    assert {"gamma|chip|", "gamma|chip|alice", "gamma|ml|bob"} <= set(
        dbd.show("association", "format=cluster,account,user")
    )
    assert "matlab|gamma|33" in dbd.show("resource", "withclusters", "format=name,cluster,allowed")
