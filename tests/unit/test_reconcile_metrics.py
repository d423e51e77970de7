"""Manager counters persist in state_dir and count each capacity cool-down once."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

from slurm_plugin.manager import metrics

NOW = datetime(2026, 11, 22, 3, 0, tzinfo=UTC)


def test_counters_accumulate_across_cycles_and_restarts(tmp_path: Path) -> None:
    metrics.update(tmp_path, ["orphans_terminated", "orphans_terminated", ""], NOW, 2)
    again = metrics.update(tmp_path, ["spot_interruptions"], NOW, 1)
    assert again.counters["orphans_terminated"] == 2 and again.counters["spot_interruptions"] == 1
    assert again.counters["cycles"] == 2 and again.last_actions == 1
    assert metrics.load(tmp_path).to_json()["counters"]["nodes_replaced"] == 0


def test_each_new_capacity_cooldown_counts_once_by_pool_and_az(tmp_path: Path) -> None:
    (tmp_path / "capacity.json").write_text(json.dumps({"cpu-c7i|us-east-1a": 1000.0}))
    metrics.update(tmp_path, [], NOW, 0)
    metrics.update(tmp_path, [], NOW, 0)  # same cool-down seen again: not a new error
    (tmp_path / "capacity.json").write_text(json.dumps({"cpu-c7i|us-east-1a": 2000.0, "gpu-g5|us-east-1b": 5.0}))
    result = metrics.update(tmp_path, [], NOW, 0)
    assert result.capacity_errors == {"cpu-c7i|us-east-1a": 2, "gpu-g5|us-east-1b": 1}


def test_corrupt_metrics_file_reads_as_empty(tmp_path: Path) -> None:
    (tmp_path / metrics.METRICS_FILE).write_text("{broken")
    assert metrics.load(tmp_path).counters == {}
