"""The metrics exporter without a cluster: Slurm output parsers, the event log folded into counters, and whole scrapes
over a fake Slurm whose calls are counted (one per source per scrape, whatever the cluster's size)."""

from __future__ import annotations

import os
import re
import time
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from slurm_plugin.controller_hosts import Facts
from slurm_plugin.exporter import cloudwatch
from slurm_plugin.exporter.collector import ClusterCollector, Snapshot
from slurm_plugin.exporter.main import cloudwatch_values
from slurm_plugin.exporter.plugin_source import EventTotals, PluginReader
from slurm_plugin.exporter.slurm_source import (
    SlurmReader,
    SourceError,
    node_state,
    parse_jobs,
    parse_licenses,
    parse_nodes,
    parse_sdiag,
)
from slurm_plugin.manifest import Location, Manifest, PoolManifest
from slurm_plugin.powersave import capacity
from slurm_plugin.telemetry import events

SDIAG = """\
*******************************************************
sdiag output at Thu Nov 26 00:09:09 2026 (1795651749)
*******************************************************
Server thread count:  3
Agent queue size:     2
DBD Agent queue size: 7

Jobs submitted: 12
Jobs started:   10
Jobs completed: 8
Jobs canceled:  0
Jobs failed:    1

Main schedule statistics (microseconds):
\tLast cycle:   1500
\tMax cycle:    250000
\tTotal cycles: 40
\tMean cycle:   2000
\tLast queue length: 4

Backfilling stats
\tTotal cycles: 3
\tLast cycle: 3000000
\tMax cycle:  4000000
\tMean cycle: 3500000
\tLast queue length: 9

Remote Procedure Call statistics by message type
\tREQUEST_PARTITION_INFO                  ( 2009) count:4      ave_time:120    total_time:481
\tREQUEST_NODE_INFO                       ( 2007) count:1      ave_time:148    total_time:2000000

Remote Procedure Call statistics by user
\troot            (       0) count:50     ave_time:10    total_time:500
\tslurm           (   64030) count:3      ave_time:176    total_time:529

Pending RPC statistics
\tNo pending RPCs
"""


@pytest.mark.parametrize(
    ("raw", "state"),
    [
        ("idle~", "powered_down"),
        ("idle#", "powering_up"),
        ("allocated#", "powering_up"),
        ("idle%", "powering_down"),
        ("down~", "down"),
        ("drained~", "down"),
        ("mixed", "mixed"),
        ("allocated", "allocated"),
        ("idle*", "idle"),
        ("draining", "draining"),
        ("drained", "drained"),
        ("completing", "completing"),
        ("future", "other"),
    ],
)
def test_sinfo_states_map_to_the_exporters_states(raw: str, state: str) -> None:
    assert node_state(raw) == state


def test_node_rows_drop_the_default_partition_mark() -> None:
    rows = parse_nodes("cpu-big-1|cpu*|idle~\ncpu-big-1|all|idle~\ngarbage\n")
    assert [(r.name, r.partition, r.state) for r in rows] == [
        ("cpu-big-1", "cpu", "powered_down"),
        ("cpu-big-1", "all", "powered_down"),
    ]


def test_jobs_keep_the_pending_reason_only_for_pending_jobs_and_epoch_times() -> None:
    rows = parse_jobs(
        "7|cpu|PENDING|ReqNodeNotAvail, UnavailableNodes:cpu-small-[1-3]|alice|eda|1000|0\n"
        "8_1|cpu|RUNNING|None|bob|ml|1000|1042\n"
    )
    assert [(r.job_id, r.state, r.reason, r.user, r.account) for r in rows] == [
        ("7", "pending", "ReqNodeNotAvail", "alice", "eda"),
        ("8_1", "running", "", "bob", "ml"),
    ]
    assert (rows[0].started, rows[1].started, rows[1].submitted) == (None, 1042.0, 1000.0)


