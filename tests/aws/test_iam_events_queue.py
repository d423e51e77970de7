"""The controller's `ConsumeClusterEvents` statement (stacks/node_policies.py) against what the cluster manager calls
(slurm_plugin/manager/events.py): ReceiveMessage and DeleteMessageBatch on the cluster's events queue.

SQS authorizes a batch call as its single action (DeleteMessageBatch needs `sqs:DeleteMessage`); the emulated AWS's
IAM gate does the same (localcloud/aws/iam_gate.py `IAM_ACTION_OF`). Before it did, every delete was refused in the
local cloud and each event came back after its visibility timeout — this test drives the manager's own receive and
delete functions signing as the controller through the enforcing gate."""

from __future__ import annotations

import json
import logging
import uuid

import pytest

from localcloud.aws.emulated_aws import EmulatedAws
from localcloud.aws.iam import ACCOUNT, Credentials, role_documents, without_statement
from localcloud.aws.iam_requests import AuthzRequest
from slurm_plugin.manager import events
from tests.aws.conftest import (
    ENFORCED_EVENTS_QUEUE,
    ENFORCED_REGION,
    ENFORCED_RESOURCES,
    ENFORCED_TARGETS,
    signed_client,
)
from tests.aws.iam_eval import evaluate

REGION = ENFORCED_REGION
QUEUE_ARN = ENFORCED_EVENTS_QUEUE
MANAGER_ACTIONS = ["sqs:ReceiveMessage", "sqs:DeleteMessage"]  # DeleteMessageBatch is authorized as DeleteMessage
WARNING = {"detail-type": events.SPOT_WARNING, "detail": {"instance-id": "i-0123456789abcdef0"}}


def _requests(queue_arn: str) -> list[AuthzRequest]:
    return [AuthzRequest(action, queue_arn, {}, f"{action} on {queue_arn}") for action in MANAGER_ACTIONS]


def test_the_controller_may_consume_the_clusters_events_queue_and_no_other() -> None:
    documents = role_documents("east", ENFORCED_TARGETS, controller=ENFORCED_RESOURCES)
    other = f"arn:aws:sqs:{REGION}:{ACCOUNT}:someone-elses-queue"
    decisions = evaluate({"controller": documents["controller"]}, [*_requests(QUEUE_ARN), *_requests(other)], ACCOUNT)
    assert decisions == ["Allowed", "Allowed", "ImplicitlyDenied", "ImplicitlyDenied"]
    without = without_statement(documents["controller"], "ConsumeClusterEvents")
    assert evaluate({"controller": without}, _requests(QUEUE_ARN), ACCOUNT) == ["ImplicitlyDenied"] * 2
    assert evaluate({"compute": documents["compute"]}, _requests(QUEUE_ARN), ACCOUNT) == ["ImplicitlyDenied"] * 2


def test_the_managers_receive_and_batch_delete_signing_as_the_controller_empty_the_queue(
    enforcing: tuple[EmulatedAws, dict[str, Credentials]], caplog: pytest.LogCaptureFixture
) -> None:
    aws, principals = enforcing
    queue = aws.client("sqs", REGION).create_queue(QueueName=f"events-{uuid.uuid4().hex[:8]}")["QueueUrl"]
    for _ in range(3):
        aws.client("sqs", REGION).send_message(QueueUrl=queue, MessageBody=json.dumps(WARNING))
    controller = signed_client(aws, principals["controller"], "sqs")
    with caplog.at_level(logging.ERROR, logger="slurm_plugin.manager.events"):
        received = events.receive(controller, queue)
        assert [m.events[0].kind for m in received] == ["spot"] * 3
        events.delete(controller, queue, [m.handle for m in received])
    assert caplog.records == []
    assert aws.messages_in_queue(queue, REGION) == 0


def test_compute_cannot_read_the_events_queue(
    enforcing: tuple[EmulatedAws, dict[str, Credentials]], caplog: pytest.LogCaptureFixture
) -> None:
    aws, principals = enforcing
    queue = aws.client("sqs", REGION).create_queue(QueueName=f"events-{uuid.uuid4().hex[:8]}")["QueueUrl"]
    aws.client("sqs", REGION).send_message(QueueUrl=queue, MessageBody=json.dumps(WARNING))
    with caplog.at_level(logging.ERROR, logger="slurm_plugin.manager.events"):
        assert events.receive(signed_client(aws, principals["compute"], "sqs"), queue) == []
    (refused,) = [r.getMessage() for r in caplog.records]
    assert "AccessDenied" in refused and "sqs:ReceiveMessage" in refused
    assert aws.messages_in_queue(queue, REGION) == 1
