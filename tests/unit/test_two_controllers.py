"""Two controllers: where the plugin's state lives (one copy both controllers lock, slurm_plugin/powersave/state.py),
and what the local cloud's render overrides add for them (localcloud/conf.py)."""

from __future__ import annotations

import multiprocessing
import time
from pathlib import Path

import pytest

from cluster_config import load
from localcloud.conf import FAILOVER_TIMERS, Ports, render_overrides
from localcloud.layout import Layout
from slurm_plugin.powersave import state
from slurm_plugin.render.base import BaseSettings, render_base_conf
from slurm_plugin.render.cluster import render_cluster
from slurm_plugin.render.manifest import placeholder_infra
from slurm_plugin.render.overrides import apply
from tests.unit.cache_fixture import fixture_cache

E2E_CONFIGS = Path(__file__).resolve().parents[1] / "e2e" / "configs"


def test_one_controller_keeps_the_plugin_state_on_its_disk() -> None:
    assert state.plugin_state_dir("c", 1) == state.LOCAL_STATE_DIR == "/var/lib/elastic-slurm"


def test_two_controllers_keep_the_plugin_state_on_their_own_file_system() -> None:
    assert state.plugin_state_dir("c", 2) == "/var/spool/slurm-state/c/plugin"


def _bind(directory: str, node: str, instance: str, hold: float) -> None:
    """A resume worker of one controller: bind `node` under the plugin lock, holding it for `hold` seconds."""
    with state.locked(directory):
        time.sleep(hold)
    state.remember_instances(directory, {node: {"instance_id": instance, "region": "us-east-1", "bound_at": "1"}})


def test_the_backup_reads_the_node_map_the_primary_wrote_and_the_primary_the_backups(tmp_path: Path) -> None:
    shared = str(tmp_path / "slurm-state" / "c" / "plugin")
    primary = multiprocessing.Process(target=_bind, args=(shared, "cpu-1", "i-aaa", 0.3))
    backup = multiprocessing.Process(target=_bind, args=(shared, "cpu-2", "i-bbb", 0.0))
    primary.start()
    time.sleep(0.1)
    backup.start()  # waits for the primary's lock: one map, no write lost
    primary.join(10)
    backup.join(10)
    assert state.node_map(shared) == {
        "cpu-1": {"instance_id": "i-aaa", "region": "us-east-1", "bound_at": "1"},
        "cpu-2": {"instance_id": "i-bbb", "region": "us-east-1", "bound_at": "1"},
    }
    # after a failback the primary forgets what the backup ended: no stale entry survives on either side
    state.forget_instances(shared, ["cpu-2"])
    assert list(state.node_map(shared)) == ["cpu-1"]


def test_two_controller_overrides_add_the_failover_timers_and_the_shared_state_dir(tmp_path: Path) -> None:
    layout = Layout(tmp_path)
    ports = Ports(1, 2, 3, 4, 5, 6)
    one = render_overrides(layout, ports)
    two = render_overrides(layout, ports, state_dir="/var/spool/slurm-state/fo/plugin", controllers=2)
    assert one["options"]["state_dir"] == str(layout.plugin_state)
    assert two["options"]["state_dir"] == "/var/spool/slurm-state/fo/plugin"
    config = load(E2E_CONFIGS / "failover.yaml")
    plain = BaseSettings(
        controller_hosts=("ip-127-16-0-4(127.16.0.4)", "ip-127-16-16-4(127.16.16.4)"), slurmdbd_host="127.16.0.4"
    )
    lines = render_base_conf(config, "fo", apply(plain, two["base"], "base")).splitlines()
    assert {"SlurmctldTimeout=10", "CommunicationParameters=NoCtldInAddrAny"} <= set(lines)
    assert [line for line in lines if line.startswith("SlurmctldHost=")] == [
        "SlurmctldHost=ip-127-16-0-4(127.16.0.4)",
        "SlurmctldHost=ip-127-16-16-4(127.16.16.4)",
    ]
    single = render_base_conf(config, "fo", apply(plain, one["base"], "base")).splitlines()
    assert not {f"{key}={value}" for key, value in FAILOVER_TIMERS} & set(single)


def test_local_down_knows_every_unit_of_the_backup_controller() -> None:
    from localcloud.cloud import BACKUP_DAEMONS, UNIT_PID_FILES

    assert {name for name, _ in BACKUP_DAEMONS} == {f"{unit}@1" for unit in UNIT_PID_FILES}


def test_the_production_render_puts_two_controllers_plugin_state_on_their_own_file_system() -> None:
    """What the controllers' manifest says (render_cluster with the production options, no local overrides): the
    backup's plugin reads the primary's node map, claims, cool-downs and fleet state."""
    config = load(Path(__file__).resolve().parents[1] / "e2e" / "configs" / "failover.yaml")
    cluster = config.clusters[0]
    rendered = render_cluster(config, cluster.name, placeholder_infra(cluster), fixture_cache())
    assert rendered.manifest.state_dir == f"/var/spool/slurm-state/{cluster.name}/plugin"
    one = config.model_copy(
        update={
            "clusters": [cluster.model_copy(update={"controller": cluster.controller.model_copy(update={"count": 1})})]
        }
    )
    assert render_cluster(one, cluster.name, placeholder_infra(cluster), fixture_cache()).manifest.state_dir == (
        state.LOCAL_STATE_DIR
    )


def test_a_claim_of_the_other_controller_counts_as_alive_until_it_is_old(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The other host's worker cannot be looked up in this host's /proc: its claim holds for FOREIGN_CLAIM_SECONDS
    (it may still be launching), so the backup never launches the same node twice."""
    monkeypatch.setattr(state.socket, "gethostname", lambda: "controller-0")
    mine, busy = state.claim(tmp_path, ["cpu-1"], "r-primary")
    assert (mine, busy) == (["cpu-1"], [])
    monkeypatch.setattr(state.socket, "gethostname", lambda: "controller-1")
    assert state.claim(tmp_path, ["cpu-1"], "r-backup") == ([], ["cpu-1"])
    held = state.read_json(tmp_path / state.CLAIMS_FILE)["cpu-1"]
    assert state.holder_alive(held, now=held["at"] + state.FOREIGN_CLAIM_SECONDS + 1) is False
