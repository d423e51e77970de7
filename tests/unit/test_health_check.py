"""The node HealthCheckProgram (assets/health/elastic-slurm-healthcheck), run for real with fake nvidia-smi, dmesg,
pgrep and scontrol first on PATH: healthy nodes pass, failing ones are drained with a `(Health:...)` reason.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "assets" / "health" / "elastic-slurm-healthcheck"
FIXTURES = ROOT / "tests" / "fixtures" / "nvidia-smi"
FAKES = {
    "nvidia-smi": 'cat "$FAKE_NVSMI_OUT"; exit "${FAKE_NVSMI_RC:-0}"',
    "dmesg": 'if [ -n "${FAKE_DMESG:-}" ]; then cat "$FAKE_DMESG"; fi',
    "pgrep": 'exit "${FAKE_PGREP_RC:-0}"',
    "all_reduce_perf": 'cat "$FAKE_NCCL_OUT"',
    "stream": 'cat "$FAKE_STREAM_OUT"',
    "scontrol": 'echo "$*" >> "$FAKE_SCONTROL_LOG"',
    # `sinfo -n NODE -O StateComplete|,Gres|,Reason|`: this node only (one line per partition; the first is read)
    "sinfo": 'echo "$*" >> "$FAKE_SINFO_LOG"; echo "$FAKE_SINFO_SHOW"; echo "$FAKE_SINFO_SHOW"',
}
Runner = Callable[..., "Result"]
GPU_NODE = "NodeName=gpu-p4d-1 Arch=x86_64 Gres=gpu:a100:8 NodeAddr=127.0.0.5 State=IDLE+CLOUD Weight=1"


def sinfo_line(show: str) -> str:
    """What `sinfo -O StateComplete:120|,Gres:200|,Reason:400|` prints for a node `scontrol -o show node` shows as
    `show` (fields padded to their widths; sinfo writes state flags in lower case and `none` for no reason)."""
    fields = dict(t.partition("=")[::2] for t in show.partition(" Reason=")[0].split() if "=" in t)
    reason = show.partition(" Reason=")[2] or "none"
    return f"{fields.get('State', '').lower():<120}|{fields.get('Gres', '(null)'):<200}|{reason:<400}|"


@dataclass
class Result:
    code: int
    out: str
    scontrol: list[str]


@pytest.fixture
def run_check(tmp_path: Path) -> Runner:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name, body in FAKES.items():
        (bin_dir / name).write_text(f"#!/bin/sh\n{body}\n")
        (bin_dir / name).chmod(0o755)
    log = tmp_path / "scontrol.log"

    def run(config: str, nvsmi: str = "healthy-p4d-8xA100.csv", rc: int = 0, show: str = GPU_NODE,
            dmesg: str | None = None, pgrep_rc: int = 0, args: tuple[str, ...] = (),
            nccl: str = "all_reduce_perf-p4d-healthy.txt", stream: str = "stream-healthy.txt",
            like_slurmd: bool = False) -> Result:  # fmt: skip
        conf = tmp_path / "healthcheck.conf"
        conf.write_text(config)
        env = {
            "PATH": f"{bin_dir}:{os.environ['PATH']}",
            "ELASTIC_SLURM_HEALTH_CONF": str(conf),
            "SLURMD_NODENAME": "gpu-p4d-1",
            "FAKE_NVSMI_OUT": str(FIXTURES / nvsmi),
            "FAKE_NVSMI_RC": str(rc),
            "FAKE_DMESG": str(FIXTURES / dmesg) if dmesg else "",
            "FAKE_PGREP_RC": str(pgrep_rc),
            "FAKE_SINFO_SHOW": sinfo_line(show),
            "FAKE_SINFO_LOG": str(tmp_path / "sinfo.log"),
            "FAKE_SCONTROL_LOG": str(log),
            "FAKE_NCCL_OUT": str(FIXTURES / nccl),
            "FAKE_STREAM_OUT": str(FIXTURES / stream),
        }
        if like_slurmd:  # slurmd passes no PATH: the config's EXTRA_PATH finds the fakes
            conf.write_text(config + f"EXTRA_PATH={bin_dir}\n")
            del env["PATH"]
        log.write_text("")
        done = subprocess.run([sys.executable, str(SCRIPT), *args], env=env, capture_output=True, text=True, timeout=60)
        return Result(done.returncode, done.stdout + done.stderr, log.read_text().splitlines())

    return run


BASE = "SHARED_PATHS=/dev/shm\nDISK_PATHS=/dev/shm\nMIN_FREE_MIB=1\n"


def test_healthy_gpu_node_passes_and_is_not_drained(run_check: Runner) -> None:
    result = run_check(BASE)
    assert result.code == 0 and "healthy" in result.out and result.scontrol == []


def test_gpu_count_comes_from_slurm_gres_when_auto(run_check: Runner) -> None:
    show = GPU_NODE.replace("gpu:a100:8", "gpu:t4:1")
    assert run_check(BASE, nvsmi="healthy-g4dn-1xT4-ecc-na.csv", show=show).code == 0


def test_cpu_node_skips_gpu_checks(run_check: Runner) -> None:
    show = GPU_NODE.replace("Gres=gpu:a100:8", "Gres=(null)")
    assert run_check(BASE, nvsmi="failing-driver-not-loaded.txt", rc=9, show=show).code == 0


@pytest.mark.parametrize(
    ("fixture", "rc", "dmesg", "expected"),
    [
        ("failing-p4d-7of8.csv", 0, None, "(Health:gpu) 7 of 8 GPUs visible"),
        ("failing-p4d-ecc-uncorrected.csv", 0, None, "(Health:gpu) GPU 3 (NVIDIA A100-SXM4-40GB, 00000000:20:1D.0)"),
        ("failing-driver-not-loaded.txt", 9, None, "(Health:gpu) nvidia-smi failed (exit 9)"),
        ("failing-p4d-gpu-lost.txt", 15, None, "(Health:gpu) Unable to determine the device handle"),
        ("healthy-p4d-8xA100.csv", 0, "dmesg-xid79.txt", "(Health:gpu) Xid 79 on PCI 0000:90:1d"),
    ],
)
def test_failing_gpu_drains_the_node_with_a_health_reason(
    run_check: Runner, fixture: str, rc: int, dmesg: str | None, expected: str
) -> None:
    result = run_check(BASE, nvsmi=fixture, rc=rc, dmesg=dmesg)
    assert result.code == 1
    assert len(result.scontrol) == 1
    assert result.scontrol[0].startswith("update nodename=gpu-p4d-1 state=DRAIN reason=" + expected)


def test_application_xid_is_not_a_hardware_failure(run_check: Runner) -> None:
    assert run_check(BASE, dmesg="dmesg-xid13-app-error.txt").code == 0


def test_slurmd_not_running_is_unhealthy(run_check: Runner) -> None:
    result = run_check(BASE, pgrep_rc=1)
    assert result.code == 1 and "reason=(Health:slurmd) slurmd is not running" in result.scontrol[0]


def test_shared_storage_not_mounted_is_unhealthy(run_check: Runner, tmp_path: Path) -> None:
    result = run_check(f"SHARED_PATHS={tmp_path}\nDISK_PATHS=/dev/shm\nMIN_FREE_MIB=1\n")
    assert result.code == 1 and f"(Health:storage) {tmp_path} is not mounted" in result.scontrol[0]


def test_full_disk_is_unhealthy(run_check: Runner) -> None:
    result = run_check("SHARED_PATHS=/dev/shm\nDISK_PATHS=/dev/shm\nMIN_FREE_MIB=999999999\n")
    assert result.code == 1 and "(Health:disk) /dev/shm has" in result.scontrol[0]


def test_node_drained_by_an_administrator_keeps_their_reason(run_check: Runner) -> None:
    show = (
        GPU_NODE.replace("State=IDLE+CLOUD", "State=IDLE+CLOUD+DRAIN")
        + " Reason=bios update [root@2026-11-22T01:00:00]"
    )
    result = run_check(BASE, nvsmi="failing-p4d-7of8.csv", show=show)
    assert result.code == 1 and result.scontrol == []


def test_dry_run_reports_without_draining(run_check: Runner) -> None:
    result = run_check(BASE, nvsmi="failing-p4d-7of8.csv", args=("--dry-run",))
    assert result.code == 1 and "UNHEALTHY: (Health:gpu)" in result.out and result.scontrol == []


def test_bad_configuration_is_a_one_line_error(run_check: Runner) -> None:
    result = run_check("MIN_FREE_MIB=lots\n")
    assert result.code == 2 and result.out.strip().count("\n") == 0 and "MIN_FREE_MIB" in result.out


def test_long_check_passes_when_nccl_bus_bandwidth_meets_the_threshold(run_check: Runner) -> None:
    result = run_check("NCCL_MIN_BUSBW_GBPS=200\n", args=("--long",))
    assert result.code == 0 and "229.71 GB/s" in result.out and result.scontrol == []


@pytest.mark.parametrize(
    ("fixture", "expected"),
    [
        ("all_reduce_perf-p4d-slow.txt", "(Health:nccl) all_reduce bus bandwidth 61.4 GB/s below 200 GB/s"),
        ("all_reduce_perf-p4d-wrong.txt", "(Health:nccl) all_reduce_perf found 12 wrong values"),
        ("failing-driver-not-loaded.txt", "(Health:nccl) all_reduce_perf failed"),
    ],
)
def test_long_check_drains_a_gpu_node_below_the_nccl_threshold(run_check: Runner, fixture: str, expected: str) -> None:
    result = run_check("NCCL_MIN_BUSBW_GBPS=200\n", args=("--long",), nccl=fixture)
    assert result.code == 1 and expected in result.scontrol[0]


def test_long_check_measures_memory_bandwidth_on_cpu_nodes(run_check: Runner) -> None:
    cpu = GPU_NODE.replace("Gres=gpu:a100:8", "Gres=(null)")
    assert run_check("MIN_STREAM_MBPS=20000\n", args=("--long",), show=cpu).code == 0
    slow = run_check("MIN_STREAM_MBPS=40000\n", args=("--long",), show=cpu)
    assert (
        slow.code == 1 and "(Health:stream) memory bandwidth (Triad) 31022.9 MB/s below 40000 MB/s" in slow.scontrol[0]
    )


def test_long_check_without_thresholds_is_skipped(run_check: Runner) -> None:
    result = run_check("", args=("--long",), nccl="all_reduce_perf-p4d-slow.txt")
    assert result.code == 0 and "skipped" in result.out


def test_runs_with_the_bare_environment_slurmd_gives_it(run_check: Runner) -> None:
    result = run_check(BASE, nvsmi="failing-p4d-7of8.csv", like_slurmd=True)
    assert result.code == 1 and "(Health:gpu) 7 of 8 GPUs visible" in result.scontrol[0]


def test_it_asks_slurm_about_its_own_node_only(run_check: Runner, tmp_path: Path) -> None:
    result = run_check(BASE)
    assert result.code == 0, result.out
    asked = (tmp_path / "sinfo.log").read_text().splitlines()
    assert asked and all(" -n gpu-p4d-1 " in f" {line} " for line in asked)  # never the whole node table
    assert not any(line.startswith("show") for line in result.scontrol)
