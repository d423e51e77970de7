"""Boot watch: one process on the controller follows every waiting PrologSlurmctld's job and nodes, and wakes it.

PrologSlurmctld (assets/slurm/prolog-wait-for-boot.sh, rendered when `slurm.early_start` is on) holds a job on
freshly resumed nodes until they are up, so that slurmctld starts it at once instead of at its next 30 s pass. With
one prolog per job each asking Slurm about its nodes and its job, 10,000 booting single-node jobs would be 10,000
processes polling slurmctld. Instead each prolog makes the FIFO `<dir>/wait/<job id>.fifo`, writes its job's hostlist
to `<dir>/wait/<job id>` (once) and blocks reading the FIFO (no RPC, no process); this one process writes `up` into
the FIFO once none of the job's nodes is powered down or powering up (at its next round for a job on warm nodes), and
`stop` once the job is no longer CONFIGURING (cancelled, requeued because a node failed, ...).

What it asks Slurm, whatever the number of waiting jobs:
- nodes: each waited node is looked at on its own schedule: at once, then every twentieth of the time it has been
  waited for, between MIN_GAP and MAX_GAP seconds (a 2 s boot is seen within ~0.15 s, a 60 s EC2 boot within 1 s).
  A round with at most SINGLE_LIMIT nodes due asks about each (`sinfo -n NODE`: a single-node RPC); a bigger round
  reads the whole node table once, at most every `wide_gap(waited nodes)` seconds: 0.5 s for a few hundred nodes,
  5 s for 10,000 (the read costs slurmctld in proportion to the table, so its rate falls as the wait grows);
- jobs: every JOB_GAP seconds while any job waits, one `squeue --only-job-state -t CONFIGURING` (Slurm's light
  job-state RPC; plain `squeue` where a release lacks it) for all of them.
The wait directory is listed again only when its mtime changes (or every RESCAN_GAP seconds). A FIFO nobody reads any
more (its prolog is gone) is removed with its wait file at the next job check. The heartbeat `<dir>/heartbeat` holds
an epoch second, rewritten every HEARTBEAT_GAP by the rounds and by a thread of its own while rounds keep starting
(a slow round under load is not a dead watch): a prolog that sees it go stale asks Slurm itself.

    python -m slurm_plugin.bootwatch --manifest /etc/elastic-slurm/manifest.json --dir /run/elastic-slurm-bootwatch

Its unit is assets/systemd/slurm-bootwatch.service (the controllers' boot enables it before slurmctld starts).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from slurm_plugin.hostlists import expand

INTERVAL = 0.1  # between rounds
MIN_GAP, MAX_GAP = 0.1, 1.0  # between two looks at one waited node: a twentieth of its wait so far, within these
SINGLE_LIMIT = 8  # up to this many nodes due in a round: one single-node question each; above: the whole table once
WIDE_MIN, WIDE_MAX = 0.5, 5.0  # between two whole-table reads: waited nodes / WIDE_RATE seconds, within these
WIDE_RATE = 2000.0
JOB_GAP = 5.0  # between two looks at which waiting jobs are still CONFIGURING
RESCAN_GAP = 5.0  # the wait directory is listed again at least this often (a coarse mtime may hide a change)
HEARTBEAT_GAP = 1.0
STUCK_AFTER = 90.0  # no round started for this long: the heartbeat stops (a round's Slurm calls time out at 20 s)
DEFAULT_DIR = "/run/elastic-slurm-bootwatch"
FIFO = ".fifo"
BOOTING = ("powered_down", "powering_up")
UP, STOP = "up", "stop"

Query = Callable[[Sequence[str]], dict[str, str]]  # node names -> {node: lower-case StateComplete}
JobQuery = Callable[[], set[str] | None]  # the ids of the CONFIGURING jobs; None when Slurm did not answer


def booting(state: str) -> bool:
    """True while a node is powered down or powering up (or unknown: an empty state)."""
    return not state or any(flag in state.split("+") for flag in BOOTING)


def wide_gap(waited: int) -> float:
    """Seconds between two whole-table reads while `waited` nodes are waited for."""
    return min(WIDE_MAX, max(WIDE_MIN, waited / WIDE_RATE))


def jobs_up(waits: Mapping[str, Sequence[str]], states: Mapping[str, str]) -> list[str]:
    """The waiting jobs none of whose nodes is still booting."""
    return sorted(job for job, nodes in waits.items() if not any(booting(states.get(n, "")) for n in nodes))


def parse_states(text: str) -> dict[str, str]:
    """`sinfo -h -N -O NodeList:..,StateComplete:..` lines -> {node: lower-case state} (a node in several partitions
    is listed once per partition, with the same state)."""
    states: dict[str, str] = {}
    for line in text.splitlines():
        fields = line.split()
        if len(fields) >= 2:
            states[fields[0]] = fields[1].lower()
    return states


def parse_job_ids(text: str) -> set[str]:
    """`squeue -h -o %A` lines -> job ids (anything else on a line is ignored)."""
    return {line.split()[0] for line in text.splitlines() if line.split() and line.split()[0].isdigit()}


def signal(directory: Path, job: str, word: str) -> bool:
    """Write `word` into the job's FIFO (never blocks); False when no prolog reads it any more (or it is gone).
    An empty word only checks that a reader is there."""
    try:
        fd = os.open(directory / "wait" / f"{job}{FIFO}", os.O_WRONLY | os.O_NONBLOCK)
    except OSError:  # ENXIO: no reader; ENOENT: gone; EACCES (a FIFO not the watch's) or any other: no reader either
        return False  # the caller forgets the job: one bad FIFO never stops the round for every other job
    try:
        if word:
            os.write(fd, f"{word}\n".encode())
    except BlockingIOError:  # a full pipe: the prolog has words to read already
        pass
    except OSError:  # EPIPE: the prolog ended between the open and the write
        return False
    finally:
        os.close(fd)
    return True


def forget(directory: Path, job: str) -> None:
    """Remove a job's wait file and FIFO (its prolog is gone)."""
    for name in (job, f"{job}{FIFO}"):
        (directory / "wait" / name).unlink(missing_ok=True)


