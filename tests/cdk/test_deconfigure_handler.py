"""The deconfigure custom resource's Lambda handler against the emulated AWS (moto server): what it terminates,
what it spares, and what it reports to CloudFormation (via a real HTTP listener on 127.0.0.1)."""

from __future__ import annotations

import json
import threading
import uuid
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer
from typing import Any

import pytest
from botocore.config import Config

from lambdas.deconfigure import handler as deconfigure_handler
from lambdas.deconfigure.handler import (
    Instance,
    command_problem,
    deconfigure,
    instances_to_terminate,
    still_running,
)
from localcloud.aws.emulated_aws import EmulatedAws
from tests.aws.plugin_env import public_image

REGION = "us-east-1"


def _launch(ec2: Any, count: int, tags: dict[str, str], **extra: Any) -> list[str]:
    ami = public_image(ec2)
    reply = ec2.run_instances(
        ImageId=ami,
        InstanceType="c7i.large",
        MinCount=count,
        MaxCount=count,
        TagSpecifications=[{"ResourceType": "instance", "Tags": [{"Key": k, "Value": v} for k, v in tags.items()]}],
        **extra,
    )
    return [i["InstanceId"] for i in reply["Instances"]]


def _states(ec2: Any, ids: list[str]) -> dict[str, str]:
    reply = ec2.describe_instances(InstanceIds=ids)
    return {i["InstanceId"]: i["State"]["Name"] for r in reply["Reservations"] for i in r["Instances"]}


@pytest.fixture
def cluster() -> str:
    """A cluster name no other test uses (the emulated AWS is shared by the session)."""
    return f"dc{uuid.uuid4().hex[:8]}"


class _Recorder(BaseHTTPRequestHandler):
    bodies: list[dict[str, Any]] = []

    def do_PUT(self) -> None:
        length = int(self.headers.get("Content-Length", "0"))
        type(self).bodies.append(json.loads(self.rfile.read(length)))
        self.send_response(200)
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        """Quiet."""


@pytest.fixture
def response_url() -> Iterator[tuple[str, list[dict[str, Any]]]]:
    """A local stand-in for CloudFormation's pre-signed response URL; yields (url, received bodies)."""
    bodies: list[dict[str, Any]] = []
    recorder = type("Recorder", (_Recorder,), {"bodies": bodies})
    server = HTTPServer(("127.0.0.1", 0), recorder)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}/response", bodies
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


class _Context:
    def get_remaining_time_in_millis(self) -> int:
        return 600_000


def _event(request_type: str, cluster: str, url: str) -> dict[str, Any]:
    return {
        "RequestType": request_type,
        "ResponseURL": url,
        "StackId": "arn:aws:cloudformation:us-east-1:123456789012:stack/es-x-cluster/guid",
        "RequestId": "req-1",
        "LogicalResourceId": "Deconfigure",
        "ResourceType": "Custom::ElasticSlurmDeconfigure",
        "ResourceProperties": {"ServiceToken": "arn", "ClusterName": cluster, "MountPoints": ["/shared"]},
    }


def test_only_live_non_controller_instances_of_the_cluster_are_terminated() -> None:
    instances = [
        Instance("i-1", "running", {"elastic-slurm:cluster": "a", "elastic-slurm:pool": "cpu-c7i"}),
        Instance("i-2", "running", {"elastic-slurm:cluster": "a", "elastic-slurm:role": "controller"}),
        Instance("i-3", "running", {"elastic-slurm:cluster": "b"}),
        Instance("i-4", "terminated", {"elastic-slurm:cluster": "a"}),
        Instance("i-5", "stopped", {"elastic-slurm:cluster": "a"}),
    ]
    assert instances_to_terminate(instances, "a") == ["i-1", "i-5"]
    assert still_running(instances, ["i-1", "i-4"]) == ["i-1"]


