"""Host-side observers for bench/scale_10k.py: process CPU and memory from /proc, timed plugin wrappers, the plugin
log and event log, and `sdiag` parsing. Pure parsers plus thin /proc readers; no Slurm or AWS calls of their own.
"""

from __future__ import annotations

import contextlib
import os
import re
import shlex
import signal
import threading
import time
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
_WORKER = re.compile(r"request (\S+): (slurm-\w+) of (\d+) nodes handed to worker pid (\d+)")
_TIMES = re.compile(r"(\d+)m([\d.]+)s")  # the shell's `times`: 0m0.048000s (dash), 0m0.048s (bash)
_CTLD_STAMP = re.compile(r"^\[(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3})\] ")  # slurmctld.log, iso8601_ms
_STAMP = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d),(\d{3}) ")
# sdiag: "Mean cycle:    1234" under "Main schedule statistics" / "Backfilling stats" (microseconds)
_SDIAG_SECTIONS = {"Main schedule statistics": "main", "Backfilling stats": "backfill"}
_SDIAG_FIELDS = {
    "Last cycle": "last_us",
    "Max cycle": "max_us",
    "Mean cycle": "mean_us",
    "Total cycles": "cycles",
    "Cycles per minute": "cycles_per_minute",
    "Last queue length": "last_queue_length",
    "Total backfilled jobs (since last slurm start)": "backfilled_jobs",
    "Last depth cycle": "last_depth",
}


def cpu_seconds(pid: int, children: bool = True) -> float | None:
    """User + system CPU of `pid` (plus its waited-for children's), None when it is gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    ticks = int(fields[11]) + int(fields[12]) + ((int(fields[13]) + int(fields[14])) if children else 0)
    return ticks / CLOCK_TICKS


def rss_mib(pid: int) -> float | None:
    """Resident memory of `pid` in MiB (VmRSS), None when it is gone."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return round(int(line.split()[1]) / 1024, 1)
    except OSError:
        return None
    return None


@dataclass
class CpuSampler:
    """Samples one process's CPU until it ends or `stop()` (a detached plugin worker we cannot wait for; a spare
    worker re-executes itself after its request and lives on): the last sample is the figure (at most `interval`
    short of the truth), `ended_at` when it was first seen gone."""

    pid: int
    interval: float = 0.1
    last: float = 0.0
    ended_at: float | None = None
    _stop: threading.Event = field(default_factory=threading.Event, repr=False)
    _thread: threading.Thread | None = field(default=None, repr=False)

    def start(self) -> CpuSampler:
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.is_set():
            value = cpu_seconds(self.pid)
            if value is None or _zombie(self.pid):
                self.ended_at = time.time()
                return
            self.last = value
            self._stop.wait(self.interval)

    def stop(self) -> float:
        """Take a last sample and stop sampling; the CPU seconds."""
        value = cpu_seconds(self.pid)
        if value is not None and self.ended_at is None:
            self.last = value
        self._stop.set()
        if self._thread is not None:
            self._thread.join(1)
        return self.last


@dataclass
class Workers:
    """The plugin workers one phase handed its requests to (from the plugin log), each sampled from /proc."""

    program: str  # slurm-resume, slurm-suspend
    samplers: dict[int, CpuSampler] = field(default_factory=dict)
    requests: list[str] = field(default_factory=list)
    text: str = ""  # the plugin log since the phase began

    def update(self, log: LogTail) -> None:
        self.text = log.new_text()
        for handoff in handoffs(self.text, self.program):
            if handoff.pid not in self.samplers:
                self.samplers[handoff.pid] = CpuSampler(handoff.pid).start()
                self.requests.append(handoff.request)

    def finished(self, marker: str) -> bool:
        """Every worker ended, or logged `request <id>...<marker>` for its request (a spare lives on)."""
        if not self.samplers:
            return False
        logged = all(
            any(f"request {r}" in line and marker in line for line in self.text.splitlines()) for r in self.requests
        )
        return logged or all(s.ended_at is not None for s in self.samplers.values())

    def cpu(self) -> float:
        """Stop sampling; the workers' CPU seconds (a spare's include its start-up while it waited)."""
        return round(sum(s.stop() for s in self.samplers.values()), 3)


def _zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except (OSError, IndexError):
        return True


def stop_plugin_processes(manifest: Path) -> list[int]:
    """SIGKILL the plugin processes (workers, spare workers) started with ELASTIC_SLURM_MANIFEST=`manifest`: the
    bench's dry ResumeProgram runs leave spares waiting that the local cloud's teardown would not recognise."""
    needle = f"ELASTIC_SLURM_MANIFEST={manifest}".encode()
    killed = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            command = Path(f"/proc/{entry}/cmdline").read_bytes()
            environ = Path(f"/proc/{entry}/environ").read_bytes()
        except OSError:
            continue
        if b"slurm" in command and needle in environ.split(b"\0"):
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(entry), signal.SIGKILL)
                killed.append(int(entry))
    return killed


