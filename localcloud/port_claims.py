"""Loopback ports claimed across processes, so that two local clouds starting at once never pick the same one.

A local cloud picks its daemons' ports (`free_port`, `port_block`) by finding them unbound, but its daemons bind them
seconds later: slurmctld after the controller's boot, each slurmd when its node first boots. Another cloud starting
meanwhile (`make test` runs several at once) saw the same ports free and took one, and one slurmctld died with
"Address already in use". A claim is a file named after the port in CLAIMS_DIR holding the claiming process's PID,
made under one lock: a port is picked only when it is unbound AND unclaimed, or claimed by a process that is gone (a
test worker keeps its claims for its life; `release` gives a torn-down cloud's ports back earlier). A port this
process already claimed is refused too: one cloud picks all its ports before its daemons bind any, and a second pick
of the same still-unbound port gave two of its daemons one port (prometheus: "bind: address already in use").
"""

from __future__ import annotations

import fcntl
import os
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

CLAIMS_DIR = Path("/run/elastic-slurm-port-claims")  # tmpfs: no claim outlives a reboot


@contextmanager
def _locked(directory: Path | None) -> Iterator[Path]:
    directory = directory or CLAIMS_DIR
    directory.mkdir(parents=True, exist_ok=True)
    with open(directory / ".lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield directory


def _holder(path: Path) -> int | None:
    """The PID that holds the claim, if that process still runs."""
    try:
        pid = int(path.read_text().strip())
        os.kill(pid, 0)
    except (OSError, ValueError):
        return None
    return pid


def claim(ports: Iterable[int], directory: Path | None = None) -> bool:
    """Claim every port of `ports` for this process, or none of them (False: one is held by a live process, this one
    included)."""
    wanted = list(ports)
    with _locked(directory) as directory:
        if any(_holder(directory / str(port)) is not None for port in wanted):
            return False
        for port in wanted:
            (directory / str(port)).write_text(f"{os.getpid()}\n")
    return True


def release(ports: Iterable[int], directory: Path | None = None) -> None:
    """Give back this process's claims on `ports` (another process's claim is left alone)."""
    with _locked(directory) as directory:
        for port in ports:
            path = directory / str(port)
            if _holder(path) == os.getpid():
                path.unlink(missing_ok=True)


def release_cloud(ports: dict[str, int], directory: Path | None = None) -> None:
    """Give back a local cloud's ports (its CloudInfo.ports): every daemon's, and its slurmd block (slurmd_base up to
    SlurmdPort, `sackd`)."""
    block = range(ports["slurmd_base"], ports["sackd"] + 1) if ports.get("slurmd_base") else range(0)
    release([*(port for port in ports.values() if port), *block], directory)