def test_failed_submit_host_command_is_a_reason_and_pending_is_not() -> None:
    assert command_problem("i-1", "InProgress") is None
    assert command_problem("i-1", "Success") is None
    assert command_problem("i-1", "Failed") == "submit host i-1: clean-up command ended Failed"


def test_delete_terminates_every_compute_node_and_spares_controllers_and_other_clusters(
    aws: EmulatedAws, cluster: str
) -> None:
    ec2, ssm = aws.client("ec2", REGION), aws.client("ssm", REGION)
    compute = _launch(ec2, 3, {"elastic-slurm:cluster": cluster, "elastic-slurm:pool": "cpu-c7i"})
    controller = _launch(ec2, 1, {"elastic-slurm:cluster": cluster, "elastic-slurm:role": "controller"})
    other = _launch(ec2, 1, {"elastic-slurm:cluster": cluster + "x"})

    outcome = deconfigure(ec2, ssm, cluster, ["/shared"], remaining_ms=lambda: 600_000, sleep=lambda _: None)

    assert outcome.ok, outcome.reason
    assert sorted(outcome.terminated) == sorted(compute)
    states = _states(ec2, compute + controller + other)
    assert {states[i] for i in compute} == {"terminated"}
    assert states[controller[0]] == "running"
    assert states[other[0]] == "running"


def test_delete_with_nothing_left_succeeds(aws: EmulatedAws, cluster: str) -> None:
    outcome = deconfigure(
        aws.client("ec2", REGION), aws.client("ssm", REGION), cluster, [], remaining_ms=lambda: 600_000
    )
    assert outcome.ok
    assert outcome.terminated == ()


def test_instance_that_refuses_termination_is_reported_with_its_reason(aws: EmulatedAws, cluster: str) -> None:
    ec2 = aws.client("ec2", REGION)
    protected = _launch(ec2, 1, {"elastic-slurm:cluster": cluster})
    ec2.modify_instance_attribute(InstanceId=protected[0], DisableApiTermination={"Value": True})

    outcome = deconfigure(ec2, aws.client("ssm", REGION), cluster, [], remaining_ms=lambda: 600_000)

    assert not outcome.ok
    assert "OperationNotPermitted" in outcome.reason
    assert "\n" not in outcome.reason
    ec2.modify_instance_attribute(InstanceId=protected[0], DisableApiTermination={"Value": False})
    ec2.terminate_instances(InstanceIds=protected)


def test_instances_still_running_at_the_deadline_fail_with_their_ids(aws: EmulatedAws, cluster: str) -> None:
    real = aws.client("ec2", REGION)
    stuck = _launch(real, 2, {"elastic-slurm:cluster": cluster})

    class AcceptsButNeverTerminates:
        """The real emulated EC2, except that TerminateInstances is accepted and nothing happens (slow shutdown)."""

        def __getattr__(self, name: str) -> Any:
            return getattr(real, name)

        def terminate_instances(self, **_: Any) -> dict[str, Any]:
            return {"TerminatingInstances": []}

    outcome = deconfigure(AcceptsButNeverTerminates(), aws.client("ssm", REGION), cluster, [], remaining_ms=lambda: 0)

    assert not outcome.ok
    assert outcome.reason.startswith(f"2 instance(s) of {cluster} still not terminated")
    assert all(i in outcome.reason for i in stuck)
    real.terminate_instances(InstanceIds=stuck)


def test_handler_reports_success_to_cloudformation_after_cleaning_up(
    aws: EmulatedAws, cluster: str, response_url: tuple[str, list[dict[str, Any]]], monkeypatch: pytest.MonkeyPatch
) -> None:
    url, bodies = response_url
    monkeypatch.setenv("AWS_ENDPOINT_URL", aws.url)
    monkeypatch.setenv("AWS_DEFAULT_REGION", REGION)
    ec2 = aws.client("ec2", REGION)
    compute = _launch(ec2, 2, {"elastic-slurm:cluster": cluster})

    deconfigure_handler.handler(_event("Delete", cluster, url), _Context())

    assert [b["Status"] for b in bodies] == ["SUCCESS"]
    assert bodies[0]["RequestId"] == "req-1"
    assert bodies[0]["PhysicalResourceId"] == f"deconfigure-{cluster}"
    assert set(_states(ec2, compute).values()) == {"terminated"}