def _nodes(text: str) -> list[str]:
    """A wait file's node names: hostlists (`cpu-a-[1-4]`, as the prolog writes its job's), one a line."""
    return [node for line in text.split() for node in expand(line)]


def _stamp(path: str | Path) -> tuple[int, int] | None:
    """A wait file's identity: inode and mtime (None when it is gone)."""
    try:
        info = os.stat(path)
    except OSError:
        return None
    return info.st_ino, info.st_mtime_ns


@dataclass
class Schedule:
    """When each waited node is looked at next (monotonic seconds), and since when it is waited for."""

    since: dict[str, float] = field(default_factory=dict)
    next_look: dict[str, float] = field(default_factory=dict)

    def due(self, nodes: Iterable[str], now: float) -> list[str]:
        """The nodes to look at now (new ones at once); forgets nodes no longer waited for."""
        wanted = set(nodes)
        for gone in set(self.since) - wanted:
            del self.since[gone]
            self.next_look.pop(gone, None)
        for node in wanted - set(self.since):
            self.since[node] = now
            self.next_look[node] = now
        return sorted(n for n in wanted if self.next_look[n] <= now)

    def looked(self, nodes: Iterable[str], now: float) -> None:
        for node in nodes:
            gap = (now - self.since.get(node, now)) / 20
            self.next_look[node] = now + min(MAX_GAP, max(MIN_GAP, gap))


@dataclass
class Round:
    """What one round did: jobs woken (up), jobs told to stop, nodes asked about, whether the jobs were looked at."""

    up: list[str] = field(default_factory=list)
    stopped: list[str] = field(default_factory=list)
    asked: int = 0
    jobs_checked: bool = False


