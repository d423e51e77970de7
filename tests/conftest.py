"""Shared fixtures: one emulated AWS server (moto + fault layer) per test session, stopped at the end."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from localcloud.emulated_aws import DUMMY_CREDENTIALS, EmulatedAws

os.environ.setdefault("JSII_SILENCE_WARNING_DEPRECATED_NODE_VERSION", "1")
os.environ.setdefault("CDK_DISABLE_CLI_TELEMETRY", "true")  # never phone home from tests
for _key, _value in DUMMY_CREDENTIALS.items():
    os.environ.setdefault(_key, _value)
os.environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")


@pytest.fixture(scope="session")
def emulated_aws(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmulatedAws]:
    """A moto server with the fault layer on 127.0.0.1, shared by the session (faults cleared per test by users)."""
    handle = EmulatedAws.start(Path(tmp_path_factory.mktemp("emulated-aws")))
    try:
        yield handle
    finally:
        handle.stop()


@pytest.fixture
def aws(emulated_aws: EmulatedAws) -> Iterator[EmulatedAws]:
    """The session's emulated AWS with faults and call counters reset before and after the test."""
    emulated_aws.clear_faults()
    emulated_aws.reset_call_counts()
    yield emulated_aws
    emulated_aws.clear_faults()


# fixtures shared by the tests that run Slurm from the local cloud's root
from tests.slurm_in_root import munge_socket  # noqa: E402, F401

_SESSION_START = time.time()


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter, config: pytest.Config) -> None:
    """The fault soak's counters (tests/aws/test_fault_soak.py), when it ran in this session (in any xdist worker)."""
    soak = config.cache.get("elastic-slurm/fault-soak", None) if getattr(config, "cache", None) is not None else None
    if isinstance(soak, dict) and float(soak.get("at", 0)) >= _SESSION_START:
        terminalreporter.write_line(str(soak.get("line", "")))
