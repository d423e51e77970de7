"""Which controller acts: the one `scontrol ping` reports as the first controller that is UP.

A cluster with `controller.count: 2` runs the cluster manager, the boot watch, the license sync and the exporter on
both controllers; only one of them may act at a time, or two managers would terminate the same orphans twice, two
license syncs race on sacctmgr and CloudWatch would add the capacity errors of both. Slurm already decides who is in
charge: the primary while its slurmctld answers, the backup once it has taken over (after SlurmctldTimeout), the
primary again after it comes back (it takes control back from the backup as it starts). `scontrol ping` lists the
controllers in SlurmctldHost order with UP or DOWN, so the first one that is UP is the acting one. (A standby backup
answers pings too: between the primary's death and the takeover, SlurmctldTimeout later, the backup already reads as
acting, and what it tries is refused by its own slurmctld ("standby mode") until it is in charge; the primary reads
as DOWN, so never two act.)

Two answers, for two kinds of work:

- `acting`: this host is the acting controller. The cluster manager and the boot watch do their work only then.
  Nothing acts while no slurmctld answers (the manager's actions change Slurm; the boot watch serves the prologs of
  the acting slurmctld).
- `speaks`: this host reports for the cluster — it is acting, or no slurmctld answers and this host is the primary
  (the first one listed), or `scontrol ping` could not tell anything (no controllers listed: scontrol missing or no
  slurm.conf, a single-machine use). The license sync and the CloudWatch publish run then: "slurmctld is down" must
  still reach CloudWatch, from one host only.

`Gate` asks `scontrol ping` at most once per `ttl` seconds (the boot watch's loop runs several rounds a second).
"""

from __future__ import annotations

import os
import re
import socket
import subprocess
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

PING_LINE = re.compile(r"\s*Slurmctld\((?:primary|backup\d*)\) at (\S+) is (UP|DOWN)\s*$")
PING_TIMEOUT = 20.0  # scontrol tries each controller in turn: MessageTimeout each
GATE_TTL = 10.0


@dataclass(frozen=True)
class Controllers:
    """`scontrol ping` read: every controller in SlurmctldHost order, and which of them answered."""

    listed: tuple[str, ...] = ()
    up: tuple[str, ...] = ()

    @property
    def acting(self) -> str | None:
        """The controller in charge: the first one that answers (primary, then backups)."""
        return next((host for host in self.listed if host in self.up), None)

    @property
    def primary(self) -> str | None:
        return self.listed[0] if self.listed else None


def short(host: str) -> str:
    """The host's first label (Slurm's names are short; a host may know its FQDN)."""
    return host.split(".", 1)[0]


def parse_ping(text: str) -> Controllers:
    """The controllers of `scontrol ping` output (other lines, e.g. the "RESTORE SLURMCTLD" banner, are skipped)."""
    listed: list[str] = []
    up: list[str] = []
    for line in text.splitlines():
        match = PING_LINE.match(line)
        if match:
            listed.append(short(match[1]))
            if match[2] == "UP":
                up.append(short(match[1]))
    return Controllers(tuple(listed), tuple(up))


def acting(ping: str, host: str) -> bool:
    """This host (`host`) is the acting controller according to `ping` (scontrol ping's output)."""
    return parse_ping(ping).acting == short(host)


def speaks(ping: str, host: str) -> bool:
    """This host reports for the cluster (see the module docstring)."""
    controllers = parse_ping(ping)
    if not controllers.listed:
        return True
    leader = controllers.acting or controllers.primary
    return leader == short(host)


def scontrol_ping(bin_dir: str | None = None, slurm_conf: str | None = None, timeout: float = PING_TIMEOUT) -> str:
    """`scontrol ping`'s output; '' when scontrol cannot be run or gives no answer in time (it exits 1 when every
    controller is DOWN, and still lists them: that output is returned)."""
    scontrol = str(Path(bin_dir) / "scontrol") if bin_dir else "scontrol"
    env = dict(os.environ)
    if slurm_conf:
        env["SLURM_CONF"] = slurm_conf
    try:
        done = subprocess.run([scontrol, "ping"], env=env, capture_output=True, text=True, timeout=timeout)
    except (OSError, subprocess.SubprocessError):
        return ""
    return done.stdout


@dataclass
class Gate:
    """`acting`/`speaks` for this host, asking `scontrol ping` at most once per `ttl` seconds."""

    ping: Callable[[], str] = scontrol_ping
    host: str = field(default_factory=socket.gethostname)
    ttl: float = GATE_TTL
    clock: Callable[[], float] = time.monotonic
    _asked: float | None = None
    _answer: str = ""

    @classmethod
    def for_slurm(cls, bin_dir: str | None, slurm_conf: str | None, host: str | None = None) -> Gate:
        """A gate asking the scontrol of `bin_dir` with `slurm_conf` (None: Slurm's default)."""
        return cls(ping=lambda: scontrol_ping(bin_dir, slurm_conf), host=host or socket.gethostname())

    def _current(self) -> str:
        now = self.clock()
        if self._asked is None or now - self._asked >= self.ttl:
            self._answer = self.ping()
            self._asked = now
        return self._answer

    def acting(self) -> bool:
        return acting(self._current(), self.host)

    def speaks(self) -> bool:
        return speaks(self._current(), self.host)

    def controllers(self) -> Controllers:
        return parse_ping(self._current())


def describe(controllers: Controllers, host: str) -> Mapping[str, str]:
    """One word per controller for logs and `local status`: acting, standby or down (this host marked)."""
    words = {}
    for name in controllers.listed:
        word = "acting" if name == controllers.acting else "standby" if name in controllers.up else "down"
        words[name] = f"{word} (this host)" if name == short(host) else word
    return words
