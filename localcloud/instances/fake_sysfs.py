"""The CPU directory of sysfs an emulated instance sees (local cloud only).

A compute node of a pool with `disable_hyperthreading` runs assets/bootstrap/elastic-slurm-smt-off, which writes 0 to
sibling threads' `online` files under $ES_SYSFS_CPU. Every emulated instance runs on the host's CPUs, which it must
not take offline, so the instance runner points ES_SYSFS_CPU at a copy of the host's CPU topology — each CPU's
`online` file (where the host has one) and `topology/thread_siblings_list` — in the instance's own /run. The script
does there what it does on EC2's sysfs, and what it wrote stays there (docs/local-cloud.md, fidelity table).
"""

from __future__ import annotations

import re
from pathlib import Path

HOST_CPU = Path("/sys/devices/system/cpu")
TREE = "elastic-slurm-sysfs-cpu"  # under the machine's /run
_CPU = re.compile(r"^cpu\d+$")


def cpu_tree(machine_dir: Path, host: Path = HOST_CPU) -> str:
    """Write the copy of `host`'s CPU topology into `machine_dir`/run and return its path inside the machine."""
    tree = machine_dir / "run" / TREE
    for cpu in sorted(p for p in host.iterdir() if _CPU.match(p.name)):
        copy = tree / cpu.name
        (copy / "topology").mkdir(parents=True, exist_ok=True)
        for name in ("online", "topology/thread_siblings_list"):
            source = cpu / name
            if source.exists():
                (copy / name).write_text(source.read_text())
    return f"/run/{TREE}"
