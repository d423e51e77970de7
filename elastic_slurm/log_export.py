"""Copy a cluster's CloudWatch Logs into files: what `elastic-slurm logs export` writes.

Every node ships its Slurm and elastic-slurm logs with the CloudWatch agent into the cluster's log group
`/elastic-slurm/NAME` (home region; stacks/naming.py `log_group_name`, retention one month, stacks/cluster.py), one
stream per instance and file, named `<instance id>/<file name>` (slurm_plugin/log_shipping.py): `i-0abc/slurmctld.log`,
`i-0abc/slurmdbd.log`, `i-0abc/plugin.log`, `i-0abc/clustermgr.log` on controllers, `i-0def/slurmd.log` and
`i-0def/prolog.log` on compute nodes.

An export reads the window with FilterLogEvents (boto3's paginator) — the whole group, or the streams of given
instances — and writes one file per stream, `DIR/<stream>` (`.log` added when the name has no such suffix; a stream
name's `/` makes a sub-directory), one line per event `<ISO 8601 UTC timestamp> <message>`, plus `DIR/index.txt`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path, PurePosixPath
from typing import IO, Any

STREAM_NAMES_PER_CALL = 100  # FilterLogEvents takes at most 100 logStreamNames
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}
_DURATION = re.compile(r"^(?:\d+[smhdw])+$")
_PART = re.compile(r"(\d+)([smhdw])")
SINCE_FORMS = "a duration (90s, 30m, 2h, 1h30m, 7d, 1w) or an ISO 8601 time (2025-05-01T10:00Z; no zone = UTC)"


def parse_since(text: str, now: datetime) -> datetime:
    """The start of the window: `now` minus a duration, or an absolute time. ValueError (one line) otherwise."""
    value = text.strip()
    if _DURATION.match(value):
        seconds = sum(int(n) * _UNITS[unit] for n, unit in _PART.findall(value))
        if seconds == 0:
            raise ValueError(f"'{text}' is an empty window")
        return now - timedelta(seconds=seconds)
    try:
        start = datetime.fromisoformat(value.replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        raise ValueError(f"'{text}' is not {SINCE_FORMS}") from None
    start = start if start.tzinfo else start.replace(tzinfo=UTC)
    if start >= now:
        raise ValueError(f"'{text}' is not in the past")
    return start


def iso(millis: int) -> str:
    """Epoch milliseconds → `2025-05-01T10:00:00.123Z`."""
    return datetime.fromtimestamp(millis / 1000, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def stream_file(stream: str) -> PurePosixPath:
    """Where a stream goes under DIR: its name as a relative path (no `..`, no absolute path), ending in `.log`."""
    parts = [p if p not in ("", ".", "..") else "_" for p in stream.strip("/").split("/")] or ["_"]
    if not parts[-1].endswith(".log"):
        parts[-1] += ".log"
    return PurePosixPath(*parts)


@dataclass
class Export:
    """What an export wrote: events per stream, and each stream's file (relative to the output directory)."""

    group: str
    start: datetime
    end: datetime
    events: dict[str, int] = field(default_factory=dict)
    files: dict[str, str] = field(default_factory=dict)

    @property
    def total(self) -> int:
        """Events written, over every stream."""
        return sum(self.events.values())


def export(
    logs: Any,
    group: str,
    out: Path,
    start: datetime,
    end: datetime,
    streams: Sequence[str] | None = None,
    page_size: int | None = None,
) -> Export:
    """Write every event of `group` in [start, end] into `out`, one file per stream: all streams, or only `streams`
    (none: nothing to read). Raises botocore's ClientError (ResourceNotFoundException for a missing group)."""
    result = Export(group, start, end)
    base = {"logGroupName": group, "startTime": _millis(start), "endTime": _millis(end)}
    paging = {"PageSize": page_size} if page_size else {}
    paginator = logs.get_paginator("filter_log_events")
    if streams is None:
        calls: Iterable[dict[str, Any]] = [base]
    else:
        names = sorted(set(streams))
        calls = [
            {**base, "logStreamNames": names[i : i + STREAM_NAMES_PER_CALL]}
            for i in range(0, len(names), STREAM_NAMES_PER_CALL)
        ]
    for kwargs in calls:
        for page in paginator.paginate(**kwargs, PaginationConfig=paging):
            _write_page(out, page.get("events", []), result)
    return result


def streams_of_instances(logs: Any, group: str, instance_ids: Iterable[str]) -> list[str]:
    """The group's streams of these instances (`<instance id>/...`), by DescribeLogStreams with a name prefix."""
    paginator = logs.get_paginator("describe_log_streams")
    found: list[str] = []
    for instance_id in sorted(set(instance_ids)):
        for page in paginator.paginate(logGroupName=group, logStreamNamePrefix=f"{instance_id}/"):
            found.extend(str(s["logStreamName"]) for s in page.get("logStreams", []))
    return found


def write_index(out: Path, result: Export, header: Sequence[str]) -> Path:
    """`DIR/index.txt`: `#` header lines, then one tab-separated line per stream: events, stream, file."""
    lines = [f"# {line}" for line in header]
    lines.append(f"# window: {_iso_dt(result.start)} .. {_iso_dt(result.end)} (UTC)")
    lines.append(f"# streams: {len(result.events)}, events: {result.total}")
    lines.append("# events\tstream\tfile")
    lines += [f"{result.events[s]}\t{s}\t{result.files[s]}" for s in sorted(result.events)]
    path = out / "index.txt"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def _write_page(out: Path, events: Sequence[dict[str, Any]], result: Export) -> None:
    by_stream: dict[str, list[str]] = {}
    for event in events:
        stream = str(event.get("logStreamName", ""))
        message = str(event.get("message", "")).rstrip("\r\n")
        by_stream.setdefault(stream, []).append(f"{iso(int(event.get('timestamp', 0)))} {message}\n")
    for stream, lines in by_stream.items():
        first = stream not in result.files
        if first:
            result.files[stream] = _claim_file(out, stream, result.files.values())
        with _open(out / result.files[stream], "w" if first else "a") as handle:
            handle.writelines(lines)
        result.events[stream] = result.events.get(stream, 0) + len(lines)


def _claim_file(out: Path, stream: str, taken: Iterable[str]) -> str:
    """The stream's relative file; when another stream's file took that name (or a file and a directory would
    clash), a flat name with `/` escaped as `%2F`, numbered `~2`, `~3`, ... until free."""
    used = set(taken)

    def free(name: str) -> bool:
        clash = any(u.startswith(name + "/") or name.startswith(u + "/") for u in used)
        return name not in used and not clash and not (out / name).is_dir()

    wanted = str(stream_file(stream))
    if free(wanted):
        return wanted
    flat = stream.replace("%", "%25").replace("/", "%2F")
    base = flat.removesuffix(".log")
    candidate, number = f"{base}.log", 1
    while not free(candidate):
        number += 1
        candidate = f"{base}~{number}.log"
    return candidate


def _open(path: Path, mode: str) -> IO[str]:
    path.parent.mkdir(parents=True, exist_ok=True)
    return path.open(mode, encoding="utf-8")


def _millis(moment: datetime) -> int:
    return int(moment.timestamp() * 1000)


def _iso_dt(moment: datetime) -> str:
    return iso(_millis(moment))
