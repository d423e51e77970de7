"""The EC2 adapter when an answer is no EC2 answer at all (an HTML 500 page from a proxy or an overloaded endpoint):
the launch may or may not have happened, so it is looked up by its launch token like a lost answer, never raised to
the resume worker (which would fail every node of the launch and leave what it launched to the orphan sweep)."""

from __future__ import annotations

from typing import Any

from botocore.awsrequest import AWSResponse

from slurm_plugin.powersave.ec2 import Ec2, LaunchRequest
from slurm_plugin.powersave.planner import Override

HTML_500 = b"<!doctype html><html><title>500 Internal Server Error</title></html>"
NO_RESERVATIONS = (
    b'<?xml version="1.0" encoding="UTF-8"?><DescribeInstancesResponse xmlns="http://ec2.amazonaws.com/doc/2016-11-15/">'
    b"<requestId>r</requestId><reservationSet/></DescribeInstancesResponse>"
)


class _Raw:
    def __init__(self, body: bytes) -> None:
        self.body = body

    def stream(self, **_: Any) -> Any:
        yield self.body


def _answer(status: int, body: bytes) -> AWSResponse:
    return AWSResponse("https://ec2.us-east-1.amazonaws.com/", status, {}, _Raw(body))


def _ec2(actions: list[str], status: int = 500) -> Ec2:
    ec2 = Ec2("https://ec2.us-east-1.amazonaws.com")
    client = ec2.client("us-east-1")

    def send(request: Any, event_name: str, **_: Any) -> AWSResponse:
        action = event_name.rsplit(".", 1)[-1]
        actions.append(action)
        return _answer(status, HTML_500) if action in ("CreateFleet", "RunInstances") else _answer(200, NO_RESERVATIONS)

    client.meta.events.register("before-send.ec2", send)
    return ec2


def _request(overrides: int) -> LaunchRequest:
    return LaunchRequest(
        region="us-east-1",
        launch_template_id="lt-1",
        market="on-demand",
        overrides=tuple(Override("c7i.large", f"subnet-{i}", f"us-east-1{'abc'[i]}", i) for i in range(overrides)),
        count=3,
        token="r1-p1-c1",
        tags={"elastic-slurm:cluster": "c"},
    )


def test_a_garbled_fleet_answer_is_an_error_and_the_launch_is_looked_up_by_its_token(monkeypatch: Any) -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    actions: list[str] = []
    answer = _ec2(actions).launch(_request(3))
    assert answer.api == "CreateFleet" and answer.instances == ()
    assert [e.code for e in answer.errors] == ["ResponseParserError"]
    assert actions[0] == "CreateFleet" and actions[-1] == "DescribeInstances"  # by the launch token


def test_a_garbled_run_instances_answer_is_an_error_too(monkeypatch: Any) -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    actions: list[str] = []
    answer = _ec2(actions).launch(_request(1))
    assert answer.api == "RunInstances" and [e.code for e in answer.errors] == ["ResponseParserError"]
    assert "DescribeInstances" in actions


def test_a_garbled_run_instances_answer_with_a_success_status_is_an_error_too(monkeypatch: Any) -> None:
    """The page comes with HTTP 200: the plugin's own reading of RunInstances answers (ec2_answers) cannot read it
    either and leaves it to botocore, which refuses it."""
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    actions: list[str] = []
    answer = _ec2(actions, status=200).launch(_request(1))
    assert answer.api == "RunInstances" and [e.code for e in answer.errors] == ["ResponseParserError"]
    assert answer.instances == () and actions[-1] == "DescribeInstances"
