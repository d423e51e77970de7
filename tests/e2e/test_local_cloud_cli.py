"""`elastic-slurm local status|interrupt` against the running local cloud of the session."""

from __future__ import annotations

import pytest

from elastic_slurm.cli import main
from localcloud.cloud import LocalCloud

pytestmark = pytest.mark.e2e


def test_status_lists_every_daemon_alive_and_the_nodes(cloud: LocalCloud, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["local", "status", "--state-dir", str(cloud.layout.root)]) == 0
    out = capsys.readouterr().out
    for daemon in ("slurmctld", "slurmdbd", "mariadbd", "munged", "emulated-aws", "instance-runner"):
        assert any(line.split()[:2] and line.split()[0] == daemon and "pid" in line for line in out.splitlines())
    assert f"nodes: {len(cloud.nodes())}" in out


def test_interrupting_an_unknown_node_is_a_one_line_error(
    cloud: LocalCloud, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["local", "interrupt", "cpu-small-999", "--state-dir", str(cloud.layout.root)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "cpu-small-999" in err
