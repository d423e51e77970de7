"""What the fault soak (tests/aws/test_fault_soak.py) prints about a node it finds wrong: the node's entries in Slurm's
table as each worker changed them, the event log's lines about it and its instances, and the plugin log of every
worker that touched it. CI keeps nothing of a run but its output, so a rare failure must explain itself there."""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path

from slurm_plugin.telemetry.events import EVENTS_FILE


def _trace(slurm_file: Path, node: str) -> tuple[list[str], set[str]]:
    """The node's entry each time a worker changed it (time, pid, entry), and those workers' pids."""
    lines: list[str] = []
    pids: set[str] = set()
    before: object = None
    trace = slurm_file.with_suffix(".trace")
    for raw in trace.read_text().splitlines() if trace.exists() else []:
        record = json.loads(raw)
        entry = record["table"].get(node)
        if entry != before:
            lines.append(f"  slurm {record['t']:.3f} pid {record['pid']}: {entry}")
            pids.add(str(record["pid"]))
            before = entry
    return lines, pids


def node_history(node: str, slurm_file: Path, state_dir: Path, plugin_log: Path, marks: Iterable[str]) -> str:
    """Everything the soak's files say about `node` and about `marks` (its addresses, instance ids), as one block."""
    marks = list(marks)
    lines, pids = _trace(slurm_file, node)
    events = state_dir / EVENTS_FILE
    instances: set[str] = set()
    for raw in events.read_text().splitlines() if events.exists() else []:
        record = json.loads(raw)
        if record.get("node") == node or record.get("instance_id") in marks:
            instances.add(str(record.get("instance_id", "")))
            lines.append(f"  event {raw}")
    wanted = [*marks, *sorted(i for i in instances if i)]
    for raw in plugin_log.read_text().splitlines() if plugin_log.exists() else []:
        fields = raw.split()
        if (len(fields) > 2 and fields[2] in pids) or any(w in raw for w in wanted):
            lines.append(f"  log {raw}")
    return f"{node}:\n" + "\n".join(lines)
