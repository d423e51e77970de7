"""Stop everything one local cloud started, and nothing else.

Order: the instance runner (it stops the instances it booted), any instance left behind (by its recorded session and
time namespace), slurmd processes named by our SlurmdPidFiles, plugin workers and spare workers (found by the manifest
path in their environment), then slurmctld, slurmdbd, MariaDB, munged and the emulated AWS, then plugin workers again
(one slurmctld started while stopping). Every process is checked against its
/proc/PID/cmdline (or environment) before it is signalled.
"""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

from localcloud.instances.instance_runner import instance_markers, stop_instance_processes, unit_dir
from localcloud.layout import Layout
from localcloud.services import procs
from localcloud.services.daemons import CLOUD_MARKER


def _instances_left(layout: Layout) -> list[str]:
    stopped = []
    for record_path in sorted(layout.instances_dir.glob("*.json")) if layout.instances_dir.is_dir() else []:
        try:
            record = json.loads(record_path.read_text())
        except (OSError, ValueError):
            record_path.unlink(missing_ok=True)
            continue
        pid = record.get("pid") or 0
        namespace = record.get("time_ns") or ""
        # the instance's session (its boot's pid) may outlive the boot shell: its marked members still go
        instance_id = str(record.get("instance_id") or "")
        markers = instance_markers(instance_id, layout.root)
        units = unit_dir(layout, instance_id) if instance_id else None
        if procs.pids_in_time_namespace(namespace) or procs.pids_in_session(pid) or units:
            stop_instance_processes(pid, namespace, markers, units)
            stopped.append(f"instance {record.get('instance_id')}")
        record_path.unlink(missing_ok=True)
    return stopped


def _slurmds(layout: Layout) -> list[str]:
    stopped = []
    for pid_file in sorted(layout.run.glob("slurmd-*.pid")) if layout.run.is_dir() else []:
        pid = procs.read_pid(pid_file)
        if pid is not None and procs.stop_pid(pid, "slurmd", timeout=5):
            stopped.append(f"slurmd {pid_file.stem[len('slurmd-') :]} ({pid})")
        pid_file.unlink(missing_ok=True)
    return stopped


PLUGIN_MARKERS = ("slurm-resume", "slurm-suspend", "slurm_plugin")


def _plugin_workers(layout: Layout) -> list[str]:
    """Plugin processes (resume/suspend background workers) whose environment names our manifest.

    Both must hold: a shell where a user exported the same ELASTIC_SLURM_MANIFEST is never touched.
    """
    needle = f"ELASTIC_SLURM_MANIFEST={layout.manifest}".encode()
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        if not any(marker in procs.cmdline(int(entry)) for marker in PLUGIN_MARKERS):
            continue
        try:
            environ = Path(f"/proc/{entry}/environ").read_bytes()
        except OSError:
            continue
        if needle in environ.split(b"\0"):
            found.append(int(entry))
    procs.kill_all(found, signal.SIGKILL)
    return [f"plugin worker ({pid})" for pid in found]


def stop_everything(layout: Layout, daemons: list[tuple[str, str]]) -> list[str]:
    """Stop all processes of the local cloud in `layout`; returns one description per process stopped."""
    stopped: list[str] = []
    runner_name, runner_marker = daemons[0]
    if procs.stop_pid_file(layout.pid_file(runner_name), runner_marker, timeout=30):
        stopped.append(runner_name)
    stopped += _instances_left(layout)
    stopped += _slurmds(layout)
    stopped += _plugin_workers(layout)
    ours = (
        f"{CLOUD_MARKER}={layout.root}".encode()
    )  # every daemon of the cloud carries it (localcloud/services/daemons.py)
    for name, marker in daemons[1:]:
        if procs.stop_pid_file(layout.pid_file(name), marker, timeout=20, env_marker=ours):
            stopped.append(name)
    # a resume run while slurmctld stopped may have started a spare worker (slurm_plugin/powersave/spare.py)
    stopped += _plugin_workers(layout)
    return stopped