def test_handler_create_touches_nothing(
    aws: EmulatedAws, cluster: str, response_url: tuple[str, list[dict[str, Any]]], monkeypatch: pytest.MonkeyPatch
) -> None:
    url, bodies = response_url
    monkeypatch.setenv("AWS_ENDPOINT_URL", aws.url)
    ec2 = aws.client("ec2", REGION)
    compute = _launch(ec2, 1, {"elastic-slurm:cluster": cluster})

    deconfigure_handler.handler(_event("Create", cluster, url), _Context())

    assert bodies[0]["Status"] == "SUCCESS"
    assert set(_states(ec2, compute).values()) == {"running"}
    ec2.terminate_instances(InstanceIds=compute)


def test_handler_reports_failed_with_one_line_reason_when_aws_is_unreachable(
    cluster: str, response_url: tuple[str, list[dict[str, Any]]], monkeypatch: pytest.MonkeyPatch
) -> None:
    url, bodies = response_url
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:9")  # discard port: connection refused
    monkeypatch.setenv("AWS_DEFAULT_REGION", REGION)
    monkeypatch.setattr(deconfigure_handler, "BOTO_CONFIG", Config(retries={"max_attempts": 1}))

    deconfigure_handler.handler(_event("Delete", cluster, url), _Context())

    assert bodies[0]["Status"] == "FAILED"
    assert "EndpointConnectionError" in bodies[0]["Reason"] or "Connect" in bodies[0]["Reason"]
    assert "\n" not in bodies[0]["Reason"]


def test_submit_hosts_get_the_clean_up_command_and_are_not_terminated(aws: EmulatedAws, cluster: str) -> None:
    ec2, ssm = aws.client("ec2", REGION), aws.client("ssm", REGION)
    submit = _launch(ec2, 1, {"elastic-slurm:submit-host": cluster})

    outcome = deconfigure(ec2, ssm, cluster, ["/shared", "/fsx"], remaining_ms=lambda: 600_000)

    assert outcome.ok, outcome.reason
    sent = ssm.list_commands(InstanceId=submit[0])["Commands"]
    assert len(sent) == 1
    assert sent[0]["DocumentName"] == "AWS-RunShellScript"
    assert "umount -l /fsx 2>/dev/null || true" in sent[0]["Parameters"]["commands"]
    assert _states(ec2, submit)[submit[0]] == "running"
    ec2.terminate_instances(InstanceIds=submit)


def test_handler_terminates_the_clusters_nodes_in_every_region(
    aws: EmulatedAws, cluster: str, response_url: tuple[str, list[dict[str, Any]]], monkeypatch: pytest.MonkeyPatch
) -> None:
    url, bodies = response_url
    monkeypatch.setenv("AWS_ENDPOINT_URL", aws.url)
    east, west = aws.client("ec2", "us-east-1"), aws.client("ec2", "us-west-2")
    home = _launch(east, 1, {"elastic-slurm:cluster": cluster})
    remote = _launch(west, 2, {"elastic-slurm:cluster": cluster})
    event = _event("Delete", cluster, url)
    event["ResourceProperties"]["Regions"] = ["us-east-1", "us-west-2"]

    deconfigure_handler.handler(event, _Context())

    assert bodies[0]["Status"] == "SUCCESS", bodies[0]["Reason"]
    assert "us-east-1, us-west-2" in bodies[0]["Reason"]
    assert set(_states(east, home).values()) == {"terminated"}
    assert set(_states(west, remote).values()) == {"terminated"}
