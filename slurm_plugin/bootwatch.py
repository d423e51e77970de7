"""Boot watch: one process on the controller tells every waiting PrologSlurmctld when its job's nodes are up.

PrologSlurmctld (assets/slurm/prolog-wait-for-boot.sh) holds a job on freshly resumed nodes until they are up, so
that slurmctld starts it at once instead of at its next 30 s pass. With one prolog per job each asking Slurm about
its nodes every fraction of a second, 10,000 booting single-node jobs would be 10,000 processes polling slurmctld for
a minute. Instead each prolog writes the nodes it waits for to `<dir>/wait/<job id>` (rewritten every few seconds
while it waits) and waits for `<dir>/up/<job id>` (a file test, no process started, no RPC); this one process writes
`up/<job id>` once none of the job's nodes is powered down or powering up.

Each waited node is looked at on its own schedule: at once, then every twentieth of the time it has been waited for,
between MIN_GAP and MAX_GAP seconds (a 2 s boot is seen within ~0.15 s, a 60 s EC2 boot within 1 s, at ~100 looks
instead of 600). A round with at most SINGLE_LIMIT nodes due asks about each (`sinfo -n NODE`: the partition table and
that one node), a bigger round reads the whole node table once (at most every WIDE_GAP seconds). Wait files not
rewritten for STALE_SECONDS (a prolog that slurmctld killed, e.g. on scancel) are removed with their up files. The heartbeat `<dir>/heartbeat` is touched at
the start of every round: a prolog that sees it go silent asks Slurm itself.

    python -m slurm_plugin.bootwatch --manifest /etc/elastic-slurm/manifest.json --dir /run/elastic-slurm-bootwatch

Its unit is assets/systemd/slurm-bootwatch.service (the controllers' boot enables it before slurmctld starts).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

INTERVAL = 0.1  # between rounds
MIN_GAP, MAX_GAP = 0.1, 1.0  # between two looks at one waited node: a twentieth of its wait so far, within these
SINGLE_LIMIT = 8  # up to this many nodes due in a round: one single-node question each; above: the whole table once
WIDE_GAP = 0.5  # at least this long between two whole-table reads
STALE_SECONDS = 30.0  # a wait file not rewritten for this long belongs to a prolog that is gone
DEFAULT_DIR = "/run/elastic-slurm-bootwatch"
BOOTING = ("powered_down", "powering_up")

Query = Callable[[Sequence[str]], dict[str, str]]  # node names -> {node: lower-case StateComplete}


def booting(state: str) -> bool:
    """True while a node is powered down or powering up (or unknown: an empty state)."""
    return not state or any(flag in state.split("+") for flag in BOOTING)


def read_waits(directory: Path, now: float) -> dict[str, list[str]]:
    """Every waiting job -> the nodes its prolog waits for; wait files older than STALE_SECONDS are removed."""
    waits: dict[str, list[str]] = {}
    try:
        entries = list(os.scandir(directory / "wait"))
    except FileNotFoundError:
        return waits
    for entry in entries:
        if not entry.name.isdigit():
            continue
        try:
            if now - entry.stat().st_mtime > STALE_SECONDS:
                Path(entry.path).unlink(missing_ok=True)
                continue
            nodes = Path(entry.path).read_text(encoding="utf-8").split()
        except OSError:
            continue
        if nodes:
            waits[entry.name] = nodes
    return waits


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


@dataclass
class Watch:
    """The boot watch's memory between rounds: each node's schedule and the last state seen of each."""

    schedule: Schedule = field(default_factory=Schedule)
    states: dict[str, str] = field(default_factory=dict)
    jobs: set[str] = field(default_factory=set)  # the waiting jobs of the last round
    last_wide: float = float("-inf")  # when the whole table was last read

    def one_round(self, directory: Path, query: Query, now: float, wall: float) -> tuple[list[str], int]:
        """Look once (`now`: monotonic, `wall`: epoch seconds): touch the heartbeat, ask about the waited nodes that
        are due, write up/<job> for every waiting job whose nodes are all up, remove up files of jobs no longer
        waiting; the jobs newly up and how many nodes were asked about."""
        (directory / "heartbeat").touch()
        waits = read_waits(directory, wall)
        up_dir = directory / "up"
        up_dir.mkdir(exist_ok=True)
        done = {p.name for p in up_dir.iterdir()}
        for stale in done - set(waits):
            (up_dir / stale).unlink(missing_ok=True)
        pending = {job: nodes for job, nodes in waits.items() if job not in done}
        wanted = {n for nodes in pending.values() for n in nodes}
        for job in set(pending) - self.jobs:  # a new waiter trusts only what is seen from now on
            for node in pending[job]:
                self.states.pop(node, None)
                self.schedule.next_look[node] = now
        self.jobs = set(pending)
        due = self.schedule.due(wanted, now)
        if len(due) > SINGLE_LIMIT:
            if now - self.last_wide < WIDE_GAP:
                due = []  # the whole table was read a moment ago: they stay due for a later round
            else:
                self.last_wide = now
        if due:
            asked = sorted(wanted) if len(due) > SINGLE_LIMIT else due  # the whole table answers for every node
            answer = query(asked)
            self.states.update({n: answer.get(n, "") for n in asked})
            self.schedule.looked(asked, now)
        for node in set(self.states) - wanted:
            del self.states[node]
        newly = jobs_up(pending, self.states)
        for job in newly:
            (up_dir / job).touch()
        return newly, len(due)


def run_forever(directory: Path, query: Query, rounds: int | None = None) -> None:
    """Round after round (`rounds`: a bound, for tests); an error in one round is reported and the next one tried."""
    (directory / "wait").mkdir(parents=True, exist_ok=True)
    watch = Watch()
    count = 0
    while rounds is None or count < rounds:
        started = time.monotonic()
        try:
            watch.one_round(directory, query, started, time.time())
        except (OSError, subprocess.SubprocessError) as exc:
            print(f"bootwatch: {exc}", file=sys.stderr, flush=True)
        count += 1
        time.sleep(max(0.0, INTERVAL - (time.monotonic() - started)))


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
        run_forever(args.dir, sinfo_query(manifest.slurm_bin_dir, env))
    except KeyboardInterrupt:
        return 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
