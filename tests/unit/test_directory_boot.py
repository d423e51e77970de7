"""assets/bootstrap/elastic-slurm-directory, run for real with stand-ins for aws, systemctl, getent and the
render-sssd command: a directory that serves an account or group with the slurm account's id (64030, the SlurmUser)
stops sssd and fails the boot in one line; one that does not starts sssd (tests/e2e/test_directory_e2e.py runs the
script against a real slapd and sssd)."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "assets" / "bootstrap" / "elastic-slurm-directory"
SECTION = {"ldap_uri": ["ldaps://ldap.example.com"], "search_base": "dc=example,dc=com"}


def _stub(path: Path, body: str) -> None:
    path.write_text(f"#!/bin/bash\n{body}\n")
    path.chmod(0o755)


def _run(tmp_path: Path, clash: str | None) -> tuple[subprocess.CompletedProcess[str], list[str]]:
    """`clash`: the getent database (passwd or group) in which the directory holds id 64030, or None."""
    bin_dir, etc = tmp_path / "bin", tmp_path / "etc"
    bin_dir.mkdir()
    (etc / "sssd").mkdir(parents=True)
    calls = tmp_path / "systemctl.calls"
    _stub(bin_dir / "aws", f"echo '{json.dumps(SECTION)}'")
    _stub(bin_dir / "systemctl", f'echo "$*" >> {calls}')
    _stub(bin_dir / "elastic-slurm", 'echo "[sssd]" > "${@: -1}"')
    answer = "mallory:x:64030:64030::/home/mallory:/bin/bash" if clash == "passwd" else "admins:x:64030:"
    _stub(bin_dir / "getent", f'[ "$1 $2 $3 $4" = "-s sss {clash} 64030" ] && {{ echo "{answer}"; exit 0; }}; exit 2')
    env = {
        **os.environ,
        "PATH": f"{bin_dir}:{os.environ['PATH']}",
        "ES_DIRECTORY_PARAMETER": "/elastic-slurm/prod/directory",
        "ELASTIC_SLURM_BIN": str(bin_dir),
        "ELASTIC_SLURM_ETC": str(etc),
    }
    result = subprocess.run(["bash", str(SCRIPT)], env=env, capture_output=True, text=True, timeout=60, check=False)
    return result, calls.read_text().splitlines() if calls.exists() else []


@pytest.mark.parametrize("database", ["passwd", "group"])
def test_a_directory_id_of_the_slurm_account_stops_sssd_and_fails_the_boot(tmp_path: Path, database: str) -> None:
    result, calls = _run(tmp_path, database)
    assert result.returncode == 1
    assert len(result.stderr.splitlines()) == 1 and "64030" in result.stderr and f"({database})" in result.stderr
    assert calls[-1] == "disable --now sssd"


def test_a_directory_without_that_id_starts_sssd(tmp_path: Path) -> None:
    result, calls = _run(tmp_path, None)
    assert result.returncode == 0, result.stderr
    assert calls == ["enable sssd", "restart sssd"]
    assert "sssd serves users of dc=example,dc=com" in result.stdout
