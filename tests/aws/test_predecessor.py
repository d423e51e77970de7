"""slurm_plugin/predecessor.py (`python -m slurm_plugin.predecessor [--any-index]`, run by the controller user data
and by config apply) against the emulated EC2: a replacement controller waits while an OLDER instance carries its Name
tag AND the cluster and role tags, not for a newer one, not for a stranger's instance that only carries the Name, not
at creation; it gives up (exit 1) at its bound; `--any-index` waits for every older controller but not the other one
the same update launched. Its instance id comes from IMDSv2 when the environment does not name it. (Every local-cloud
controller boot runs it too: the creation path.)"""

from __future__ import annotations

import functools
import http.server
import os
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from localcloud.aws.emulated_aws import DUMMY_CREDENTIALS, EmulatedAws
from slurm_plugin import predecessor
from slurm_plugin.tags import TAG_CLUSTER, TAG_ROLE
from tests.aws.plugin_env import public_image

T0 = datetime(2026, 11, 25, 10, 5, tzinfo=UTC)


def _page(*instances: tuple[str, datetime | None]) -> dict[str, Any]:
    return {"Reservations": [{"Instances": [{"InstanceId": i, "LaunchTime": at} for i, at in instances]}]}


def test_only_instances_launched_before_this_one_by_more_than_the_gap_are_older() -> None:
    old, newer = ("i-old", T0 - timedelta(days=5)), ("i-newer", T0 + timedelta(hours=1))
    assert predecessor.older_ids([_page(("i-me", T0))], "i-me", 0) == []  # creation: only this instance
    assert predecessor.older_ids([_page(old, ("i-me", T0), newer)], "i-me", 0) == ["i-old"]
    other_new = ("i-new1", T0 - timedelta(seconds=30))  # the other controller this update launched
    assert predecessor.older_ids([_page(old, other_new, ("i-me", T0))], "i-me", 120) == ["i-old"]
    # this instance not in the answer, or a launch time missing: every other one counts (waited for, within the bound)
    assert predecessor.older_ids([_page(old, newer)], "i-me", 0) == ["i-newer", "i-old"]
    assert predecessor.older_ids([_page(("i-odd", None), ("i-me", T0))], "i-me", 0) == ["i-odd"]


def test_the_wait_logs_each_lookup_and_gives_up_at_its_bound() -> None:
    now = [0.0]
    answers = [["i-old"], ["i-old"], []]
    lines: list[str] = []

    def sleep(seconds: float) -> None:
        now[0] += seconds

    gone = predecessor.wait_for_predecessors(lambda: answers.pop(0), "it", 100, 15, lines.append, sleep, lambda: now[0])
    assert gone and lines[-1] == "it: gone after 30s"
    assert sum("waiting for it (i-old) to be gone" in line for line in lines) == 2
    lines.clear()
    stuck = predecessor.wait_for_predecessors(lambda: ["i-old"], "it", 40, 15, lines.append, sleep, lambda: now[0])
    assert not stuck and lines[-1] == "it (i-old) still runs after 40s: not starting Slurm next to it"


def _launch(aws: EmulatedAws, tags: dict[str, str]) -> str:
    ec2 = aws.client("ec2")
    spec = [{"ResourceType": "instance", "Tags": [{"Key": k, "Value": v} for k, v in tags.items()]}]
    answer = ec2.run_instances(ImageId=public_image(ec2), MinCount=1, MaxCount=1, TagSpecifications=spec)
    return str(answer["Instances"][0]["InstanceId"])


def _controller(aws: EmulatedAws, cluster: str, index: int = 0) -> str:
    return _launch(aws, {"Name": f"{cluster}-controller-{index}", TAG_CLUSTER: cluster, TAG_ROLE: "controller"})


def _command(aws: EmulatedAws, cluster: str, me: str, *args: str, **env: str) -> tuple[list[str], dict[str, str]]:
    environ = {
        "PATH": os.environ["PATH"],
        "AWS_ENDPOINT_URL": aws.url,
        **DUMMY_CREDENTIALS,
        "ES_CLUSTER": cluster,
        "ES_REGION": "us-east-1",
        "ELASTIC_SLURM_INSTANCE_ID": me,
        "ES_PREDECESSOR_POLL": "1",
        **env,
    }
    return [sys.executable, "-m", "slurm_plugin.predecessor", *args], environ