def test_sdiag_is_read_in_seconds_with_rpcs_by_type_and_user() -> None:
    sdiag = parse_sdiag(SDIAG)
    assert sdiag.totals == {
        "server_threads": 3, "agent_queue_size": 2, "dbd_agent_queue_size": 7, "jobs_submitted": 12,
        "jobs_started": 10, "jobs_completed": 8, "jobs_failed": 1,
    }  # fmt: skip
    assert sdiag.cycles[("main", "last")] == pytest.approx(0.0015)
    assert sdiag.cycles[("main", "max")] == pytest.approx(0.25)
    assert sdiag.cycles[("backfill", "mean")] == pytest.approx(3.5)
    assert sdiag.queue_length == 4
    assert sdiag.rpc_count == {"REQUEST_PARTITION_INFO": 4, "REQUEST_NODE_INFO": 1}
    assert sdiag.rpc_seconds["REQUEST_NODE_INFO"] == pytest.approx(2.0)
    assert sdiag.rpc_user_count == {"root": 50, "slurm": 3}


def test_licenses_are_read_and_none_configured_is_no_row() -> None:
    text = "LicenseName=vcs@flex Total=50 Used=30 Free=20 Reserved=0 Remote=yes\n"
    assert [(r.name, r.total, r.used) for r in parse_licenses(text)] == [("vcs@flex", 50.0, 30.0)]
    assert parse_licenses("No licenses configured in Slurm.\n") == []


def test_event_log_folds_into_counters_live_instances_and_latency() -> None:
    totals = EventTotals()
    where = {"pool": "cpu-small", "region": "us-east-1", "market": "spot"}
    totals.fold(
        [
            {"event": "launch_call", **where, "azs": {"us-east-1b": 2}, "t": 1},
            {"event": "capacity_error", **where, "az": "us-east-1a", "code": "InsufficientInstanceCapacity", "t": 1},
            {"event": "capacity_error", **where, "az": "us-east-1a", "code": "InsufficientInstanceCapacity", "t": 2},
            {"event": "node_launched", **where, "az": "us-east-1b", "node": "cpu-small-1", "instance_id": "i-1",
             "seconds": 3.0, "t": 3},
            {"event": "node_launched", **where, "az": "us-east-1b", "node": "cpu-small-2", "instance_id": "i-2",
             "seconds": 45.0, "t": 3},
            {"event": "terminated", "pool": "cpu-small", "region": "us-east-1", "instance_id": "i-1",
             "reason": "suspend", "t": 9},
            {"event": "throttled", "api": "CreateFleet", "region": "us-east-1", "t": 9},
            {"event": "boot_failed", "pool": "cpu-small", "node": "cpu-small-3", "t": 9},
        ]
    )  # fmt: skip
    assert totals.launched == {("cpu-small", "us-east-1b", "us-east-1", "spot"): 2}
    assert totals.capacity_errors == {("cpu-small", "us-east-1a", "InsufficientInstanceCapacity"): 2}
    assert totals.live_instances() == {("cpu-small", "us-east-1b", "us-east-1", "spot"): 1}
    assert totals.terminated == {("cpu-small", "us-east-1b", "us-east-1", "spot", "suspend"): 1}
    assert totals.throttled == {("CreateFleet", "us-east-1"): 1}
    assert totals.boot_failures == {("cpu-small",): 1}
    buckets = totals.launch_seconds.buckets[("cpu-small",)]
    bounds = totals.launch_seconds.bounds
    assert buckets[bounds.index(5.0)] == 1 and buckets[bounds.index(60.0)] == 2 and buckets[-1] == 2


def test_a_nodes_new_instance_replaces_one_that_ended_without_a_record() -> None:
    totals = EventTotals()
    where = {"pool": "cpu-small", "region": "us-east-1", "market": "spot", "az": "us-east-1a", "node": "cpu-small-1"}
    totals.fold([
        {"event": "node_launched", **where, "instance_id": "i-1", "t": 1},  # then spot-interrupted: no record
        {"event": "node_launched", **where, "instance_id": "i-2", "t": 9},
    ])  # fmt: skip
    assert totals.live == {"i-2": ("cpu-small", "us-east-1a", "us-east-1", "spot")}