@dataclass
class Watch:
    """The boot watch's memory between rounds: the waiting jobs and their nodes, each node's schedule and state."""

    waits: dict[str, tuple[str, ...]] = field(default_factory=dict)
    # job -> (inode, mtime) of the wait file it was woken or stopped for: that file stays until its prolog removes it;
    # a new one under the same id (a requeued job waits again, seconds later at the earliest) is a new wait
    woken: dict[str, tuple[int, int]] = field(default_factory=dict)
    schedule: Schedule = field(default_factory=Schedule)
    states: dict[str, str] = field(default_factory=dict)
    dir_mtime: int = -1
    last_scan: float = float("-inf")
    last_wide: float = float("-inf")
    last_jobs: float = float("-inf")
    last_beat: float = float("-inf")

    def scan(self, directory: Path, now: float) -> None:
        """Follow the wait directory: new wait files are read once, removed ones forgotten (only when it changed)."""
        wait_dir = directory / "wait"
        try:
            mtime = wait_dir.stat().st_mtime_ns
        except FileNotFoundError:
            self.waits.clear()
            return
        if mtime == self.dir_mtime and now - self.last_scan < RESCAN_GAP:
            return
        self.dir_mtime, self.last_scan = mtime, now
        present = {e.name: e.path for e in os.scandir(wait_dir) if e.name.isdigit()}
        for job in set(self.waits) - set(present):
            del self.waits[job]
        self.woken = {
            job: stamp for job, stamp in self.woken.items() if job in present and _stamp(present[job]) == stamp
        }
        for job in set(present) - set(self.waits) - set(self.woken):
            try:
                nodes = tuple(_nodes((wait_dir / job).read_text(encoding="utf-8")))
            except (OSError, ValueError):  # unreadable, or not a hostlist: not a wait this watch can follow
                continue
            if nodes:
                self.waits[job] = nodes
                for node in nodes:  # a new waiter trusts only what is seen from now on
                    self.states.pop(node, None)
                    self.schedule.next_look[node] = now

    def one_round(self, directory: Path, query: Query, jobs: JobQuery, now: float, wall: float) -> Round:
        """Look once (`now`: monotonic, `wall`: epoch seconds): heartbeat, wait files, the due nodes, and every
        JOB_GAP the jobs; wake the jobs whose nodes are all up and stop those no longer CONFIGURING."""
        done = Round()
        if now - self.last_beat >= HEARTBEAT_GAP:
            self.last_beat = now
            beat(directory, wall)
        self.scan(directory, now)
        if not self.waits:
            self.states.clear()
            self.schedule.due((), now)
            return done
        if now - self.last_jobs >= JOB_GAP:
            self.last_jobs = now
            done.jobs_checked = True
            self._check_jobs(directory, jobs, done)
        wanted = {n for nodes in self.waits.values() for n in nodes}
        due = self.schedule.due(wanted, now)
        if len(due) > SINGLE_LIMIT:
            if now - self.last_wide < wide_gap(len(wanted)):
                due = []  # the whole table was read a moment ago: they stay due for a later round
            else:
                self.last_wide = now
        if due:
            asked = sorted(wanted) if len(due) > SINGLE_LIMIT else due  # the whole table answers for every node
            answer = query(asked)
            self.states.update({n: answer.get(n, "") for n in asked})
            self.schedule.looked(asked, now)
            done.asked = len(asked)
        for node in set(self.states) - wanted:
            del self.states[node]
        for job in jobs_up(self.waits, self.states):
            self._done_with(directory, job)
            if signal(directory, job, UP):
                done.up.append(job)
            else:
                forget(directory, job)
        return done

    def _done_with(self, directory: Path, job: str) -> None:
        """Stop following a job; its wait file, until its prolog removes it, is not a new wait."""
        del self.waits[job]
        stamp = _stamp(directory / "wait" / job)
        if stamp:
            self.woken[job] = stamp

    def _check_jobs(self, directory: Path, jobs: JobQuery, done: Round) -> None:
        """Stop the waits of jobs no longer CONFIGURING; forget those whose prolog is gone."""
        configuring = jobs()
        for job in sorted(self.waits):
            if configuring is not None and job not in configuring:
                self._done_with(directory, job)
                if signal(directory, job, STOP):
                    done.stopped.append(job)
                else:
                    forget(directory, job)
            elif not signal(directory, job, ""):  # nobody reads its FIFO: the prolog was killed
                del self.waits[job]
                forget(directory, job)


def sinfo_query(bin_dir: str, env: Mapping[str, str], timeout: float = 20.0) -> Query:
    """A Query through `sinfo`: per node (single-node RPC) for a few nodes, else the whole table once."""
    sinfo = str(Path(bin_dir) / "sinfo")

    def run(args: list[str]) -> str:
        done = subprocess.run([sinfo, *args], env=dict(env), capture_output=True, text=True, timeout=timeout)
        return done.stdout if done.returncode == 0 else ""

    def query(nodes: Sequence[str]) -> dict[str, str]:
        fmt = ["-O", "NodeList:80,StateComplete:120"]
        if len(nodes) <= SINGLE_LIMIT:
            states: dict[str, str] = {}
            for node in nodes:
                states.update(parse_states(run(["-a", "-h", "-N", "-n", node, *fmt])))
            return states
        wanted = set(nodes)
        return {n: s for n, s in parse_states(run(["-a", "-h", "-N", *fmt])).items() if n in wanted}

    return query


