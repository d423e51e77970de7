"""assets/slurm/prolog-wait-for-boot.sh, run for real against scripted `sinfo` and `scontrol` that play node/job states.

The stub sinfo answers `sinfo -n NODE -O StateComplete` from files: `NODE.<n>` is what it prints on the n-th call for
NODE (the last one repeats). The stub scontrol expands hostlists (`show hostnames`, local in real Slurm) from the file
`hostnames` and prints `job` for `show job`. Every call is logged: each sinfo/show job is one slurmctld RPC on a real
cluster. Every run must exit 0 whatever happens (non-zero would requeue the job).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

import pytest

PROLOG = Path(__file__).parents[2] / "assets" / "slurm" / "prolog-wait-for-boot.sh"
SCONTROL = r"""#!/bin/bash
dir=${0%/*}
echo "scontrol $*" >>"$dir/calls"
if [[ $1 == show && $2 == hostnames ]]; then cat "$dir/hostnames"; exit 0; fi
if [[ $3 == job ]]; then [[ -f $dir/job ]] && cat "$dir/job"; exit 0; fi
exit 1
"""
SINFO = r"""#!/bin/bash
dir=${0%/*}
echo "sinfo $*" >>"$dir/calls"
while (($#)); do [[ $1 == -n ]] && node=$2; shift; done
n=$(grep -c -- "-n $node " "$dir/calls")
f=$dir/$node.$n
[[ -f $f ]] || f=$(ls "$dir/$node".* | sort -t. -k2 -n | tail -1)
cat "$f"
"""
POWERED_DOWN = "idle+cloud+powered_down\n"
POWERING_UP = "allocated+cloud+powering_up\n"
UP = "allocated+cloud\n"
CONFIGURING = "JobId=7 JobName=x JobState=CONFIGURING Reason=None\n"


@pytest.fixture
def bindir(tmp_path: Path) -> Path:
    bindir = tmp_path / "bin"
    bindir.mkdir()
    for name, text in (("scontrol", SCONTROL), ("sinfo", SINFO)):
        (bindir / name).write_text(text)
        (bindir / name).chmod(0o755)
    (bindir / "job").write_text(CONFIGURING)
    (bindir / "hostnames").write_text("cpu-a-1\ncpu-a-2\n")
    (bindir / "cpu-a-2.1").write_text(UP)
    return bindir


def _run(
    prolog: Path, bindir: Path, env_lines: list[str], job: bool = True, nodelist: str = "cpu-a-[1-2]"
) -> subprocess.CompletedProcess[str]:
    env_file = bindir.parent / "prolog.env"
    env_file.write_text("\n".join([f"SLURM_BIN_DIR={bindir}", "DIRECT_GAP=0.02", *env_lines]) + "\n")
    env = {"ELASTIC_SLURM_PROLOG_ENV": str(env_file)}  # like slurmctld: no PATH, no SLURM_CONF
    if job:
        env |= {"SLURM_JOB_ID": "7", "SLURM_JOB_NODELIST": nodelist}
    return subprocess.run(["/bin/bash", str(prolog)], env=env, capture_output=True, text=True, timeout=60)


def _calls(bindir: Path) -> list[str]:
    return (bindir / "calls").read_text().splitlines() if (bindir / "calls").exists() else []


def _node_calls(bindir: Path, node: str | None = None) -> int:
    return sum(c.startswith("sinfo") and (node is None or f"-n {node} " in c) for c in _calls(bindir))


def test_waits_through_powered_down_and_powering_up_then_exits_0(bindir: Path) -> None:
    for i, text in enumerate([POWERED_DOWN, POWERED_DOWN, POWERING_UP, POWERING_UP, UP], start=1):
        (bindir / f"cpu-a-1.{i}").write_text(text)
    result = _run(PROLOG, bindir, ["WAIT_LIMIT=30"])
    assert result.returncode == 0
    assert _node_calls(bindir, "cpu-a-1") == 5 and _node_calls(bindir, "cpu-a-2") == 1
    # only single-node questions (sinfo -n NODE) and no job-state question within JOB_CHECK: never the node table
    assert all(c.startswith("sinfo -a -h -N -n cpu-a-") or "show hostnames" in c for c in _calls(bindir))


def test_any_booting_node_keeps_it_waiting_and_each_up_node_is_asked_once(bindir: Path) -> None:
    (bindir / "cpu-a-1.1").write_text(UP)
    for i, text in enumerate([POWERING_UP, POWERING_UP, POWERING_UP, UP], start=1):
        (bindir / f"cpu-a-2.{i}").write_text(text)
    assert _run(PROLOG, bindir, ["WAIT_LIMIT=30"]).returncode == 0
    assert _node_calls(bindir, "cpu-a-1") == 1 and _node_calls(bindir, "cpu-a-2") == 4


def test_nodes_already_up_exit_at_once(bindir: Path) -> None:
    (bindir / "cpu-a-1.1").write_text(UP)
    assert _run(PROLOG, bindir, ["WAIT_LIMIT=30"]).returncode == 0
    assert _node_calls(bindir) == 2


def test_stops_waiting_once_the_job_is_no_longer_configuring(bindir: Path) -> None:
    (bindir / "cpu-a-1.1").write_text(POWERING_UP)
    (bindir / "job").write_text("JobId=7 JobState=PENDING Reason=BeginTime\n")
    log = bindir.parent / "prolog.log"
    assert _run(PROLOG, bindir, ["WAIT_LIMIT=30", "JOB_CHECK=0", f"PROLOG_LOG={log}"]).returncode == 0
    assert _node_calls(bindir) == 0  # its job's state first: no node asked about
    assert "job is PENDING, no longer CONFIGURING" in log.read_text()


def test_the_job_state_is_asked_only_every_job_check_seconds(bindir: Path) -> None:
    (bindir / "cpu-a-1.1").write_text(POWERING_UP)
    assert _run(PROLOG, bindir, ["WAIT_LIMIT=2", "JOB_CHECK=1"]).returncode == 0
    job_calls = sum("show job" in c for c in _calls(bindir))
    assert 1 <= job_calls <= 2 and _node_calls(bindir) > 3  # nodes every DIRECT_GAP, its job every JOB_CHECK


def test_gives_up_after_wait_limit_and_still_exits_0(bindir: Path) -> None:
    (bindir / "cpu-a-1.1").write_text(POWERING_UP)
    log = bindir.parent / "prolog.log"
    assert _run(PROLOG, bindir, ["WAIT_LIMIT=1", f"PROLOG_LOG={log}"]).returncode == 0
    assert "gave up after 1 s" in log.read_text()


def test_missing_scontrol_exits_0(tmp_path: Path) -> None:
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    assert _run(PROLOG, empty, ["WAIT_LIMIT=30"]).returncode == 0


def test_without_job_environment_exits_0(bindir: Path) -> None:
    (bindir / "cpu-a-1.1").write_text(POWERING_UP)
    assert _run(PROLOG, bindir, ["WAIT_LIMIT=30"], job=False).returncode == 0
    assert _node_calls(bindir) == 0


def test_reads_env_file_beside_the_script_and_exports_slurm_conf(bindir: Path, tmp_path: Path) -> None:
    installed = tmp_path / "installed"
    installed.mkdir()
    prolog = installed / PROLOG.name
    shutil.copy(PROLOG, prolog)
    (bindir / "sinfo").write_text('#!/bin/bash\necho "$SLURM_CONF" >>"${0%/*}/conf"\necho allocated+cloud\n')
    (installed / "prolog-wait-for-boot.env").write_text(
        f"SLURM_BIN_DIR={bindir}\nSLURM_CONF=/lc/etc/slurm.conf\nWAIT_LIMIT=30\n"
    )
    env = {"SLURM_JOB_ID": "7", "SLURM_JOB_NODELIST": "cpu-a-1"}
    result = subprocess.run(["/bin/bash", str(prolog)], env=env, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0
    assert (bindir / "conf").read_text().splitlines()[0] == "/lc/etc/slurm.conf"


def test_prolog_is_executable() -> None:
    assert os.access(PROLOG, os.X_OK)


# ---- no launch of its own: ResumeProgram is the one launch path
def test_the_prolog_never_launches_even_with_a_waiting_spare(bindir: Path) -> None:
    program = bindir / "resume"
    program.write_text('#!/bin/bash\necho "$*" >>"${0%/*}/early"\n')
    program.chmod(0o755)
    (bindir.parent / "spares").mkdir()
    (bindir.parent / "spares" / "4242.fifo").touch()  # a spare waits: the old prolog handed it the nodes
    for i, text in enumerate([POWERED_DOWN, UP], start=1):
        (bindir / f"cpu-a-1.{i}").write_text(text)
    env = ["WAIT_LIMIT=30", f"RESUME_PROGRAM={program}", f"SPARES_DIR={bindir.parent / 'spares'}"]
    assert _run(PROLOG, bindir, env).returncode == 0
    assert not (bindir / "early").exists()


# ---- with the boot watch (slurm_plugin/bootwatch.py): the prolog blocks on its FIFO, asking Slurm nothing more
def _watch_dir(tmp_path: Path) -> Path:
    watch = tmp_path / "watch"
    (watch / "wait").mkdir(parents=True)
    (watch / "heartbeat").write_text(f"{int(time.time())}\n")
    return watch


def _stand_in(watch: Path, stop: threading.Event, word: str | None, after: float, beat: float | None = 0.0) -> None:
    """A stand-in boot watch: writes its heartbeat (epoch seconds) every 0.1 s from `beat` seconds on (None: never);
    writes `word` into job 7's FIFO `after` seconds after job 7 started waiting (its wait file appeared)."""
    waited_since = None
    started = time.monotonic()
    while not stop.is_set():
        if beat is not None and time.monotonic() - started >= beat:  # replaced whole, as the boot watch does
            (watch / "heartbeat.tmp").write_text(f"{int(time.time())}\n")
            (watch / "heartbeat.tmp").replace(watch / "heartbeat")
        if word and (watch / "wait" / "7").exists():
            waited_since = waited_since or time.monotonic()
            if time.monotonic() - waited_since >= after:
                fd = os.open(watch / "wait" / "7.fifo", os.O_WRONLY | os.O_NONBLOCK)
                os.write(fd, f"{word}\n".encode())
                os.close(fd)
                word = None
        time.sleep(0.1)


def _run_watched(
    bindir: Path, watch: Path, env: list[str], word: str | None, after: float, beat: float | None = 0.0
) -> str:
    """Run the prolog beside a stand-in boot watch; its log."""
    stop = threading.Event()
    thread = threading.Thread(target=_stand_in, args=(watch, stop, word, after, beat))
    thread.start()
    log = bindir.parent / "prolog.log"
    try:
        assert _run(PROLOG, bindir, [f"BOOTWATCH_DIR={watch}", f"PROLOG_LOG={log}", *env]).returncode == 0
    finally:
        stop.set()
        thread.join()
    return log.read_text()


def test_with_the_boot_watch_the_prolog_asks_slurm_nothing(bindir: Path, tmp_path: Path) -> None:
    (bindir / "cpu-a-1.1").write_text(POWERED_DOWN)  # it never comes up in Slurm's answers: only the watch says so
    watch = _watch_dir(tmp_path)
    log = _run_watched(bindir, watch, ["WAIT_LIMIT=30", "JOB_CHECK=0", "WATCH_SLICE=1"], "up", 2.5)
    assert _calls(bindir) == []  # no look at the nodes, no job-state polling: the boot watch follows both
    assert "(boot watch)" in log
    assert os.listdir(watch / "wait") == []  # it cleans up its FIFO and wait file
    # what the boot watch read: the booting node only, one name a line
    assert "cpu-a-1 up after" not in log


def test_the_wait_file_names_the_job_s_nodes_and_the_fifo_is_there_first(bindir: Path, tmp_path: Path) -> None:
    (bindir / "cpu-a-1.1").write_text(POWERING_UP)
    watch = _watch_dir(tmp_path)
    seen: dict[str, object] = {}

    def look() -> None:
        while not (watch / "wait" / "7").exists():
            time.sleep(0.01)
        seen["nodes"] = (watch / "wait" / "7").read_text().split()
        seen["fifo"] = (watch / "wait" / "7.fifo").is_fifo()

    thread = threading.Thread(target=look)
    thread.start()
    _run_watched(bindir, watch, ["WAIT_LIMIT=30"], "up", 0.3)
    thread.join()
    assert seen == {"nodes": ["cpu-a-[1-2]"], "fifo": True}  # the job's hostlist: the boot watch expands it


def test_a_stop_word_ends_the_wait_at_once(bindir: Path, tmp_path: Path) -> None:
    (bindir / "cpu-a-1.1").write_text(POWERED_DOWN)
    watch = _watch_dir(tmp_path)
    started = time.monotonic()
    log = _run_watched(bindir, watch, ["WAIT_LIMIT=30"], "stop", 0.2)
    assert time.monotonic() - started < 10
    assert "no longer CONFIGURING" in log and "(boot watch)" in log
    assert _calls(bindir) == []


def test_a_live_boot_watch_that_never_answers_does_not_hold_the_prolog_past_wait_limit(
    bindir: Path, tmp_path: Path
) -> None:
    (bindir / "cpu-a-1.1").write_text(POWERED_DOWN)
    watch = _watch_dir(tmp_path)
    started = time.monotonic()
    log = _run_watched(bindir, watch, ["WAIT_LIMIT=2", "WATCH_SLICE=120"], None, 0)
    # the slice is cut to what is left of WAIT_LIMIT: far less than one 120 s slice, even on a loaded machine
    assert time.monotonic() - started < 60
    assert "gave up after 2 s" in log and _calls(bindir) == []


def test_a_silent_boot_watch_makes_the_prolog_ask_slurm_itself(bindir: Path, tmp_path: Path) -> None:
    for i, text in enumerate([POWERED_DOWN, POWERING_UP, UP], start=1):
        (bindir / f"cpu-a-1.{i}").write_text(text)
    watch = _watch_dir(tmp_path)
    (watch / "heartbeat").write_text(f"{int(time.time()) - 60}\n")  # nobody beats any more
    env = ["WAIT_LIMIT=30", "JOB_CHECK=1", "WATCH_STALE=5"]
    log = _run_watched(bindir, watch, env, None, 0, beat=None)
    assert "boot watch silent" in log
    assert _node_calls(bindir, "cpu-a-1") == 3  # then polled Slurm until up
    assert os.listdir(watch / "wait") == []


def test_a_heartbeat_that_comes_back_ends_the_prolog_s_own_polling(bindir: Path, tmp_path: Path) -> None:
    (bindir / "cpu-a-1.1").write_text(POWERED_DOWN)
    watch = _watch_dir(tmp_path)
    (watch / "heartbeat").write_text(f"{int(time.time()) - 60}\n")  # stale when it starts; the stand-in beats again
    log = _run_watched(bindir, watch, ["WAIT_LIMIT=30", "DIRECT_GAP=0.3", "WATCH_STALE=5"], "up", 3.0, beat=1.0)
    assert "boot watch silent" in log and "boot watch back" in log and "(boot watch)" in log
    assert 2 <= _node_calls(bindir) <= 8  # a few looks of its own (every DIRECT_GAP) before the heartbeat came back


def test_an_old_fifo_of_a_requeued_job_does_not_wake_the_new_wait(bindir: Path, tmp_path: Path) -> None:
    (bindir / "cpu-a-1.1").write_text(POWERED_DOWN)
    watch = _watch_dir(tmp_path)
    (watch / "wait" / "7.fifo").write_text("up\n")  # left by an earlier run of job 7 (a plain file here)
    log = _run_watched(bindir, watch, ["WAIT_LIMIT=2"], None, 0)
    assert "gave up after 2 s" in log


# ---- clusters[].slurm.early_start: the PrologSlurmctld line, and nothing else, follows it
def _config(slurm: dict[str, Any]) -> Any:
    from cluster_config import parse

    cluster = {
        "name": "small",
        "region": "us-east-1",
        "storage": {"efs": {}},
        "network": {"mode": "create", "availability_zones": ["us-east-1a"]},
        "partitions": [{"name": "cpu", "pools": [{"name": "c7i", "instance_types": ["c7i.large"], "max_nodes": 4}]}],
        "slurm": slurm,
    }
    return parse({"clusters": [cluster]}, "small.yaml")


def _render(slurm: dict[str, Any]) -> Any:
    from slurm_plugin.render.cluster import render_cluster
    from slurm_plugin.render.manifest import placeholder_infra
    from tests.unit.cache_fixture import fixture_cache

    config = _config(slurm)
    return render_cluster(config, "small", placeholder_infra(config.cluster("small")), fixture_cache())


def test_early_start_off_renders_no_prolog_and_changes_nothing_else() -> None:
    on, off = _render({}), _render({"early_start": False})
    assert "PrologSlurmctld=/opt/elastic-slurm/bin/prolog-wait-for-boot.sh\n" in on.slurm_conf
    assert "PrologSlurmctld" not in off.slurm_conf
    removed = [line for line in on.slurm_conf.splitlines() if line not in off.slurm_conf.splitlines()]
    assert len(removed) == 2 and removed[1].startswith("PrologSlurmctld=")  # its comment and its line
    assert off.manifest == on.manifest and off.prolog_env == on.prolog_env


def test_early_start_is_on_by_default_and_must_be_a_boolean() -> None:
    from cluster_config.loader import ConfigInvalid

    assert _config({}).clusters[0].slurm.early_start is True
    for bad in ("sometimes", 2, None, [True]):
        with pytest.raises(ConfigInvalid, match="early_start"):
            _config({"early_start": bad})
