"""The pure parts of the 10,000-node bench (bench/scale_*.py): sdiag and plugin-log parsing, the timed wrapper, the
in-process call counter, the target check and the table. No timing is asserted (timing belongs in `make bench`)."""

from __future__ import annotations

import os
import subprocess
from collections import Counter
from pathlib import Path

import pytest

from bench import scale_probe, scale_report, scale_watch
from bench.scale_10k import scaled_config
from cluster_config import load

SDIAG = """\
*******************************************************
sdiag output at Thu Nov 26 02:49:43 2026 (1764125383)
*******************************************************
Server thread count:  1
Jobs submitted: 20

Main schedule statistics (microseconds):
\tLast cycle:   4012
\tMax cycle:    9120
\tTotal cycles: 3
\tMean cycle:   5001
\tMean depth cycle:  20
\tCycles per minute: 1
\tLast queue length: 20

Main scheduler exit:
\tEnd of job queue: 3

Backfilling stats
\tTotal backfilled jobs (since last slurm start): 7
\tTotal backfilled jobs (since last stats cycle start): 7
\tTotal cycles: 2
\tLast cycle when: Thu Nov 26 02:49:30 2026 (1764125370)
\tLast cycle: 1500
\tMax cycle:  2500
\tMean cycle: 2000
\tLast depth cycle: 20
\tLast queue length: 20

Latency for 1000 calls to gettimeofday(): 20 microseconds
"""


def test_sdiag_main_and_backfill_cycles_are_read_per_section() -> None:
    stats = scale_watch.parse_sdiag(SDIAG)
    assert stats["main"] == {
        "last_us": 4012, "max_us": 9120, "cycles": 3, "mean_us": 5001, "cycles_per_minute": 1, "last_queue_length": 20,
    }  # fmt: skip
    assert stats["backfill"]["mean_us"] == 2000
    assert stats["backfill"]["max_us"] == 2500
    assert stats["backfill"]["cycles"] == 2
    assert stats["backfill"]["backfilled_jobs"] == 7
    assert "End of job queue" not in str(stats)


def test_handoffs_and_timed_log_lines_are_found() -> None:
    text = (
        "2026-11-26 02:46:49,000 14211 INFO slurm-resume: request R1: slurm-resume of 200 nodes handed to worker pid 14224\n"
        "2026-11-26 02:46:50,630 14224 INFO slurm-resume: request R1: NodeAddr set for 50 nodes cpu-c7i-[1-50]\n"
        "2026-11-26 02:46:51,000 14300 INFO slurm-suspend: request R2: slurm-suspend of 9 nodes handed to worker pid 15\n"
    )
    assert scale_watch.handoffs(text, "slurm-resume") == [scale_watch.Handoff("R1", "slurm-resume", 200, 14224)]
    assert [h.pid for h in scale_watch.handoffs(text, "slurm-suspend")] == [15]
    ((at, line),) = scale_watch.lines_with(text, "NodeAddr set for")
    assert "cpu-c7i-[1-50]" in line
    assert at - scale_watch.log_time(text.splitlines()[0]) == pytest.approx(1.63)  # type: ignore[operator]


def test_timed_wrapper_runs_the_program_and_records_its_exit(tmp_path: Path) -> None:
    wrapper = tmp_path / "slurm-resume"
    wrapper.write_text('#!/bin/sh\n# a local cloud wrapper\nexport X=1\nexec /bin/sh -c "exit 3" "$@"\n')
    wrapper.chmod(0o755)
    timing = tmp_path / "timing.txt"
    scale_watch.timed_wrapper(wrapper, timing)
    assert subprocess.run([str(wrapper), "node-[1-2]"], check=False).returncode == 3
    assert subprocess.run([str(wrapper)], check=False).returncode == 3
    runs = scale_watch.read_timings(timing)
    assert [run.exit for run in runs] == [3, 3]
    assert all(run.end >= run.start and run.cpu_s is not None and run.cpu_s >= 0 for run in runs)
    assert not list(tmp_path.glob("timing.txt.times.*"))  # the shell's `times` scratch file is removed


def test_timings_read_both_shells_times_formats(tmp_path: Path) -> None:
    timing = tmp_path / "timing.txt"
    timing.write_text("10.0 10.05 0 0m0.040000s 0m0.010000s\n20.0 20.5 1 1m0.5s 0m0.25s\n30.0 30.1 0\n")
    runs = scale_watch.read_timings(timing)
    assert [(r.exit, r.cpu_s) for r in runs] == [(0, 0.05), (1, 60.75), (0, None)]
    assert runs[0].seconds == pytest.approx(0.05)


def test_probe_counts_aws_calls_and_subprocesses_of_its_target() -> None:
    def target(argv: list[str]) -> int:
        import boto3
        from botocore.stub import Stubber

        client = boto3.client("ec2", region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="x")
        with Stubber(client) as stub:
            stub.add_response("describe_instances", {"Reservations": []})
            stub.add_response("describe_instances", {"Reservations": []})
            client.describe_instances()
            client.describe_instances()
        subprocess.run(["true"], check=True)
        subprocess.run(["/bin/true", *argv], check=True)
        return 0

    report = scale_probe.probe(target, ["x"], None)
    assert report["aws_calls"] == {"ec2:DescribeInstances": 2}
    assert report["subprocesses"] == {"true": 2}
    assert report["exit_code"] == 0


def test_counting_restores_botocore_and_popen() -> None:
    import botocore.client

    before = (getattr(botocore.client.BaseClient, "_make_api_call"), subprocess.Popen.__init__)  # noqa: B009
    with scale_probe.counting_calls(Counter(), Counter()):
        pass
    assert (getattr(botocore.client.BaseClient, "_make_api_call"), subprocess.Popen.__init__) == before  # noqa: B009


def test_targets_say_met_missed_or_not_measured() -> None:
    results = {
        "phases": {
            "manager_live": {"cpu_s": {"plugin": 1.5}, "children_cpu_s": 0.7, "aws_call_total": 12},
            "resume": {"resume_program_return_s": 0.1, "nodeaddr_after_last_answer_s": 3.0},
        }
    }
    checks = scale_report.targets(results)
    assert checks["manager_pass_cpu_s"] == {"value": 2.2, "limit": "<= 2", "met": False}
    assert checks["manager_pass_aws_calls"]["met"] is True
    assert checks["resume_program_return_s"]["met"] is False  # < 100 ms, strictly
    assert checks["nodeaddr_after_launch_answer_s"]["met"] is True
    assert scale_report.targets({"phases": {}})["manager_pass_cpu_s"]["met"] is None
    text = scale_report.table({**results, "targets": checks})
    assert "target manager_pass_cpu_s: 2.200 (<= 2): MISSED" in text
    assert "target nodeaddr_after_launch_answer_s: 3.000 (<= 30): met" in text


def test_scaled_config_shares_the_nodes_among_the_pools_and_stays_valid(tmp_path: Path) -> None:
    path = scaled_config(Path(scale_report.__file__).parent / "configs" / "scale-10k.yaml", 202, tmp_path)
    cluster = load(path).clusters[0]
    sizes = [pool.max_nodes for part in cluster.partitions for pool in part.pools]
    assert sizes == [51, 51, 50, 50]
    assert os.path.dirname(path) == str(tmp_path)