def test_a_torn_write_does_not_swallow_the_next_record(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    real_write = os.write
    calls = []

    def flaky(fd: int, data: bytes) -> int:
        calls.append(len(data))
        if len(calls) == 1:
            return real_write(fd, data[:10])  # a short write ...
        if len(calls) == 2:
            raise OSError(28, "No space left on device")  # ... then the disk is full
        return real_write(fd, data)

    monkeypatch.setattr(os, "write", flaky)
    events.record(tmp_path, [{"event": "boot_failed", "pool": "p", "node": "n1"}])
    events.record(tmp_path, [{"event": "boot_failed", "pool": "p", "node": "n2"}])
    monkeypatch.undo()
    assert [e["node"] for e in events.read_all(tmp_path)] == ["n2"]  # n1 torn and skipped, n2 whole


class CountingSlurm(SlurmReader):
    """Canned Slurm client output; counts the calls."""

    def __init__(self, nodes: int, down: set[str] = frozenset()) -> None:  # type: ignore[assignment]
        super().__init__("/nonexistent")
        self.calls: list[str] = []
        self.node_count = nodes
        self.down = down

    def run(self, *argv: str) -> str:
        self.calls.append(argv[0])
        if argv[0] in self.down:
            raise SourceError(f"{argv[0]}: Unable to contact slurm controller")
        if argv[0] == "sinfo":
            return "".join(f"cpu-small-{i}|cpu*|{'allocated' if i <= 3 else 'idle~'}\n"
                           for i in range(1, self.node_count + 1))  # fmt: skip
        if argv[0] == "squeue":
            return (
                "11|cpu|PENDING|ReqNodeNotAvail|alice|eda|100|9999\n"  # a pending job's start is a forecast
                "12|cpu|RUNNING|None|bob|ml|100|130\n"
                "13|cpu|COMPLETED|None|carol|eda|100|105\n"  # shorter than a scrape: squeue -t all still lists it
                "14|cpu|CANCELLED|None|dave|eda|100|150\n"  # cancelled while pending: never ran
            )
        if argv[0] == "sdiag":
            return SDIAG
        if argv[0] == "sacctmgr":
            return "slurmdbd(primary) at ctl is UP\n"
        return "No licenses configured in Slurm.\n"


def _manifest(state_dir: Path, max_nodes: int = 10) -> Manifest:
    loc = [Location(region="us-east-1", availability_zone=az, subnet_id=f"subnet-{az}", launch_template_id="lt-1")
           for az in ("us-east-1a", "us-east-1b")]  # fmt: skip
    pool = PoolManifest(partition="cpu", pool="small", node_prefix="cpu-small-", min_nodes=0, max_nodes=max_nodes,
                        instance_types=["c7i.large"], purchase_option="spot", locations=loc)  # fmt: skip
    return Manifest(cluster="c1", home_region="us-east-1", instance_cache_path=str(state_dir / "cache.json"),
                    state_dir=str(state_dir), log_file=str(state_dir / "plugin.log"), pools=[pool])  # fmt: skip


def _scrape(collector: ClusterCollector) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(collector)
    text = generate_latest(registry).decode()
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def test_a_scrape_makes_one_call_per_source_at_ten_thousand_nodes(tmp_path: Path) -> None:
    manifest = _manifest(tmp_path, max_nodes=10_000)
    slurm = CountingSlurm(10_000)
    collector = ClusterCollector(manifest, slurm, PluginReader(manifest, tmp_path), accounting=True)
    samples = _scrape(collector)
    assert sorted(slurm.calls) == ["sacctmgr", "scontrol", "sdiag", "sinfo", "squeue"]
    node = ("slurm_nodes", (("partition", "cpu"), ("pool", "cpu-small"), ("state", "powered_down")))
    assert samples[node] == 9_997
    assert samples[("slurm_nodes", (("partition", "cpu"), ("pool", "cpu-small"), ("state", "allocated")))] == 3
    assert samples[("slurm_up", (("daemon", "slurmdbd"),))] == 1
    pending = ("slurm_jobs", (("partition", "cpu"), ("reason", "ReqNodeNotAvail"), ("state", "pending")))
    assert samples[pending] == 1
    assert samples[("elastic_slurm_job_wait_seconds_count", (("partition", "cpu"),))] == 2
    assert samples[("elastic_slurm_job_wait_seconds_sum", (("partition", "cpu"),))] == 30 + 5
    assert {labels for name, labels in samples if name == "slurm_user_jobs"} == {
        (("state", "pending"), ("user", "alice")), (("state", "running"), ("user", "bob")),
    }  # finished jobs are not counted as jobs, only for their wait  # fmt: skip
    assert _scrape(collector)[("elastic_slurm_job_wait_seconds_count", (("partition", "cpu"),))] == 2  # once each
    assert samples[("slurm_rpc_user_calls_total", (("user", "root"),))] == 50


def test_capacity_errors_cool_down_and_live_instances_appear_in_the_scrape(tmp_path: Path) -> None:
    manifest = _manifest(tmp_path)
    collector = ClusterCollector(manifest, CountingSlurm(10), PluginReader(manifest, tmp_path), accounting=False)
    before = _scrape(collector)
    idle = ("elastic_slurm_instances", (("az", "us-east-1a"), ("market", "spot"), ("pool", "cpu-small"),
                                        ("region", "us-east-1")))  # fmt: skip
    assert before[idle] == 0 and before[("elastic_slurm_pool_cooling_azs", (("pool", "cpu-small"),))] == 0
    events.record(tmp_path, [
        {"event": "capacity_error", "pool": "cpu-small", "region": "us-east-1", "market": "spot",
         "az": "us-east-1a", "instance_type": "c7i.large", "code": "InsufficientInstanceCapacity"},
        {"event": "node_launched", "pool": "cpu-small", "region": "us-east-1", "market": "spot",
         "az": "us-east-1b", "instance_id": "i-9", "node": "cpu-small-1", "seconds": 2.0},
    ])  # fmt: skip
    capacity.add_cooling(tmp_path, [("cpu-small", "us-east-1a")], now=time.time(), seconds=600)
    after = _scrape(collector)
    error = ("elastic_slurm_capacity_errors_total", (("az", "us-east-1a"), ("code", "InsufficientInstanceCapacity"),
                                                    ("pool", "cpu-small")))  # fmt: skip
    assert after[error] == 1
    assert after[("elastic_slurm_pool_cooling_azs", (("pool", "cpu-small"),))] == 1
    assert after[idle[0], (("az", "us-east-1b"), *idle[1][1:])] == 1
    assert ("slurm_up", (("daemon", "slurmdbd"),)) not in after  # a cluster without accounting has no slurmdbd


def test_a_failed_source_is_reported_down_and_its_metrics_left_out(tmp_path: Path) -> None:
    manifest = _manifest(tmp_path)
    slurm = CountingSlurm(10, down={"sinfo", "sdiag"})
    collector = ClusterCollector(manifest, slurm, PluginReader(manifest, tmp_path), accounting=True)
    samples = _scrape(collector)
    assert samples[("elastic_slurm_exporter_source_up", (("source", "nodes"),))] == 0
    assert samples[("elastic_slurm_exporter_source_up", (("source", "jobs"),))] == 1
    assert samples[("slurm_up", (("daemon", "slurmctld"),))] == 0
    assert not any(name == "slurm_nodes" for name, _ in samples)
    assert collector.snapshot.slurmctld_up is False


def test_cloudwatch_values_send_counter_increments_and_a_never_synced_license_age(tmp_path: Path) -> None:
    manifest = _manifest(tmp_path)
    collector = ClusterCollector(manifest, CountingSlurm(10), PluginReader(manifest, tmp_path), accounting=True)
    deltas = cloudwatch.CounterDeltas()
    _scrape(collector)
    first = cloudwatch_values(collector.snapshot, deltas)
    events.record(tmp_path, [{"event": "capacity_error", "pool": "cpu-small", "az": "us-east-1a", "code": "x"}] * 3)
    _scrape(collector)
    second = cloudwatch_values(collector.snapshot, deltas)
    assert first[cloudwatch.CAPACITY_ERRORS] == 0 and second[cloudwatch.CAPACITY_ERRORS] == 3
    assert second[cloudwatch.SLURMCTLD_UP] == 1 and second[cloudwatch.SLURMDBD_UP] == 1
    assert second[cloudwatch.NODES_UP] == 3 and second[cloudwatch.JOBS_PENDING] == 1
    assert cloudwatch.LICENSE_SYNC_AGE not in second
    collector.snapshot.license_sync_age = float("inf")
    assert cloudwatch_values(collector.snapshot, deltas)[cloudwatch.LICENSE_SYNC_AGE] == float("inf")


def test_the_event_log_tail_reads_the_rest_of_a_rotated_file_then_the_new_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tail = events.Tail(tmp_path)
    events.record(tmp_path, [{"event": "boot_failed", "pool": "p", "node": "n1"}])
    assert [e["node"] for e in tail.read()] == ["n1"]
    events.record(tmp_path, [{"event": "boot_failed", "pool": "p", "node": "n2"}])  # not read yet
    monkeypatch.setattr(events, "MAX_BYTES", 10)
    events.record(tmp_path, [{"event": "boot_failed", "pool": "p", "node": "n3"}])  # rotates, then writes n3
    assert (tmp_path / "events.jsonl.1").exists()
    assert [e["node"] for e in tail.read()] == ["n2", "n3"]
    assert [e["node"] for e in events.read_all(tmp_path)] == ["n1", "n2", "n3"]
    assert [e["node"] for e in events.Tail(tmp_path).read()] == ["n1", "n2", "n3"]  # a new exporter reads both


def test_the_exporter_reads_license_sync_state_where_the_sync_unit_writes_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Both follow the manifest: license-sync/ in the plugin's state dir, on the controllers' own file system with two
    controllers (found by review: the unit wrote /var/lib/elastic-slurm/license-sync, the exporter of a
    two-controller cluster read the shared state dir, so its license metrics stayed empty)."""
    from slurm_plugin.exporter.main import build_collector, build_parser
    from slurm_plugin.licenses import cli as license_cli
    from slurm_plugin.licenses.sync import ServerHealth, SyncResult, SyncState
    from slurm_plugin.manifest import write_manifest

    units = Path(__file__).resolve().parents[2] / "assets" / "systemd"
    sync_exec = (units / "slurm-license-sync.service").read_text().split("\nExecStart=", 1)[1].split("\n", 1)[0]
    exporter_exec = (units / "slurm-exporter.service").read_text().split("\nExecStart=", 1)[1].split("\n", 1)[0]
    manifest_path = exporter_exec.split("--manifest ", 1)[1].split()[0]
    assert f"--manifest {manifest_path} " in sync_exec and "--state-dir" not in sync_exec

    shared = tmp_path / "slurm-state" / "c1" / "plugin"  # a two-controller cluster's plugin state dir
    manifest = _manifest(shared)
    write_manifest(manifest, tmp_path / "manifest.json")
    config = tmp_path / "sync.json"
    config.write_text('{"local_cluster": "c1", "licenses": []}')
    synced = SyncState(servers={"27000@lic": ServerHealth(last_success=time.time())})
    monkeypatch.setattr(license_cli, "run_sync", lambda *a, **k: SyncResult(updates=[], failures=[], state=synced))
    speaks = type("Gate", (), {"host": "ctl-a", "speaks": lambda self: True})()
    argv = ["--config", str(config), "--manifest", str(tmp_path / "manifest.json")]
    assert license_cli.main(argv, gate=speaks) == 0
    written = shared / license_cli.STATE_SUBDIR / license_cli.STATE_FILE
    assert written.exists()
    collector = build_collector(manifest, build_parser().parse_args(["--manifest", str(tmp_path / "manifest.json")]))
    assert collector.plugin.license_state == written  # the exporter reads what the sync wrote


def test_a_license_sync_with_an_unreadable_manifest_says_so_in_one_line(tmp_path: Path) -> None:
    from slurm_plugin.licenses import cli as license_cli

    config = tmp_path / "sync.json"
    config.write_text('{"local_cluster": "c1", "licenses": []}')
    assert license_cli.main(["--config", str(config), "--manifest", str(tmp_path / "none.json")]) == 2


def test_every_variable_of_the_exporter_unit_is_written_before_the_boot_enables_it() -> None:
    repo = Path(__file__).resolve().parents[2]
    unit = (repo / "assets" / "systemd" / "slurm-exporter.service").read_text()
    used = set(re.findall(r"\$\{(\w+)\}", unit.split("ExecStart=", 1)[1].splitlines()[0]))
    assert used == {"ES_EXPORTER_LISTEN", "ES_ACCOUNTING_MODE", "ES_CLOUDWATCH_INTERVAL"}
    assert "EnvironmentFile=-/etc/elastic-slurm/env" in unit and "EnvironmentFile=-/etc/elastic-slurm/facts.env" in unit
    facts = Facts("ip-a(127.0.0.1)", "", "none", "").env_text()  # what config apply writes to facts.env
    controller_values = (repo / "stacks" / "cluster.py").read_text()  # the controller user data's env file
    for name in used:
        assert f"{name}=" in facts or f'"{name}":' in controller_values, name


@pytest.mark.parametrize(
    ("argv", "named"),
    [
        (["--accounting", ""], "--accounting"),
        (["--accounting", "slurmdbd"], "--accounting"),
        (["--cloudwatch-interval", "nan"], "--cloudwatch-interval"),
        (["--listen", "9464"], "--listen"),
    ],
)
def test_bad_exporter_arguments_are_one_line_naming_the_option(
    argv: list[str], named: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from slurm_plugin.exporter.main import main

    with pytest.raises(SystemExit) as exit_info:
        main(["--manifest", "/nonexistent.json", *argv])
    assert exit_info.value.code == 2
    assert named in capsys.readouterr().err.strip().splitlines()[-1]


def test_a_scrape_during_a_slow_collection_gets_the_last_one_instead_of_waiting(tmp_path: Path) -> None:
    from slurm_plugin.exporter.main import build_collector, build_parser

    manifest = _manifest(tmp_path)
    collector = build_collector(manifest, build_parser().parse_args(["--manifest", "m", "--accounting", "none"]))
    collector.slurm = CountingSlurm(4)
    first = [m.name for m in collector.collect()]
    assert "slurm_nodes" in first
    collector._lock.acquire()  # type: ignore[attr-defined]  # a collection in progress
    try:
        calls = len(collector.slurm.calls)  # type: ignore[attr-defined]
        assert [m.name for m in collector.collect()] == first
        assert len(collector.slurm.calls) == calls  # type: ignore[attr-defined]  # no Slurm call, no waiting
    finally:
        collector._lock.release()  # type: ignore[attr-defined]


def test_a_failed_event_log_read_publishes_no_counter_increment(tmp_path: Path) -> None:
    deltas = cloudwatch.CounterDeltas()
    snap = Snapshot(slurmctld_up=True, capacity_errors=5.0, boot_failures=1.0)
    assert cloudwatch_values(snap, deltas)[cloudwatch.CAPACITY_ERRORS] == 0
    missing = cloudwatch_values(Snapshot(slurmctld_up=True), deltas)  # the log was not read this time
    assert cloudwatch.CAPACITY_ERRORS not in missing and cloudwatch.FAILED_BOOTS not in missing
    assert (
        cloudwatch_values(Snapshot(slurmctld_up=True, capacity_errors=7.0, boot_failures=1.0), deltas)[
            cloudwatch.CAPACITY_ERRORS
        ]
        == 2
    )  # not the whole history again
