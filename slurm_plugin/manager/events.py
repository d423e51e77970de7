"""EC2 events from the SQS queue EventBridge feeds → actions (parsing and decisions pure; `drain_queue` does the I/O).

Handled (message body = the EventBridge event, raw or inside an SNS envelope):
- `EC2 Spot Instance Interruption Warning` and `EC2 Instance Rebalance Recommendation` → power the node down now
  (`POWER_DOWN_FORCE`: its job is requeued at once, before the instance goes);
- `EC2 Instance State-change Notification` to shutting-down / terminated / stopping / stopped → power the node down;
- `AWS Health Event` of EC2 scheduled changes (retirement, maintenance, reboot) → drain the node (jobs finish,
  then reconcile powers it down and the next power-up gets a new instance).
Events for instances that are not the cluster's (no node claims their IP) produce nothing.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from slurm_plugin.manager.model import EC2_PREFIX, GONE_INSTANCE_STATES, SPOT_PREFIX, Action, Instance, Kind, Node
from slurm_plugin.manager.reconcile import REASON_GONE

LOG = logging.getLogger(__name__)
SPOT_WARNING = "EC2 Spot Instance Interruption Warning"
REBALANCE = "EC2 Instance Rebalance Recommendation"
STATE_CHANGE = "EC2 Instance State-change Notification"
HEALTH = "AWS Health Event"
REASON_SPOT = f"{SPOT_PREFIX}Interruption) spot interruption warning"
REASON_REBALANCE = f"{SPOT_PREFIX}Rebalance) spot rebalance recommendation"
MAX_MESSAGES = 10  # ReceiveMessage's largest batch


@dataclass(frozen=True)
class Ec2Event:
    """One instance-level event: kind (spot, rebalance, state, scheduled), the instance, and a detail."""

    kind: str
    instance_id: str
    detail: str = ""


def parse_message(body: str) -> list[Ec2Event]:
    """An SQS message body → the instance events in it (none for anything unrecognised or malformed)."""
    try:
        event = json.loads(body)
        if isinstance(event, dict) and event.get("Type") == "Notification" and "Message" in event:
            event = json.loads(event["Message"])  # SNS envelope
    except (ValueError, TypeError):
        return []
    if not isinstance(event, dict):
        return []
    kind = str(event.get("detail-type", ""))
    detail = event.get("detail")
    if not isinstance(detail, dict):
        return []
    instance = str(detail.get("instance-id", ""))
    if kind == SPOT_WARNING and instance:
        return [Ec2Event("spot", instance, str(detail.get("instance-action", "terminate")))]
    if kind == REBALANCE and instance:
        return [Ec2Event("rebalance", instance)]
    if kind == STATE_CHANGE and instance:
        return [Ec2Event("state", instance, str(detail.get("state", "")))]
    if kind == HEALTH and detail.get("service") == "EC2":
        code = str(detail.get("eventTypeCode", ""))
        if "SCHEDULED" not in code and "RETIREMENT" not in code and "MAINTENANCE" not in code:
            return []
        entities = detail.get("affectedEntities", [])
        ids = [str(e.get("entityValue", "")) for e in entities if isinstance(e, dict)]
        return [Ec2Event("scheduled", i, code) for i in ids if i.startswith("i-")]
    return []


def event_actions(events: Sequence[Ec2Event], nodes: Sequence[Node], instances: Sequence[Instance]) -> list[Action]:
    """Actions for the events whose instance a node claims (by NodeAddr = private IP)."""
    ip_of = {i.instance_id: i.private_ip for i in instances if i.private_ip}
    node_at = {n.addr: n for n in nodes if n.addr and not n.powered_down}
    actions: list[Action] = []
    for event in events:
        node = node_at.get(ip_of.get(event.instance_id) or "")
        if node is None:
            LOG.info("event %s for %s: no node of this cluster runs on it", event.kind, event.instance_id)
            continue
        why = f"{event.kind} event for {event.instance_id}"
        if event.kind == "spot":
            actions.append(_down(node, REASON_SPOT, f"{why}: job requeued now", "spot_interruptions"))
        elif event.kind == "rebalance":
            actions.append(_down(node, REASON_REBALANCE, f"{why}: job requeued now", "rebalance_recommendations"))
        elif event.kind == "state" and event.detail in GONE_INSTANCE_STATES and not node.powering_down:
            actions.append(_down(node, REASON_GONE, f"{why} ({event.detail})", "instances_lost"))
        elif event.kind == "scheduled" and not node.drain and not node.powering_down:
            reason = f"{EC2_PREFIX}Scheduled) {event.detail}"
            actions.append(Action(Kind.DRAIN, node.name, why, reason=reason, counter="ec2_scheduled_events"))
    return actions


def _down(node: Node, reason: str, why: str, counter: str) -> Action:
    return Action(Kind.POWER_DOWN, node.name, why, reason=reason, counter=counter)


@dataclass(frozen=True)
class Message:
    """One SQS message: its receipt handle and the events in its body."""

    handle: str
    events: tuple[Ec2Event, ...]


def receive(sqs: Any, queue_url: str, max_batches: int = 10) -> list[Message]:
    """Up to `max_batches` ReceiveMessage calls (stop when the queue is empty) → the messages received."""
    received: list[Message] = []
    for _ in range(max_batches):
        try:
            reply = sqs.receive_message(QueueUrl=queue_url, MaxNumberOfMessages=MAX_MESSAGES, WaitTimeSeconds=0)
        except (ClientError, BotoCoreError) as exc:
            LOG.error("events: receive from %s failed: %s", queue_url, " ".join(str(exc).split()))
            break
        messages: list[Mapping[str, Any]] = reply.get("Messages", [])
        if not messages:
            break
        for message in messages:
            body = parse_message(str(message.get("Body", "")))
            received.append(Message(str(message["ReceiptHandle"]), tuple(body)))
    return received


def handled(
    messages: Sequence[Message], actions_of: Mapping[str, Sequence[Action]], done: Sequence[Action]
) -> list[str]:
    """The receipt handles of the messages whose every action was done (or that asked for none).

    A message whose action failed stays in the queue and comes back after its visibility timeout; one cycle's
    unrelated failure (another node's power-down) does not keep a handled event for a second round.
    """
    done_keys = {(a.kind, a.target) for a in done}
    return [m.handle for m in messages if all((a.kind, a.target) in done_keys for a in actions_of.get(m.handle, ()))]


def delete(sqs: Any, queue_url: str, handles: Sequence[str]) -> None:
    """Delete handled messages, 10 per DeleteMessageBatch; a refused entry or call is logged (it comes back)."""
    for start in range(0, len(handles), MAX_MESSAGES):
        chunk = handles[start : start + MAX_MESSAGES]
        entries = [{"Id": str(n), "ReceiptHandle": h} for n, h in enumerate(chunk)]
        try:
            reply = sqs.delete_message_batch(QueueUrl=queue_url, Entries=entries)
        except (ClientError, BotoCoreError) as exc:
            LOG.error("events: delete failed (messages will come back): %s", " ".join(str(exc).split()))
            continue
        for failed in reply.get("Failed", []):  # a 200 reply may still refuse some entries
            LOG.error("events: delete of a message refused (it will come back): %s %s",
                      failed.get("Code", "?"), failed.get("Message", ""))  # fmt: skip
