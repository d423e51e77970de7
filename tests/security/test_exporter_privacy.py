"""The metrics exporter's series by user and account (who runs what, how much) are off where the stacks deploy it, and
on only when asked (issue 30 #6: anyone reaching the exporter read them).

The controller's env file from the stacks sets ES_EXPORTER_PER_USER_SERIES=0 (stacks/cluster.py), which the
exporter's command line reads (slurm_plugin/exporter/main.py); a scrape of the real collector over the fake Slurm of
tests/unit/test_exporter.py then holds no `user` or `account` label, while the cluster-wide series stay. Who may
scrape at all is the network contract's (tests/contracts/test_network_flows.py: the monitoring group only).
"""

from __future__ import annotations

from pathlib import Path

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from slurm_plugin.exporter.collector import ClusterCollector
from slurm_plugin.exporter.main import PER_USER_ENV, build_parser, per_user_series
from slurm_plugin.exporter.plugin_source import PluginReader
from tests.cdk.conftest import Assembly
from tests.contracts.test_aws_call_permissions import role_uses
from tests.unit.test_exporter import CountingSlurm, _manifest

PER_USER = {"slurm_user_jobs", "slurm_account_jobs", "slurm_rpc_user_calls_total"}


def _series(per_user: bool, tmp_path: Path) -> dict[str, set[str]]:
    """Sample name -> its label names, of one scrape."""
    manifest = _manifest(tmp_path, max_nodes=10)
    collector = ClusterCollector(manifest, CountingSlurm(10), PluginReader(manifest, tmp_path), True, per_user)
    registry = CollectorRegistry(auto_describe=False)
    registry.register(collector)
    found: dict[str, set[str]] = {}
    for family in text_string_to_metric_families(generate_latest(registry).decode()):
        for sample in family.samples:
            found.setdefault(sample.name, set()).update(sample.labels)
    return found


def test_without_per_user_series_no_sample_names_a_user_or_account(tmp_path: Path) -> None:
    off, on = _series(False, tmp_path / "off"), _series(True, tmp_path / "on")
    assert set(on) >= PER_USER  # the control: the fake Slurm has users' jobs and RPCs
    assert not PER_USER & set(off)
    assert not any({"user", "account"} & labels for labels in off.values())
    assert {"slurm_jobs", "slurm_nodes", "slurm_rpc_calls_total"} <= set(off)  # cluster-wide series stay


def test_the_env_files_zero_turns_them_off_and_the_flag_wins() -> None:
    parse = build_parser().parse_args
    base = ["--manifest", "m.json"]
    assert per_user_series(parse(base), {PER_USER_ENV: "0"}) is False
    assert per_user_series(parse(base), {}) is True  # unset: the local cloud, whose dashboards show them
    assert per_user_series(parse([*base, "--per-user-series", "on"]), {PER_USER_ENV: "0"}) is True
    assert per_user_series(parse([*base, "--per-user-series", "off"]), {PER_USER_ENV: "1"}) is False


def test_the_stacks_deploy_the_controllers_without_per_user_series(assemblies: dict[str, Assembly]) -> None:
    """Every controller of every synthesized config, from its resolved user data's env file."""
    controllers = [u for a in assemblies.values() for u in role_uses(a) if u.kind == "controller"]
    assert controllers
    assert {u.env[PER_USER_ENV] for u in controllers} == {"0"}
