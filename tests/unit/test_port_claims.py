"""localcloud/port_claims.py: a port picked by one local cloud is not picked by another until it is given back or its
claimer is gone (two clouds starting at once used to pick the same slurmctld port: "Address already in use")."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from localcloud import port_claims
from localcloud.aws import emulated_aws
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
        assert port_claims.claim([26000], tmp_path) is False  # claimed already, if by this process: not twice
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


def test_free_port_never_returns_a_port_it_returned_before_and_the_daemon_has_yet_to_bind(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A cloud picks all its ports (aws, mysql, slurmctld, ..., prometheus) before any daemon binds one: two picks of
    one still-unbound port in one process gave two daemons the same port (CI: prometheus "address already in use").
    The random draw is made to offer the first port twice, as it did by chance."""
    window = _three_unbound_ports()
    monkeypatch.setattr(port_claims, "CLAIMS_DIR", tmp_path)
    monkeypatch.setattr(emulated_aws, "daemon_port_range", lambda: window)
    draws = iter([0, 0, 1, 1, 2])
    monkeypatch.setattr(emulated_aws.secrets, "randbelow", lambda _n: next(draws))
    picks = [free_port() for _ in range(3)]
    assert picks == list(window)  # none picked twice


def _three_unbound_ports() -> range:
    for start in range(emulated_aws.daemon_port_range().stop - 3, emulated_aws.DAEMON_PORTS_FROM, -3):
        try:
            for port in range(start, start + 3):
                with socket.socket() as sock:
                    sock.bind(("127.0.0.1", port))
        except OSError:
            continue
        return range(start, start + 3)
    raise AssertionError("no three unbound ports in free_port's range")