def timed_wrapper(wrapper: Path, timing_file: Path) -> None:
    """Make a local-cloud plugin wrapper (localcloud/cloud.py `_wrapper`) append `start end exit user sys` of each run
    to `timing_file` (epoch seconds; then the shell's `times` for its children: the program's CPU plus one `date`,
    ~1 ms): the program is run instead of exec'd, between two `date` calls (adds ~2 ms of wall)."""
    text = wrapper.read_text(encoding="utf-8")
    lines = text.rstrip("\n").splitlines()
    last = lines[-1]
    if not last.startswith("exec "):
        raise ValueError(f"{wrapper}: unexpected wrapper (last line {last!r})")
    timing = shlex.quote(str(timing_file))
    cpu = shlex.quote(f"{timing_file}.times") + ".$$"
    lines[-1:] = [
        "t0=$(date +%s.%N)",
        last.removeprefix("exec "),
        "rc=$?",
        f"times > {cpu}",  # a builtin: no fork, so it sees this shell's children (a subshell would see none)
        f'echo "$t0 $(date +%s.%N) $rc $(tail -n 1 {cpu})" >> {timing}',
        f"rm -f {cpu}",
        "exit $rc",
    ]
    timing_file.touch()
    timing_file.chmod(0o666)  # slurmctld runs it as SlurmUser
    wrapper.write_text("\n".join(lines) + "\n", encoding="utf-8")


@dataclass(frozen=True)
class TimedRun:
    """One run of a timed wrapper."""

    start: float
    end: float
    exit: int
    cpu_s: float | None  # the program's user + system CPU (None when the shell's `times` was unreadable)

    @property
    def seconds(self) -> float:
        return self.end - self.start


def minutes_seconds(text: str) -> float | None:
    match = _TIMES.fullmatch(text)
    return int(match[1]) * 60 + float(match[2]) if match else None


def read_timings(timing_file: Path) -> list[TimedRun]:
    """Every timed run so far."""
    runs = []
    for line in timing_file.read_text(encoding="utf-8").splitlines() if timing_file.exists() else []:
        parts = line.split()
        if len(parts) < 3:
            continue
        user, system = (minutes_seconds(p) for p in (parts[3:5] if len(parts) >= 5 else ("", "")))
        cpu = None if user is None or system is None else round(user + system, 3)
        runs.append(TimedRun(float(parts[0]), float(parts[1]), int(parts[2]), cpu))
    return runs


def log_time(line: str) -> float | None:
    """Epoch seconds of a plugin log line (`2026-11-26 02:41:07,123 ...`, local time), None when it has none."""
    match = _STAMP.match(line)
    if not match:
        return None
    return datetime.strptime(match[1], "%Y-%m-%d %H:%M:%S").timestamp() + int(match[2]) / 1000


@dataclass(frozen=True)
class Handoff:
    """One foreground's hand-off line in the plugin log."""

    request: str
    program: str
    nodes: int
    pid: int


def handoffs(text: str, program: str) -> list[Handoff]:
    """The `handed to worker pid N` lines of `program` (slurm-resume, slurm-suspend) in plugin log text."""
    return [
        Handoff(m[1], m[2], int(m[3]), int(m[4]))
        for m in (_WORKER.search(line) for line in text.splitlines())
        if m and m[2] == program
    ]


def lines_with(text: str, needle: str) -> list[tuple[float, str]]:
    """(time, line) of the log lines containing `needle`."""
    found = []
    for line in text.splitlines():
        if needle in line:
            at = log_time(line)
            if at is not None:
                found.append((at, line))
    return found


class LogTail:
    """What a log file gained since this object was made."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.offset = path.stat().st_size if path.exists() else 0

    def new_text(self) -> str:
        if not self.path.exists():
            return ""
        with self.path.open("rb") as handle:
            handle.seek(self.offset)
            return handle.read().decode("utf-8", "replace")


def slurmctld_marks(text: str) -> dict[str, float]:
    """Epoch seconds of slurmctld's last start in its log text: `started` (version line), `state_read` (nodes
    recovered), `primary` (serving as primary controller)."""
    marks: dict[str, float] = {}
    for line in text.splitlines():
        match = _CTLD_STAMP.match(line)
        if not match:
            continue
        at = datetime.fromisoformat(match[1]).timestamp()
        if " started on cluster " in line:
            marks = {"started": at}
        elif "Recovered state of" in line and " nodes" in line and "started" in marks:
            marks["state_read"] = at
        elif "Running as primary controller" in line and "started" in marks:
            marks.setdefault("primary", at)
    return marks


def parse_sdiag(text: str) -> dict[str, dict[str, float]]:
    """The main scheduler's and the backfill scheduler's cycle statistics from `sdiag` output (cycle times in
    microseconds): a heading starts at the line's first column, its fields are indented under it."""
    result: dict[str, dict[str, float]] = {}
    section: str | None = None
    for raw in text.splitlines():
        if not raw.strip():
            continue
        if not raw[0].isspace():
            section = next((key for title, key in _SDIAG_SECTIONS.items() if raw.startswith(title)), None)
            if section is not None:
                result[section] = {}
            continue
        name, _, value = raw.strip().partition(":")
        key = _SDIAG_FIELDS.get(name.strip())
        words = value.split()
        if section is None or key is None or not words:
            continue
        try:
            result[section][key] = float(words[0])
        except ValueError:
            continue
    return result
