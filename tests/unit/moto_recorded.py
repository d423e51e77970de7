"""In-process moto (no server) for the unit tests that compare raw answers: the dummy credentials in the
environment (put back by the test's monkeypatch) and clients whose raw answer bodies are kept, in order."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from moto import mock_aws

from localcloud.aws.emulated_aws import DUMMY_CREDENTIALS

REGION = "us-east-1"


@contextlib.contextmanager
def recorded_clients(monkeypatch: pytest.MonkeyPatch, *services: str) -> Iterator[tuple[dict[str, Any], list[bytes]]]:
    """({service: client}, the raw bodies of their answers, appended as they come) inside one `mock_aws`."""
    for key, value in {**DUMMY_CREDENTIALS, "AWS_DEFAULT_REGION": REGION}.items():
        monkeypatch.setenv(key, value)
    with mock_aws():
        bodies: list[bytes] = []
        clients = {name: boto3.client(name, region_name=REGION) for name in services}
        for client in clients.values():
            client.meta.events.register(
                "before-parse.*.*", lambda response_dict, **_: bodies.append(response_dict["body"])
            )
        yield clients, bodies
