"""How emulated AWS servers start and stop (localcloud/aws/emulated_aws.py): forked by their process's zygote, which
imported moto once, each with its own state, stopped by PID; one that
cannot serve fails its start with its log named; a server outlives the zygote that forked it (a `local up` that
exits leaves its cloud running)."""

from __future__ import annotations

import socket
import time
from pathlib import Path

import pytest

from localcloud.aws import emulated_aws
from localcloud.aws.emulated_aws import EmulatedAws, free_port


def _parent(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])


def test_servers_are_forked_by_one_zygote_each_with_its_own_state(tmp_path: Path) -> None:
    first = EmulatedAws.start(tmp_path / "first")
    second = EmulatedAws.start(tmp_path / "second")
    try:
        zygote = emulated_aws._zygote().process.pid
        assert _parent(first.pid) == _parent(second.pid) == zygote
        first.client("ec2").create_vpc(CidrBlock="127.20.0.0/16")
        cidrs = [v["CidrBlock"] for v in second.client("ec2").describe_vpcs()["Vpcs"]]
        assert "127.20.0.0/16" not in cidrs  # each server its own moto state
        assert "READY" in (tmp_path / "first" / "emulated-aws.log").read_text()
    finally:
        first.stop()
        second.stop()
    assert not Path(f"/proc/{first.pid}").exists() and not Path(f"/proc/{second.pid}").exists()  # reaped by the zygote


def test_a_server_that_cannot_bind_its_port_fails_its_start_naming_its_log(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        with pytest.raises(RuntimeError, match=r"^emulated AWS exited; see .*emulated-aws\.log$"):
            EmulatedAws.start(tmp_path, port=taken.getsockname()[1], timeout=30)
    assert "Address already in use" in (tmp_path / "emulated-aws.log").read_text()


def test_a_server_outlives_the_zygote_that_forked_it(tmp_path: Path) -> None:
    zygote = emulated_aws._Zygote()  # a zygote of this test's own (the process's shared one goes on)
    port = free_port()
    pid = zygote.spawn(port, tmp_path / "emulated-aws.log")
    server = EmulatedAws(url=f"http://127.0.0.1:{port}", pid=pid, started=True)
    try:
        zygote.close()  # what the end of the process that started it does (atexit)
        assert zygote.process.returncode == 0
        for _ in range(150):
            try:
                server._request("GET", "/_localcloud/faults")
                break
            except OSError:
                time.sleep(0.2)
        else:
            pytest.fail("the server did not answer after its zygote ended")
        assert server.client("sts").get_caller_identity()["Account"]
        assert _parent(pid) != zygote.process.pid
    finally:
        server.stop()
    assert not emulated_aws._alive(pid)  # ended (a zombie until whoever adopted it reaps it)
