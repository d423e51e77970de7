"""`elastic-slurm logs export` against the emulated AWS: a log group shaped as the nodes' CloudWatch agent fills it
(`/elastic-slurm/NAME`, streams `<instance id>/<file>`, stacks/user_data.py), exported through the CLI's `main`."""

from __future__ import annotations

import time
import uuid
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from elastic_slurm import log_export
from elastic_slurm.cli import main
from localcloud.aws.emulated_aws import EmulatedAws
from stacks.naming import TAG_CLUSTER, TAG_ROLE, log_group_name
from tests.aws.plugin_env import public_image

HOUR_MS = 3_600_000


def _cluster() -> str:
    return f"logs-{uuid.uuid4().hex[:8]}"


def _fill(aws: EmulatedAws, cluster: str, streams: dict[str, tuple[int, int]]) -> int:
    """Create the cluster's group and streams: stream -> (events in the last hour, events 3 hours ago). Returns now."""
    logs = aws.client("logs")
    group = log_group_name(cluster)
    logs.create_log_group(logGroupName=group)
    now = int(time.time() * 1000)
    for stream, (recent, old) in streams.items():
        logs.create_log_stream(logGroupName=group, logStreamName=stream)
        events = [{"timestamp": now - 3 * HOUR_MS + i, "message": f"old {i}"} for i in range(old)]
        events += [{"timestamp": now - 60_000 + i, "message": f"{stream} line {i}\n"} for i in range(recent)]
        if events:
            logs.put_log_events(logGroupName=group, logStreamName=stream, logEvents=events)
    return now


def _export(aws: EmulatedAws, cluster: str, out: Path, *extra: str) -> int:
    return main(
        ["logs", "export", cluster, "--region", "us-east-1", "--out", str(out), "--endpoint-url", aws.url, *extra]
    )


def _index(out: Path) -> dict[str, tuple[int, str]]:
    rows = [line.split("\t") for line in (out / "index.txt").read_text().splitlines() if not line.startswith("#")]
    return {stream: (int(events), file) for events, stream, file in rows}


def _instance(aws: EmulatedAws, cluster: str) -> dict[str, Any]:
    ec2 = aws.client("ec2")
    ami = public_image(ec2)
    tags = [{"Key": TAG_CLUSTER, "Value": cluster}, {"Key": TAG_ROLE, "Value": "compute"}]
    return dict(
        ec2.run_instances(
            ImageId=ami, MinCount=1, MaxCount=1, TagSpecifications=[{"ResourceType": "instance", "Tags": tags}]
        )["Instances"][0]
    )


def test_every_stream_of_the_window_becomes_one_file_with_an_index(aws: EmulatedAws, tmp_path: Path) -> None:
    cluster = _cluster()
    _fill(aws, cluster, {"i-0aaa/slurmctld.log": (5, 4), "i-0bbb/slurmd.log": (3, 0), "i-0ccc/slurmd.log": (0, 7)})
    out = tmp_path / "export"
    assert _export(aws, cluster, out, "--since", "2h") == 0
    assert _index(out) == {
        "i-0aaa/slurmctld.log": (5, "i-0aaa/slurmctld.log"),
        "i-0bbb/slurmd.log": (3, "i-0bbb/slurmd.log"),
    }  # i-0ccc had events 3 h ago only: outside the window, no file
    lines = (out / "i-0aaa" / "slurmctld.log").read_text().splitlines()
    assert len(lines) == 5
    stamp, message = lines[0].split(" ", 1)
    assert message == "i-0aaa/slurmctld.log line 0"  # the message's own newline is not doubled
    assert stamp.endswith("Z") and abs(int(datetime.fromisoformat(stamp).timestamp()) - time.time()) < 120
    assert not (out / "i-0ccc").exists()
    header = (out / "index.txt").read_text()
    assert f"log group {log_group_name(cluster)} (us-east-1)" in header and "# streams: 2, events: 8" in header


def test_a_longer_window_reaches_older_events_and_pages_are_followed(
    aws: EmulatedAws, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cluster = _cluster()
    _fill(aws, cluster, {"i-0aaa/slurmctld.log": (30, 25)})
    real = log_export.export
    monkeypatch.setattr(log_export, "export", lambda *a, **k: real(*a, **{**k, "page_size": 7}))
    aws.reset_call_counts()
    assert _export(aws, cluster, tmp_path / "out", "--since", "4h") == 0
    assert _index(tmp_path / "out") == {"i-0aaa/slurmctld.log": (55, "i-0aaa/slurmctld.log")}
    assert aws.call_counts().get("logs:FilterLogEvents", 0) >= 8  # 55 events, 7 a page


def test_one_node_by_instance_id_or_private_ip(aws: EmulatedAws, tmp_path: Path) -> None:
    cluster = _cluster()
    instance = _instance(aws, cluster)
    iid = instance["InstanceId"]
    _fill(aws, cluster, {f"{iid}/slurmd.log": (4, 0), "i-0other/slurmd.log": (6, 0), "i-0ctl/slurmctld.log": (2, 0)})
    assert _export(aws, cluster, tmp_path / "by-id", "--node", iid) == 0
    assert _index(tmp_path / "by-id") == {f"{iid}/slurmd.log": (4, f"{iid}/slurmd.log")}
    assert _export(aws, cluster, tmp_path / "by-ip", "--node", instance["PrivateIpAddress"]) == 0
    assert _index(tmp_path / "by-ip") == {f"{iid}/slurmd.log": (4, f"{iid}/slurmd.log")}
    host = "ip-" + instance["PrivateIpAddress"].replace(".", "-")
    assert _export(aws, cluster, tmp_path / "by-host", "--node", host) == 0
    assert "instances: " + iid in (tmp_path / "by-host" / "index.txt").read_text()


def test_aws_endpoint_url_from_the_environment_is_used(
    aws: EmulatedAws, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cluster = _cluster()
    _fill(aws, cluster, {"i-0aaa/slurmctld.log": (2, 0)})
    monkeypatch.setenv("AWS_ENDPOINT_URL", aws.url)  # what `eval "$(elastic-slurm local env)"` exports
    argv = ["logs", "export", cluster, "--region", "us-east-1", "--out", str(tmp_path / "out")]
    assert main(argv) == 0
    assert _index(tmp_path / "out")["i-0aaa/slurmctld.log"][0] == 2


@pytest.mark.parametrize("since", ["2x", "yesterday", "0h", "2999-01-01T00:00"])
def test_a_bad_since_is_one_line_naming_it(
    aws: EmulatedAws, tmp_path: Path, capsys: pytest.CaptureFixture[str], since: str
) -> None:
    assert _export(aws, _cluster(), tmp_path / "out", "--since", since) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("elastic-slurm logs: --since: ")
    assert not (tmp_path / "out").exists()


def test_a_missing_log_group_is_one_line(aws: EmulatedAws, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cluster = _cluster()
    assert _export(aws, cluster, tmp_path / "out") == 1
    err = capsys.readouterr().err
    assert err == (
        f"elastic-slurm logs: log group /elastic-slurm/{cluster} does not exist in us-east-1 "
        f"(is {cluster} deployed there? --region is the cluster's home region)\n"
    )


def test_a_node_ec2_does_not_know_is_one_line_naming_node(
    aws: EmulatedAws, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cluster = _cluster()
    _fill(aws, cluster, {"i-0aaa/slurmd.log": (1, 0)})
    assert _export(aws, cluster, tmp_path / "out", "--node", "cpu-c7i-3") == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"elastic-slurm logs: --node: no instance of cluster {cluster}")
    assert "NodeAddr" in err
