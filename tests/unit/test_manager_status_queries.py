"""The manager's status observation asks EC2 only for instances in trouble (three filtered, paginated queries per
region), keeps only its own running instances from the answers, and survives a failing query; the EC2 adapter reads
EC2's ISO 8601 times on a fast path that gives what botocore's own parser gives."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import boto3
import pytest
from botocore.stub import Stubber
from botocore.utils import parse_timestamp

from slurm_plugin.manager.observe import STATUS_PAGE_SIZE, STATUS_QUERIES, describe_status
from slurm_plugin.powersave.ec2 import Ec2, iso_timestamp

SINCE = datetime(2026, 11, 26, 1, 0, tzinfo=UTC)


def _client() -> tuple[Any, Stubber]:
    client = boto3.client("ec2", region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="x")
    return client, Stubber(client)


def _impaired(instance_id: str) -> dict[str, Any]:
    details = [{"Name": "reachability", "Status": "failed", "ImpairedSince": SINCE}]
    return {"InstanceId": instance_id, "InstanceStatus": {"Status": "impaired", "Details": details}}


def _retiring(instance_id: str) -> dict[str, Any]:
    event = {"Code": "instance-retirement", "Description": "retiring", "NotBefore": SINCE}
    return {"InstanceId": instance_id, "Events": [event]}


def test_three_filtered_queries_whatever_the_number_of_instances() -> None:
    client, stub = _client()
    answers: tuple[dict[str, Any], ...] = (
        {"InstanceStatuses": [_impaired("i-ours1"), _impaired("i-other")], "NextToken": "page2"},
        {"InstanceStatuses": [_impaired("i-ours2")]},
        {"InstanceStatuses": []},
        {"InstanceStatuses": [_retiring("i-ours3"), _retiring("i-stopped")]},
    )
    expected = [
        {"Filters": STATUS_QUERIES[0], "MaxResults": STATUS_PAGE_SIZE},
        {"Filters": STATUS_QUERIES[0], "MaxResults": STATUS_PAGE_SIZE, "NextToken": "page2"},
        {"Filters": STATUS_QUERIES[1], "MaxResults": STATUS_PAGE_SIZE},
        {"Filters": STATUS_QUERIES[2], "MaxResults": STATUS_PAGE_SIZE},
    ]
    for answer, params in zip(answers, expected, strict=True):
        stub.add_response("describe_instance_status", answer, params)
    ours = [f"i-{n}" for n in range(5000)] + ["i-ours1", "i-ours2", "i-ours3"]  # i-stopped is not running

    with stub:
        found = describe_status(client, ours)
        stub.assert_no_pending_responses()

    assert sorted(found) == ["i-ours1", "i-ours2", "i-ours3"]
    assert found["i-ours1"][0] == SINCE and found["i-ours1"][1] == ()
    assert [e.code for e in found["i-ours3"][1]] == ["instance-retirement"]


def test_a_failing_query_leaves_the_others_and_no_instances_means_no_call() -> None:
    client, stub = _client()
    stub.add_client_error("describe_instance_status", "RequestLimitExceeded")
    stub.add_response("describe_instance_status", {"InstanceStatuses": [_impaired("i-a")]})
    stub.add_response("describe_instance_status", {"InstanceStatuses": []})
    with stub:
        assert describe_status(client, []) == {}  # nothing running: EC2 is not asked
        found = describe_status(client, ["i-a"])
        stub.assert_no_pending_responses()
    assert list(found) == ["i-a"]


@pytest.mark.parametrize(
    "text", ["2026-11-26T02:53:45.000Z", "2026-11-26T02:53:45Z", "2026-11-26T02:53:45.123456+00:00"]
)
def test_iso_times_read_fast_equal_botocores_reading(text: str) -> None:
    fast = iso_timestamp(text)
    assert fast == parse_timestamp(text) and fast.utcoffset() is not None


def test_other_time_forms_go_to_botocores_parser() -> None:
    assert iso_timestamp(1764125383) == parse_timestamp(1764125383)  # type: ignore[arg-type]  # botocore takes numbers
    assert iso_timestamp("2026-11-26T02:53:45") == parse_timestamp("2026-11-26T02:53:45")  # no zone: botocore's way
    assert iso_timestamp("Thu, 26 Nov 2026 02:53:45 GMT") == parse_timestamp("Thu, 26 Nov 2026 02:53:45 GMT")


def test_ec2_adapter_clients_parse_times_with_the_fast_path() -> None:
    client: Any = Ec2("http://127.0.0.1:9").client("us-east-1")
    factory = client._endpoint._response_parser_factory  # what parses the HTTP answers
    assert factory.create_parser("ec2")._timestamp_parser is iso_timestamp
    other: Any = boto3.client("ec2", region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="x")
    assert other._endpoint._response_parser_factory.create_parser("ec2")._timestamp_parser is parse_timestamp
