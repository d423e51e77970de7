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
    env_file.write_text("\n".join([f"SLURM_BIN_DIR={bindir}", "WATCH_POLL=0.02", "DIRECT_TICKS=1", *env_lines]) + "\n")
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
    assert _node_calls(bindir) == 2  # the first look at each node of the job, then no more
    assert "job is PENDING, no longer CONFIGURING" in log.read_text()


def test_the_job_state_is_asked_only_every_job_check_seconds(bindir: Path) -> None:
    (bindir / "cpu-a-1.1").write_text(POWERING_UP)
    assert _run(PROLOG, bindir, ["WAIT_LIMIT=2", "JOB_CHECK=1"]).returncode == 0
    job_calls = sum("show job" in c for c in _calls(bindir))
    assert 1 <= job_calls <= 2 and _node_calls(bindir) > 10


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


# ---- the early launch: the job's powered-down nodes go to `$RESUME_PROGRAM --early` once, at the prolog's start
def _early_program(bindir: Path) -> Path:
    program = bindir / "resume"
    program.write_text('#!/bin/bash\necho "$*" >>"${0%/*}/early"\n')
    program.chmod(0o755)
    spares = bindir.parent / "spares"
    spares.mkdir(exist_ok=True)
    (spares / "4242.fifo").touch()  # a spare waits (the prolog only tests that such a file exists)
    return program


def _early(program: Path) -> list[str]:
    return [f"RESUME_PROGRAM={program}", f"SPARES_DIR={program.parent.parent / 'spares'}"]


def test_powered_down_nodes_are_handed_to_the_early_launch_once(bindir: Path) -> None:
    for i, text in enumerate([POWERED_DOWN, POWERING_UP, UP], start=1):
        (bindir / f"cpu-a-1.{i}").write_text(text)
    (bindir / "cpu-a-2.1").write_text(POWERING_UP)  # already being resumed: not handed again
    (bindir / "cpu-a-2.2").write_text(UP)
    program = _early_program(bindir)
    assert _run(PROLOG, bindir, ["WAIT_LIMIT=30", *_early(program)]).returncode == 0
    assert (bindir / "early").read_text().splitlines() == ["--early cpu-a-1"]


def test_no_early_launch_when_no_node_is_powered_down_or_no_program_is_set(bindir: Path) -> None:
    (bindir / "cpu-a-1.1").write_text(UP)
    program = _early_program(bindir)
    assert _run(PROLOG, bindir, ["WAIT_LIMIT=30", *_early(program)]).returncode == 0
    assert not (bindir / "early").exists()
    (bindir / "calls").unlink()
    for name in ("cpu-a-1.1", "cpu-a-2.1"):
        (bindir / name).write_text(POWERED_DOWN)
    (bindir / "cpu-a-1.2").write_text(UP)
    (bindir / "cpu-a-2.2").write_text(UP)
    assert _run(PROLOG, bindir, ["WAIT_LIMIT=30"]).returncode == 0  # no RESUME_PROGRAM: waits only
    assert not (bindir / "early").exists()


def test_a_failing_early_launch_does_not_fail_the_prolog(bindir: Path) -> None:
    (bindir / "cpu-a-1.1").write_text(POWERED_DOWN)
    (bindir / "cpu-a-1.2").write_text(UP)
    program = _early_program(bindir)
    program.write_text("#!/bin/bash\nexit 3\n")
    log = bindir.parent / "prolog.log"
    assert _run(PROLOG, bindir, ["WAIT_LIMIT=30", *_early(program), f"PROLOG_LOG={log}"]).returncode == 0
    assert "early launch of cpu-a-1 asked (exit 3)" in log.read_text()


# ---- with the boot watch (slurm_plugin/bootwatch.py): the prolog waits for up/<job id>, asking Slurm nothing more
def _watch_dir(tmp_path: Path) -> Path:
    watch = tmp_path / "watch"
    (watch / "wait").mkdir(parents=True)
    (watch / "up").mkdir()
    (watch / "heartbeat").touch()
    return watch


