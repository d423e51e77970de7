"""localcloud/port_claims.py: a port picked by one local cloud is not picked by another until it is given back or its
claimer is gone (two clouds starting at once used to pick the same slurmctld port: "Address already in use")."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from localcloud import port_claims
from localcloud.aws.emulated_aws import free_port
from localcloud.cloud_parts import port_block


def test_a_claimed_port_is_refused_to_another_live_process_until_released(tmp_path: Path) -> None:
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        (tmp_path / "26001").write_text(f"{other.pid}\n")  # as that process's claim() writes it
        assert port_claims.claim([26000, 26001], tmp_path) is False
        assert not (tmp_path / "26000").exists()  # all or nothing
        assert port_claims.claim([26000], tmp_path) is True
        assert (tmp_path / "26000").read_text().strip() == str(os.getpid())
        assert port_claims.claim([26000], tmp_path) is True  # this process's own claim again
        port_claims.release([26000, 26001], tmp_path)
        assert not (tmp_path / "26000").exists()
        assert (tmp_path / "26001").exists()  # the other process's claim is not ours to give back
    finally:
        other.kill()
        other.wait()
    assert port_claims.claim([26001], tmp_path) is True  # its claimer is gone: the claim is stale


def test_a_clouds_ports_and_slurmd_block_are_given_back(tmp_path: Path) -> None:
    ports = {"aws": 27000, "mysql": 27001, "slurmctld": 27002, "slurmd_base": 15000, "sackd": 15003, "webui": 0}
    assert port_claims.claim([27000, 27001, 27002], tmp_path)
    assert port_claims.claim(range(15000, 15004), tmp_path)
    port_claims.release_cloud(ports, tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == [".lock"]


def test_free_port_and_port_block_claim_what_they_return(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(port_claims, "CLAIMS_DIR", tmp_path)
    port = free_port()
    base = port_block(3)
    claimed = {int(p.name) for p in tmp_path.iterdir() if p.name.isdigit()}
    assert claimed == {port, base, base + 1, base + 2}
    assert all((tmp_path / str(p)).read_text().strip() == str(os.getpid()) for p in claimed)
