"""The daemon loop and the status report: a failing cycle is logged (not fatal), stop ends the loop, text is stable."""

from __future__ import annotations

import socket
import threading
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from elastic_slurm import cli
from slurm_plugin.manager import metrics, readiness
from slurm_plugin.manager.apply import Outcome
from slurm_plugin.manager.daemon import Manager, run
from slurm_plugin.manager.metrics import Metrics
from slurm_plugin.manager.model import Instance, Node
from slurm_plugin.manager.observe import parse_state
from slurm_plugin.manager.report import counters_text, nodes_table
from slurm_plugin.manifest import Location, Manifest, PoolManifest, write_manifest
from slurm_plugin.powersave.slurm import SlurmError

NOW = datetime(2026, 11, 22, 3, 0, tzinfo=UTC)
POOL = PoolManifest(
    partition="cpu", pool="c7i", node_prefix="cpu-c7i-", min_nodes=0, max_nodes=10, instance_types=["c7i.large"],
    purchase_option="on_demand",
    locations=[Location(region="us-east-1", availability_zone="us-east-1a", subnet_id="s", launch_template_id="l")],
)  # fmt: skip


@dataclass
class StubManager:
    results: list[Any]
    stop: threading.Event | None = None
    cycles: int = field(default=0)

    def cycle(self) -> Outcome | None:
        self.cycles += 1
        result = self.results[min(self.cycles, len(self.results)) - 1]
        if self.stop is not None and self.cycles >= len(self.results):
            self.stop.set()
        if isinstance(result, Exception):
            raise result
        return result  # type: ignore[no-any-return]


def as_manager(stub: StubManager) -> Manager:
    return stub  # type: ignore[return-value]


def test_once_returns_1_when_the_cycle_failed_and_0_when_it_worked() -> None:
    stop = threading.Event()
    assert run(as_manager(StubManager([SlurmError("scontrol ping: exit 1: down")])), True, 1, stop) == 1
    assert run(as_manager(StubManager([Outcome()])), True, 1, stop) == 0
    assert run(as_manager(StubManager([Outcome(failures=["terminate: denied"])])), True, 1, stop) == 1


def test_a_failing_cycle_does_not_stop_the_loop_and_stop_ends_it() -> None:
    stop = threading.Event()
    stub = StubManager([SlurmError("slurmctld restarting"), None, Outcome()], stop=stop)
    assert run(as_manager(stub), False, 0.01, stop) == 0
    assert stub.cycles == 3


def test_the_loop_reports_ready_once_after_its_first_cycle_even_a_failed_one_and_once_never() -> None:
    calls: list[int] = []
    stop = threading.Event()
    stub = StubManager([SlurmError("slurmctld restarting"), Outcome(), Outcome()], stop=stop)
    assert run(as_manager(stub), False, 0.01, stop, ready=lambda: calls.append(stub.cycles)) == 0
    assert calls == [1]
    assert run(as_manager(StubManager([Outcome()])), True, 1, threading.Event(), ready=lambda: calls.append(0)) == 0
    assert calls == [1]


@pytest.mark.parametrize("abstract", [False, True])
def test_ready_is_one_datagram_to_the_notify_socket(tmp_path: Path, abstract: bool) -> None:
    name = f"@es-notify-{tmp_path.name}" if abstract else str(tmp_path / "notify")
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as listener:
        listener.bind("\0" + name[1:] if abstract else name)
        listener.settimeout(5)
        assert readiness.notify_ready({"NOTIFY_SOCKET": name}) is True
        assert listener.recv(100) == b"READY=1\n"


def test_ready_without_a_socket_sends_nothing_and_a_dead_socket_is_a_warning(tmp_path: Path) -> None:
    assert readiness.notify_ready({}) is False
    assert readiness.notify_ready({"NOTIFY_SOCKET": str(tmp_path / "nobody-listens")}) is False


def test_status_table_shows_live_nodes_and_unclaimed_instances() -> None:
    nodes = [
        Node("cpu-c7i-1", *parse_state("ALLOCATED+CLOUD"), "127.1.0.1"),
        Node("cpu-c7i-2", *parse_state("IDLE+CLOUD+POWERED_DOWN")),
        Node("cpu-c7i-3", *parse_state("DOWN+CLOUD+POWERED_DOWN"), None, "(Code:InsufficientInstanceCapacity) x"),
        Node("login-1", *parse_state("IDLE")),
    ]
    instances = [
        Instance("i-1", "us-east-1", "running", "127.1.0.1", NOW, "alpha", "cpu-c7i"),
        Instance("i-9", "us-east-1", "running", "127.1.0.9", NOW, "alpha", "cpu-c7i"),
    ]
    text = "\n".join(nodes_table(nodes, instances, [POOL]))
    assert "cpu-c7i-1  ALLOCATED" in text and "i-1" in text
    assert "cpu-c7i-3" in text and "(Code:InsufficientInstanceCapacity)" in text
    assert "cpu-c7i-2" not in text and "login-1" not in text and "(1 node(s) powered down" in text
    assert "i-9" in text.split("instances no node claims")[1]


def test_counters_text_lists_every_counter_and_capacity_errors() -> None:
    metrics = Metrics(counters={"orphans_terminated": 3}, capacity_errors={"cpu-c7i|us-east-1a": 2})
    text = "\n".join(counters_text(metrics))
    assert "orphans_terminated           3" in text and "spot_interruptions           0" in text
    assert "cpu-c7i|us-east-1a           2" in text


def test_status_command_prints_counters_from_the_state_dir(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    manifest = Manifest(
        cluster="alpha", home_region="us-east-1", instance_cache_path=str(tmp_path / "c.json"),
        state_dir=str(tmp_path / "state"), log_file=str(tmp_path / "plugin.log"), pools=[POOL],
    )  # fmt: skip
    write_manifest(manifest, tmp_path / "manifest.json")
    metrics.update(tmp_path / "state", ["orphans_terminated"], NOW, 1)
    assert cli.main(["status", "--manifest", str(tmp_path / "manifest.json"), "--counters-only"]) == 0
    out = capsys.readouterr().out
    assert "cluster alpha" in out and "orphans_terminated           1" in out


def test_status_command_with_a_missing_manifest_is_a_one_line_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main(["status", "--manifest", str(tmp_path / "nope.json")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--manifest" in err[0]
