"""Fixtures for the power-save plugin tests: the session's test network and a fresh manifest per test."""

from __future__ import annotations

from pathlib import Path

import pytest

from localcloud.aws.emulated_aws import EmulatedAws
from slurm_plugin.manifest import Manifest
from tests.aws.plugin_env import Network, build_network, make_manifest


@pytest.fixture(scope="session")
def network(emulated_aws: EmulatedAws) -> Network:
    """VPCs, subnets and launch templates in the emulated AWS, built once."""
    return build_network(emulated_aws)


@pytest.fixture
def manifest(aws: EmulatedAws, network: Network, tmp_path: Path) -> Manifest:
    """A manifest for a cluster of its own (unique name, own state dir)."""
    return make_manifest(aws, network, tmp_path)
