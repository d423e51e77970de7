"""The pure parts of `elastic-slurm logs export` (elastic_slurm/log_export.py): the window and where a stream goes."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from elastic_slurm import log_export

NOW = datetime(2025, 5, 1, 12, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("text", "ago"),
    [("90s", timedelta(seconds=90)), ("30m", timedelta(minutes=30)), ("2h", timedelta(hours=2)),
     ("1h30m", timedelta(minutes=90)), ("7d", timedelta(days=7)), ("1w", timedelta(weeks=1))],
)  # fmt: skip
def test_durations_count_back_from_now(text: str, ago: timedelta) -> None:
    assert log_export.parse_since(text, NOW) == NOW - ago


def test_iso_times_are_utc_unless_they_say_otherwise() -> None:
    assert log_export.parse_since("2025-05-01T10:00", NOW) == datetime(2025, 5, 1, 10, 0, tzinfo=UTC)
    assert log_export.parse_since("2025-05-01T10:00Z", NOW) == datetime(2025, 5, 1, 10, 0, tzinfo=UTC)
    assert log_export.parse_since("2025-05-01T12:00+02:00", NOW) == datetime(2025, 5, 1, 10, 0, tzinfo=UTC)


@pytest.mark.parametrize("text", ["", "2x", "h", "-2h", "2 h", "yesterday", "0m", "2025-05-01T13:00Z"])
def test_anything_else_is_a_one_line_value_error(text: str) -> None:
    with pytest.raises(ValueError) as caught:
        log_export.parse_since(text, NOW)
    assert "\n" not in str(caught.value) and repr(text)[1:-1] in str(caught.value)


@pytest.mark.parametrize(
    ("stream", "file"),
    [("i-0abc/slurmctld.log", "i-0abc/slurmctld.log"), ("i-0abc/slurmd", "i-0abc/slurmd.log"),
     ("../../etc/passwd", "_/_/etc/passwd.log"), ("/abs//x.log", "abs/_/x.log"), ("..", "_.log")],
)  # fmt: skip
def test_a_stream_becomes_a_relative_path_inside_the_directory(stream: str, file: str) -> None:
    assert str(log_export.stream_file(stream)) == file


def test_streams_whose_files_would_clash_get_flat_names(tmp_path: Path) -> None:
    page = [
        {"logStreamName": "a", "timestamp": 0, "message": "one"},
        {"logStreamName": "a.log", "timestamp": 1000, "message": "two"},
        {"logStreamName": "a.log/b", "timestamp": 2000, "message": "three"},
    ]
    result = log_export.Export("g", NOW, NOW)
    log_export._write_page(tmp_path, page, result)
    assert result.files == {"a": "a.log", "a.log": "a~2.log", "a.log/b": "a.log%2Fb.log"}
    assert result.events == {"a": 1, "a.log": 1, "a.log/b": 1}
    assert (tmp_path / "a.log").read_text() == "1970-01-01T00:00:00.000Z one\n"
    assert (tmp_path / "a.log%2Fb.log").read_text() == "1970-01-01T00:00:02.000Z three\n"