def _run(aws: EmulatedAws, cluster: str, me: str, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    argv, environ = _command(aws, cluster, me, *args, **env)
    return subprocess.run(argv, env=environ, capture_output=True, text=True, timeout=120, check=False)


def _cluster() -> str:
    return f"pred-{uuid.uuid4().hex[:8]}"


def test_at_creation_and_next_to_a_stranger_named_like_it_nothing_is_waited_for(aws: EmulatedAws) -> None:
    cluster = _cluster()
    stranger = _launch(aws, {"Name": f"{cluster}-controller-0"})  # older, but only the Name tag
    time.sleep(1.1)  # launch times have one-second resolution
    me = _controller(aws, cluster)
    aws.reset_call_counts()
    result = _run(aws, cluster, me)
    assert (result.returncode, result.stderr) == (0, "")
    assert aws.call_counts().get("ec2:DescribeInstances") == 1
    assert stranger not in result.stderr


def test_a_replacement_waits_until_the_older_controller_is_gone(aws: EmulatedAws) -> None:
    cluster = _cluster()
    old = _controller(aws, cluster)
    time.sleep(1.1)
    me = _controller(aws, cluster)
    newer = _controller(aws, cluster, 1)  # another index: not this one's predecessor
    waiting = f"waiting for the controller this one replaces ({old}) to be gone"
    argv, environ = _command(aws, cluster, me)
    with subprocess.Popen(argv, env=environ, stderr=subprocess.PIPE, text=True) as program:
        assert program.stderr is not None
        lines = [program.stderr.readline()]  # the old controller goes only once the program has seen it and waits
        assert waiting in lines[0], lines
        aws.client("ec2").terminate_instances(InstanceIds=[old])
        lines += program.stderr.readlines()
        assert program.wait(timeout=120) == 0, lines
    assert "the controller this one replaces: gone after" in lines[-1]
    assert not any(newer in line for line in lines)


def test_it_gives_up_at_its_bound_without_starting_slurm(aws: EmulatedAws) -> None:
    cluster = _cluster()
    old = _controller(aws, cluster)
    time.sleep(1.1)
    me = _controller(aws, cluster)
    result = _run(aws, cluster, me, ES_PREDECESSOR_WAIT="0")
    assert result.returncode == 1
    assert result.stderr.strip().splitlines()[-1] == (
        f"elastic-slurm-wait-predecessor: the controller this one replaces ({old}) still runs after 0s: "
        "not starting Slurm next to it"
    )


def test_any_index_waits_for_every_older_controller_but_not_the_other_new_one(aws: EmulatedAws) -> None:
    cluster = _cluster()
    old_backup = _controller(aws, cluster, 1)
    time.sleep(3.1)  # launch times are whole seconds: the old one >= 3 s before, the two new ones < 3 s apart
    new_backup = _controller(aws, cluster, 1)
    me = _controller(aws, cluster)
    stuck = _run(aws, cluster, me, "--any-index", ES_PREDECESSOR_WAIT="0", ES_GENERATION_GAP="2")
    assert stuck.returncode == 1 and f"({old_backup}) still runs after 0s" in stuck.stderr
    assert new_backup not in stuck.stderr
    aws.client("ec2").terminate_instances(InstanceIds=[old_backup])
    done = _run(aws, cluster, me, "--any-index", ES_PREDECESSOR_WAIT="0", ES_GENERATION_GAP="2")
    assert (done.returncode, done.stderr) == (0, "")


@pytest.mark.parametrize(
    ("env", "line"),
    [
        ({"ES_CLUSTER": "Prod;rm"}, "ES_CLUSTER: 'Prod;rm' is not a cluster name"),
        ({"ES_REGION": "mars"}, "ES_REGION: 'mars' is not an AWS region"),
        ({"ES_PREDECESSOR_WAIT": "2h"}, "ES_PREDECESSOR_WAIT: '2h' is not a whole number of seconds"),
        ({"ELASTIC_SLURM_INSTANCE_ID": "$(id)"}, "ELASTIC_SLURM_INSTANCE_ID: '$(id)' is not an instance id"),
    ],
)
def test_a_bad_environment_value_is_one_line_naming_it(aws: EmulatedAws, env: dict[str, str], line: str) -> None:
    result = _run(aws, "prod", "i-0123456789abcdef0", **env)
    assert (result.returncode, result.stderr) == (2, f"elastic-slurm-wait-predecessor: {line}\n")


class _Imds(http.server.BaseHTTPRequestHandler):
    """IMDSv2 as the launch templates require it: a token from PUT, then GET with the token only."""

    def do_PUT(self) -> None:
        ok = self.path == "/latest/api/token" and self.headers.get("X-aws-ec2-metadata-token-ttl-seconds") == "60"
        self._answer(200 if ok else 400, b"token-1")

    instance_id = b"i-0123456789abcdef0\n"  # what GET answers (a test may make it something else)

    def do_GET(self) -> None:
        ok = self.path == "/latest/meta-data/instance-id" and self.headers.get("X-aws-ec2-metadata-token") == "token-1"
        self._answer(200 if ok else 401, self.instance_id)

    def _answer(self, code: int, body: bytes) -> None:
        self.send_response(code)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def imds() -> Iterator[str]:
    server = http.server.HTTPServer(("127.0.0.1", 0), _Imds)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}"
    finally:
        server.shutdown()
        server.server_close()


def test_the_instance_id_comes_from_imdsv2_with_a_token(imds: str) -> None:
    assert predecessor.instance_id_from_imds(imds) == "i-0123456789abcdef0"
    with pytest.raises(OSError):
        predecessor.instance_id_from_imds("http://127.0.0.1:9")  # nothing answers: one line, exit 1 in main


@pytest.mark.parametrize(
    ("answer", "line"),
    [
        (
            b"<html>proxy login</html>",
            "the instance metadata service answered '<html>proxy login</html>', not an instance id",
        ),
        (None, "the instance metadata service did not answer"),
    ],
)
def test_an_imds_answer_that_is_no_instance_id_is_one_line_and_exit_1(
    imds: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], answer: bytes | None, line: str
) -> None:
    """Without ELASTIC_SLURM_INSTANCE_ID the id comes from IMDS; an answer that is not an id (a proxy's page) or no
    answer stops the wait before any EC2 call: exit 1, one line."""
    if answer is not None:
        monkeypatch.setattr(_Imds, "instance_id", answer)
    base = imds if answer is not None else "http://127.0.0.1:9"  # the discard port: nothing answers
    monkeypatch.setattr(
        predecessor, "instance_id_from_imds", functools.partial(predecessor.instance_id_from_imds, base)
    )
    code = predecessor.main([], {"ES_CLUSTER": "prod", "ES_REGION": "us-east-1"})
    err = capsys.readouterr().err
    assert code == 1 and err.count("\n") == 1, err
    assert err.startswith(f"elastic-slurm-wait-predecessor: this instance's id: {line}"), err