def _beat(watch: Path, stop: threading.Event, up_after: float | None) -> None:
    """A stand-in boot watch: beats every 0.1 s; writes up/7 `up_after` seconds after job 7 started waiting."""
    waited_since = None
    while not stop.is_set():
        (watch / "heartbeat").touch()
        if (watch / "wait" / "7").exists():
            waited_since = waited_since or time.monotonic()
            if up_after is not None and time.monotonic() - waited_since >= up_after:
                (watch / "up" / "7").touch()
        time.sleep(0.1)


def test_with_the_boot_watch_the_prolog_asks_slurm_only_its_first_look(bindir: Path, tmp_path: Path) -> None:
    (bindir / "cpu-a-1.1").write_text(POWERED_DOWN)  # it never comes up in Slurm's answers: only the watch says so
    watch = _watch_dir(tmp_path)
    stop = threading.Event()
    beat = threading.Thread(target=_beat, args=(watch, stop, 1.0))
    beat.start()
    try:
        log = bindir.parent / "prolog.log"
        env = ["WAIT_LIMIT=30", f"BOOTWATCH_DIR={watch}", "JOB_CHECK=1", f"PROLOG_LOG={log}"]
        assert _run(PROLOG, bindir, env).returncode == 0
    finally:
        stop.set()
        beat.join()
    assert _node_calls(bindir) == 2  # one look at each node of the job, none while waiting
    assert "(boot watch)" in log.read_text()
    assert os.listdir(watch / "wait") == [] and os.listdir(watch / "up") == []  # it cleans up after itself


def test_a_silent_boot_watch_makes_the_prolog_ask_slurm_itself(bindir: Path, tmp_path: Path) -> None:
    for i, text in enumerate([POWERED_DOWN, POWERING_UP, UP], start=1):
        (bindir / f"cpu-a-1.{i}").write_text(text)
    watch = _watch_dir(tmp_path)  # a heartbeat file nobody touches any more
    log = bindir.parent / "prolog.log"
    env = ["WAIT_LIMIT=30", f"BOOTWATCH_DIR={watch}", "JOB_CHECK=1", "WATCH_SILENT=1", f"PROLOG_LOG={log}"]
    assert _run(PROLOG, bindir, env).returncode == 0
    assert "boot watch silent" in log.read_text()
    assert _node_calls(bindir, "cpu-a-1") == 3  # then polled Slurm until up
    assert os.listdir(watch / "wait") == []


def test_no_early_launch_without_a_waiting_spare(bindir: Path) -> None:
    (bindir / "cpu-a-1.1").write_text(POWERED_DOWN)
    (bindir / "cpu-a-1.2").write_text(UP)
    program = _early_program(bindir)
    (bindir.parent / "spares" / "4242.fifo").unlink()  # nobody waits: no Python started for nothing
    assert _run(PROLOG, bindir, ["WAIT_LIMIT=30", *_early(program)]).returncode == 0
    assert not (bindir / "early").exists()


def test_a_big_job_is_looked_at_with_one_whole_table_question_and_launched_by_its_hostlist(bindir: Path) -> None:
    names = [f"cpu-a-{i}" for i in range(1, 11)]
    (bindir / "hostnames").write_text("\n".join(names) + "\n")
    # the whole table: the stub answers every node as NodeList StateComplete lines
    (bindir / "sinfo").write_text(
        '#!/bin/bash\necho "sinfo $*" >>"${0%/*}/calls"\n'
        + "".join(f'echo "{n} idle+cloud+powered_down"\n' for n in names)
    )
    program = _early_program(bindir)
    env = ["WAIT_LIMIT=1", *_early(program)]
    assert _run(PROLOG, bindir, env, nodelist="cpu-a-[1-10]").returncode == 0
    first = next(c for c in _calls(bindir) if c.startswith("sinfo"))
    assert "-n cpu-a-[1-10]" in first and "NodeList" in first  # one question for the ten nodes
    assert (bindir / "early").read_text().splitlines() == ["--early cpu-a-[1-10]"]