def squeue_query(bin_dir: str, env: Mapping[str, str], timeout: float = 20.0) -> JobQuery:
    """A JobQuery through `squeue -t CONFIGURING`: `--only-job-state` (the light RPC), plain where refused."""
    squeue = str(Path(bin_dir) / "squeue")
    light = [True]

    def query() -> set[str] | None:
        while True:
            args = [squeue, *(["--only-job-state"] if light[0] else []), "-h", "-t", "CONFIGURING", "-o", "%A"]
            done = subprocess.run(args, env=dict(env), capture_output=True, text=True, timeout=timeout)
            if done.returncode == 0:
                return parse_job_ids(done.stdout)
            if not light[0] or "only-job-state" not in done.stderr:
                return None
            light[0] = False

    return query


def beat(directory: Path, wall: float, name: str = "heartbeat.tmp") -> None:
    """Write the heartbeat: the epoch second, replaced whole (a prolog reads it with the shell's `read`)."""
    tmp = directory / name
    tmp.write_text(f"{int(wall)}\n", encoding="utf-8")
    tmp.replace(directory / "heartbeat")


@dataclass
class Pulse:
    """The heartbeat's own thread: it beats every HEARTBEAT_GAP while rounds keep starting (the last less than
    STUCK_AFTER ago). A round slowed down by a loaded slurmctld keeps it beating, so thousands of prologs do not all
    start asking Slurm themselves and load it more; a watch stuck for good (or gone) lets it go stale."""

    directory: Path
    last_round: float = field(default_factory=time.monotonic)
    stop: threading.Event = field(default_factory=threading.Event)

    def run(self) -> None:
        while not self.stop.wait(HEARTBEAT_GAP):
            if time.monotonic() - self.last_round < STUCK_AFTER:
                try:
                    beat(self.directory, time.time(), "heartbeat.pulse.tmp")
                except OSError as exc:
                    print(f"bootwatch: heartbeat: {exc}", file=sys.stderr, flush=True)


def run_forever(directory: Path, query: Query, jobs: JobQuery, rounds: int | None = None) -> None:
    """Round after round (`rounds`: a bound, for tests); an error in one round is reported and the next one tried."""
    (directory / "wait").mkdir(parents=True, exist_ok=True)
    watch = Watch()
    pulse = Pulse(directory)
    threading.Thread(target=pulse.run, name="heartbeat", daemon=True).start()
    count = 0
    from slurm_plugin.primary import Gate  # a standby controller's watch idles: prologs run where slurmctld acts

    gate = Gate()
    while rounds is None or count < rounds:
        started = time.monotonic()
        try:
            # the heartbeat beats only while this watch answers the prologs: a watch its gate keeps idle (a standby
            # controller, or a ping that failed) leaves them to their own bounded look at Slurm instead of a wait
            if gate.speaks():
                pulse.last_round = started
                watch.one_round(directory, query, jobs, started, time.time())
        except (OSError, subprocess.SubprocessError) as exc:
            print(f"bootwatch: {exc}", file=sys.stderr, flush=True)
        count += 1
        time.sleep(max(0.0, INTERVAL - (time.monotonic() - started)))
    pulse.stop.set()


def _slurm_env(slurm_conf: str | None, base: Iterable[tuple[str, str]]) -> dict[str, str]:
    env = dict(base)
    if slurm_conf:
        env["SLURM_CONF"] = slurm_conf
    return env


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="bootwatch", description=__doc__.split("\n")[0])
    parser.add_argument("--manifest", required=True, help="the cluster's runtime manifest (Slurm's paths)")
    parser.add_argument("--dir", default=DEFAULT_DIR, type=Path, help=f"where prologs wait (default {DEFAULT_DIR})")
    args = parser.parse_args(argv)
    from slurm_plugin.manifest import ManifestError, load_manifest

    try:
        manifest = load_manifest(args.manifest)
    except ManifestError as exc:
        print(f"bootwatch: {exc}", file=sys.stderr)
        return 1
    env = _slurm_env(manifest.slurm_conf, os.environ.items())
    try:
        run_forever(args.dir, sinfo_query(manifest.slurm_bin_dir, env), squeue_query(manifest.slurm_bin_dir, env))
    except KeyboardInterrupt:
        return 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
