"""`elastic-slurm cost`: job costs from canned sacct output, event-log records and instance-cache prices, checked
against hand arithmetic (price USD/h x hours x share), plus the command's output formats and one-line errors."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

from elastic_slurm.cli import main
from elastic_slurm.commands import cost_cmd
from slurm_plugin.cost import when
from slurm_plugin.cost.ledger import build_ledger
from slurm_plugin.cost.report import CostReport, build_report
from slurm_plugin.cost.sacct import FIELDS, SacctError, parse_sacct, sacct_argv
from slurm_plugin.instance_cache import InstanceCache, InstanceTypeInfo, Prices, write_cache
from slurm_plugin.manifest import Manifest, PoolManifest, write_manifest
from slurm_plugin.telemetry import events

EXAMPLES = Path(__file__).resolve().parents[2] / "cluster_config" / "examples"
T0 = 1_800_000_000.0  # every time below is T0 + seconds
HOUR = 3600


def _info(vcpus: int, on_demand: float | None, spot: dict[str, float]) -> InstanceTypeInfo:
    return InstanceTypeInfo(
        vcpus=vcpus, memory_mib=4096, architecture="x86_64", prices=Prices(on_demand=on_demand, spot=spot)
    )


CACHE = InstanceCache(
    generated_at=datetime(2027, 1, 1, tzinfo=UTC),
    regions={
        "us-east-1": {
            "c7i.large": _info(2, 0.085, {"us-east-1a": 0.03, "us-east-1b": 0.04}),
            "m7i.large": _info(2, 0.10, {"us-east-1c": 0.05}),  # no spot price in us-east-1a
            "c7i.xlarge": _info(4, 0.17, {}),
        }
    },
)


def _pool(pool: str, types: list[str], purchase: str) -> PoolManifest:
    partition = "big" if pool == "big" else "cpu"
    here = {
        "region": "us-east-1",
        "availability_zone": "us-east-1a",
        "subnet_id": "subnet-1",
        "launch_template_id": "lt-1",
    }
    return PoolManifest.model_validate(
        {"partition": partition, "pool": pool, "node_prefix": f"{partition}-{pool}-", "min_nodes": 0, "max_nodes": 10,
         "instance_types": types, "purchase_option": purchase, "locations": [here]}
    )  # fmt: skip


def _manifest(state_dir: Path, cache_path: Path) -> Manifest:
    pools = [
        _pool("small", ["c7i.large", "m7i.large"], "spot_then_on_demand"),
        _pool("od", ["c7i.large"], "on_demand"),
        _pool("big", ["c7i.xlarge"], "on_demand"),
    ]
    return Manifest.model_validate(
        {
            "cluster": "local",  # the cluster of cluster_config/examples/local-demo.yaml (the idle cost)
            "home_region": "us-east-1",
            "instance_cache_path": str(cache_path),
            "state_dir": str(state_dir),
            "log_file": str(state_dir / "plugin.log"),
            "pools": pools,
        }
    )


def _launched(node: str, iid: str, itype: str, az: str, market: str) -> dict[str, object]:
    pool = node.rsplit("-", 1)[0]
    return {"event": "node_launched", "request": "r1", "pool": pool, "node": node, "instance_id": iid,
            "instance_type": itype, "az": az, "region": "us-east-1", "market": market, "seconds": 30.0}  # fmt: skip


def _record_launches(state_dir: Path) -> None:
    """The event log: which instance ran which node (cpu-small-4 has no record: the log lost it)."""
    events.record(
        state_dir,
        [
            _launched("cpu-small-1", "i-1", "c7i.large", "us-east-1a", "spot"),
            _launched("cpu-small-2", "i-2", "c7i.large", "us-east-1b", "spot"),
            _launched("cpu-small-3", "i-3", "m7i.large", "us-east-1a", "spot"),
            _launched("cpu-od-1", "i-4", "c7i.large", "us-east-1a", "on-demand"),
            _launched("cpu-od-2", "i-5", "c7i.large", "us-east-1b", "on-demand"),
            _launched("big-big-1", "i-6", "c7i.xlarge", "us-east-1a", "on-demand"),
        ],
        now=T0,
    )
    events.record(
        state_dir,
        [{"event": "terminated", "node": "cpu-small-1", "pool": "cpu-small", "instance_id": "i-1",
          "region": "us-east-1", "reason": "suspend"}],
        now=T0 + 4000,
    )  # fmt: skip
    events.record(state_dir, [_launched("cpu-small-1", "i-7", "c7i.large", "us-east-1b", "spot")], now=T0 + 5000)


def _line(job: str, user: str, account: str, part: str, nodes: str, start: float, end: float | None, cpus: int) -> str:
    elapsed = int((end or start) - start)
    end_text = "Unknown" if end is None else str(int(end))
    state = "RUNNING" if end is None else "COMPLETED"
    return "|".join([job, user, account, part, nodes, str(int(start)), end_text, str(elapsed), str(cpus), state])


SACCT = "\n".join(
    [
        _line("101", "alice", "physics", "cpu", "cpu-small-[1-2]", T0 + 100, T0 + 1900, 4),  # spot 1a + spot 1b
        _line("102", "bob", "chemistry", "cpu", "cpu-od-[1-2]", T0 + 100, T0 + 1900, 4),  # 2 on-demand nodes
        _line("103", "carol", "physics", "cpu", "cpu-small-2", T0 + 2000, T0 + 3800, 1),  # two jobs share one node
        _line("104", "carol", "physics", "cpu", "cpu-small-2", T0 + 2000, T0 + 3800, 1),
        _line("105", "alice", "physics", "cpu", "cpu-small-3", T0 + 100, T0 + 3700, 2),  # no spot price in its AZ
        _line("106", "dave", "chemistry", "cpu", "cpu-small-4", T0 + 100, T0 + 3700, 2),  # no launch record
        _line("107", "alice", "physics", "cpu", "cpu-small-1", T0 + 5100, T0 + 6900, 2),  # its second instance
        _line("108", "bob", "chemistry", "big", "big-big-1", T0 + 7000, None, 4),  # still running
        "109|dave|chemistry|cpu|None assigned|Unknown|Unknown|0|0|PENDING",
    ]
)
UNTIL = T0 + 7900  # job 108 has run 900 s by then
# Hand arithmetic, job by job (USD/hour x hours x share):
EXPECTED = {
    "101": (0.03 + 0.04) * 0.5 * 1.0,  # 2 spot nodes (us-east-1a, us-east-1b) x 1800 s, 4 CPUs / 4 vCPUs = 0.035
    "102": 2 * 0.085 * 0.5 * 1.0,  # 2 nodes x 0.085 $/h x 1800 s = 0.085
    "103": 0.04 * 0.5 * 0.5,  # 1 CPU of a 2-vCPU node: half of 0.04 $/h x 1800 s = 0.01
    "104": 0.04 * 0.5 * 0.5,
    "105": 0.05 * 1.0 * 1.0,  # m7i.large spot in us-east-1a unknown: cheapest spot (us-east-1c) 0.05 $/h x 1 h
    "106": 0.085 * 1.0 * 1.0,  # no record: pool small's first type c7i.large on-demand x 1 h
    "107": 0.04 * 0.5 * 1.0,  # cpu-small-1's second instance (spot us-east-1b), not the first (us-east-1a)
    "108": 0.17 * 0.25 * 1.0,  # c7i.xlarge on-demand x 900 s so far
}


@pytest.fixture()
def setup(tmp_path: Path) -> tuple[Manifest, Path]:
    """A manifest, its instance cache and event log; returns the manifest and its path."""
    state_dir = tmp_path / "state"
    state_dir.mkdir()
    cache_path = tmp_path / "instance-cache.json"
    write_cache(CACHE, cache_path)
    manifest = _manifest(state_dir, cache_path)
    manifest_path = tmp_path / "manifest.json"
    write_manifest(manifest, manifest_path)
    _record_launches(state_dir)
    return manifest, manifest_path


def _report(manifest: Manifest, by: str = "job", since: float = T0, until: float = UNTIL) -> CostReport:
    ledger = build_ledger(events.read_all(manifest.state_dir))
    return build_report(manifest, CACHE, ledger, parse_sacct(SACCT), since, until, by)


def _costs(report: CostReport) -> dict[str, float]:
    return {job.run.job_id: job.usd for job in report.jobs}


def test_every_job_costs_price_times_hours_times_share(setup: tuple[Manifest, Path]) -> None:
    report = _report(setup[0])
    assert _costs(report) == pytest.approx(EXPECTED)
    assert report.total_usd == pytest.approx(sum(EXPECTED.values()))  # 0.035+0.085+0.02+0.05+0.085+0.02+0.0425


def test_spot_nodes_cost_their_own_azs_spot_price_and_on_demand_nodes_the_on_demand_price(
    setup: tuple[Manifest, Path],
) -> None:
    jobs = {job.run.job_id: job for job in _report(setup[0]).jobs}
    spot = {n.node: (n.az, n.market, n.usd_per_hour, n.estimated) for n in jobs["101"].nodes}
    assert spot == {
        "cpu-small-1": ("us-east-1a", "spot", 0.03, False),
        "cpu-small-2": ("us-east-1b", "spot", 0.04, False),
    }
    assert [(n.market, n.usd_per_hour, n.estimated) for n in jobs["102"].nodes] == [("on-demand", 0.085, False)] * 2


def test_a_node_relaunched_later_is_priced_on_the_instance_that_ran_the_job(setup: tuple[Manifest, Path]) -> None:
    jobs = {job.run.job_id: job for job in _report(setup[0]).jobs}
    assert [n.instance_id for n in jobs["101"].nodes] == ["i-1", "i-2"]
    (node,) = jobs["107"].nodes
    assert (node.instance_id, node.az, node.usd_per_hour) == ("i-7", "us-east-1b", 0.04)


def test_jobs_sharing_a_node_pay_their_cpu_share(setup: tuple[Manifest, Path]) -> None:
    jobs = {job.run.job_id: job for job in _report(setup[0]).jobs}
    assert (jobs["103"].share, jobs["104"].share, jobs["101"].share) == (0.5, 0.5, 1.0)
    assert jobs["103"].usd + jobs["104"].usd == pytest.approx(0.04 * 0.5)  # together: the whole node for 1800 s


def test_share_is_capped_at_one(setup: tuple[Manifest, Path]) -> None:
    text = _line("120", "erin", "physics", "cpu", "cpu-small-2", T0 + 2000, T0 + 3800, 8)  # 8 CPUs on 2 vCPUs
    ledger = build_ledger(events.read_all(setup[0].state_dir))
    (job,) = build_report(setup[0], CACHE, ledger, parse_sacct(text), T0, UNTIL).jobs
    assert job.share == 1.0
    assert job.usd == pytest.approx(0.04 * 0.5)


def test_fallback_prices_are_marked_estimated(setup: tuple[Manifest, Path]) -> None:
    jobs = {job.run.job_id: job for job in _report(setup[0]).jobs}
    (no_az_price,) = jobs["105"].nodes
    assert (no_az_price.usd_per_hour, no_az_price.estimated) == (0.05, True)
    assert "cheapest spot" in no_az_price.basis
    (no_record,) = jobs["106"].nodes
    assert (no_record.instance_id, no_record.instance_type, no_record.market) == ("", "c7i.large", "on-demand")
    assert (no_record.usd_per_hour, no_record.estimated) == (0.085, True)
    assert "no launch record" in no_record.basis
    assert {j for j, job in jobs.items() if job.estimated} == {"105", "106"}


def test_a_type_missing_from_the_cache_is_unpriced_and_counted_as_zero(setup: tuple[Manifest, Path]) -> None:
    manifest = setup[0]
    events.record(manifest.state_dir, [_launched("cpu-small-5", "i-9", "c8i.large", "us-east-1a", "spot")], now=T0)
    text = _line("130", "erin", "physics", "cpu", "cpu-small-[2,5]", T0 + 2000, T0 + 3800, 4)
    ledger = build_ledger(events.read_all(manifest.state_dir))
    (job,) = build_report(manifest, CACHE, ledger, parse_sacct(text), T0, UNTIL).jobs
    assert job.unpriced and [n.usd_per_hour for n in job.nodes] == [0.04, None]
    assert job.usd == pytest.approx(0.04 * 0.5)  # share 4 CPUs / 2 known vCPUs, capped at 1


def test_the_window_clips_jobs_that_started_before_since(setup: tuple[Manifest, Path]) -> None:
    report = _report(setup[0], since=T0 + 1000, until=T0 + 1500)
    costs = _costs(report)
    assert set(costs) == {"101", "102", "105", "106"}  # the others start after the window
    assert costs["102"] == pytest.approx(2 * 0.085 * 500 / HOUR)  # 500 s of its 1800 s


@pytest.mark.parametrize(
    ("by", "expected"),
    [
        ("user", {"alice": 0.035 + 0.05 + 0.02, "bob": 0.085 + 0.0425, "carol": 0.02, "dave": 0.085}),
        ("account", {"physics": 0.035 + 0.02 + 0.05 + 0.02, "chemistry": 0.085 + 0.085 + 0.0425}),
        ("partition", {"cpu": 0.035 + 0.085 + 0.02 + 0.05 + 0.085 + 0.02, "big": 0.0425}),
    ],
)
def test_grouping_sums_the_jobs_of_each_group(
    setup: tuple[Manifest, Path], by: str, expected: dict[str, float]
) -> None:
    report = _report(setup[0], by=by)
    assert {row.key: row.usd for row in report.rows} == pytest.approx(expected)
    assert [row.usd for row in report.rows] == sorted((row.usd for row in report.rows), reverse=True)
    assert sum(row.jobs for row in report.rows) == 8


def test_sacct_is_called_once_for_the_window_with_epoch_times(monkeypatch: pytest.MonkeyPatch) -> None:
    argv = sacct_argv("/usr/bin/sacct", T0, UNTIL)
    assert argv[:8] == ["/usr/bin/sacct", "-X", "-P", "-n", "--noconvert", "-a", "-D", "-S"]
    assert argv[8] == when.sacct_time(T0) and argv[10] == when.sacct_time(UNTIL)
    assert argv[-1] == "--format=" + ",".join(FIELDS)


def test_sacct_lines_of_another_shape_are_an_error() -> None:
    with pytest.raises(SacctError, match="line 2: 3 fields"):
        parse_sacct(SACCT.splitlines()[0] + "\n1|2|3\n")


def test_times_are_resolved_as_sacct_resolves_them() -> None:
    now = datetime(2026, 11, 20, 15, 30).timestamp()
    assert when.resolve("now-7days", now) == now - 7 * 86400
    assert when.resolve("now", now) == now
    assert when.resolve("2026-11-01T10:00", now) == datetime(2026, 11, 1, 10, 0).timestamp()
    assert when.resolve("2026-11-01", now) == datetime(2026, 11, 1).timestamp()
    assert when.resolve("1101", now) == datetime(2026, 11, 1).timestamp()
    assert when.resolve("12/01", now) == datetime(2025, 12, 1).timestamp()  # a month still to come: last year
    assert when.resolve("10:00", now) == datetime(2026, 11, 20, 10, 0).timestamp()
    assert when.resolve("midnight", now) == datetime(2026, 11, 20).timestamp()
    with pytest.raises(when.WhenError, match="not a time sacct accepts"):
        when.resolve("last tuesday", now)


# ---------------------------------------------------------------- the command


def _run(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], manifest: Path, *args: str
) -> tuple[int, str, str]:
    """`elastic-slurm cost --manifest M ...` with the canned sacct output and `now` = UNTIL."""
    monkeypatch.setattr(cost_cmd, "read_sacct", lambda _manifest, _since, _until: SACCT)
    monkeypatch.setattr(cost_cmd, "clock", lambda: UNTIL)
    code = main(["cost", "--manifest", str(manifest), *args])
    out, err = capsys.readouterr()
    return code, out, err


def test_json_output_has_every_job_its_nodes_and_the_total(
    setup: tuple[Manifest, Path], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    config = str(EXAMPLES / "local-demo.yaml")
    code, out, _ = _run(
        monkeypatch, capsys, setup[1], "--since", f"uts{int(T0)}", "--format", "json", "--config", config
    )
    data = json.loads(out)
    assert code == 0 and (data["since"], data["until"], data["by"]) == (T0, UNTIL, "job")
    assert {job["job_id"]: job["usd"] for job in data["jobs"]} == pytest.approx(EXPECTED)
    assert data["total_usd"] == pytest.approx(sum(EXPECTED.values()))
    assert {row["key"]: row["usd"] for row in data["rows"]} == pytest.approx(EXPECTED)
    first = next(job for job in data["jobs"] if job["job_id"] == "101")
    assert [(n["instance_id"], n["az"], n["usd_per_hour"]) for n in first["nodes"]] == [
        ("i-1", "us-east-1a", 0.03),
        ("i-2", "us-east-1b", 0.04),
    ]
    # the idle cost of local-demo.yaml's always-on parts, spread over the report's 7900 s window
    idle = data["idle"]
    assert idle["monthly_usd"] > 0 and idle["window_usd"] == pytest.approx(idle["monthly_usd"] * 7900 / HOUR / 730)


def test_table_has_a_line_per_group_and_a_total_line(
    setup: tuple[Manifest, Path], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = _run(
        monkeypatch, capsys, setup[1], "--since", f"uts{int(T0)}", "--by", "user", "--config", "/x.yaml"
    )
    lines = out.splitlines()
    assert code == 0 and lines[1].split() == ["USER", "JOBS", "NODE-HOURS", "USD", "NOTE"]
    rows = {line.split()[0]: line.split() for line in lines[2:7]}
    assert rows["alice"][1:4] == ["3", "2.500", "0.1050"]  # 2 nodes x 0.5 h + 1 h + 0.5 h; 0.035 + 0.05 + 0.02
    assert rows["TOTAL"][1:4] == ["8", "5.750", f"{sum(EXPECTED.values()):.4f}"]  # 1+1+0.5+0.5+1+1+0.5+0.25
    assert rows["TOTAL"][4:] == ["2", "estimated"]
    assert "idle cost: skipped (/x.yaml: (file): cannot read: No such file or directory; see --config)" in lines


def test_job_table_lists_each_job_with_its_share(
    setup: tuple[Manifest, Path], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _, out, _ = _run(monkeypatch, capsys, setup[1], "--since", f"uts{int(T0)}", "--config", "/x.yaml")
    rows = {line.split()[0]: line.split() for line in out.splitlines()[2:11]}
    assert rows["103"] == ["103", "carol", "physics", "cpu", "1", "0.500", "0.50", "0.0100"]
    assert rows["106"][-2:] == ["0.0850", "estimated"]
    assert rows["TOTAL"][:3] == ["TOTAL", "8", "jobs"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--since", "last tuesday"], "elastic-slurm cost: --since: 'last tuesday' is not a time sacct accepts"),
        (["--since", "2026-02-30"], "elastic-slurm cost: --since: '2026-02-30': day is out of range for month"),
        (["--since", "now-1hour", "--until", "now-2hours"], "elastic-slurm cost: --until: "),
        (["--since", "now-1hour", "--manifest", "/nonexistent.json"], "elastic-slurm cost: --manifest: manifest"),
        (["--since", "now-1hour", "--cache", "/nonexistent.json"], "elastic-slurm cost: --cache: instance cache"),
    ],
)
def test_bad_input_is_one_line_naming_the_argument_and_exit_2(
    setup: tuple[Manifest, Path],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    args: list[str],
    message: str,
) -> None:
    code, out, err = _run(monkeypatch, capsys, setup[1], *args)
    assert (code, out) == (2, "")
    assert len(err.splitlines()) == 1 and err.startswith(message), err


def test_unknown_grouping_is_one_line_and_exit_2(
    setup: tuple[Manifest, Path], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        _run(monkeypatch, capsys, setup[1], "--since", "now-1hour", "--by", "project")
    err = capsys.readouterr().err
    assert exited.value.code == 2 and len(err.splitlines()) == 1 and "--by: invalid choice: 'project'" in err


def test_sacct_failure_is_one_line_and_exit_2(
    setup: tuple[Manifest, Path], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def failing(_manifest: Manifest, _since: float, _until: float) -> str:
        raise SacctError("Problem talking to the database: Connection refused")

    monkeypatch.setattr(cost_cmd, "read_sacct", failing)
    code = main(["cost", "--manifest", str(setup[1]), "--since", "now-1hour"])
    err = capsys.readouterr().err
    assert (code, err) == (2, "elastic-slurm cost: sacct: Problem talking to the database: Connection refused\n")
