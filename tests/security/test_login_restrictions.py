"""Who may log in where (issue 30, finding 5: any directory user could SSH to a controller; no pam_slurm_adopt).

- Controllers admit only `directory.controller_login_groups` (sssd's simple access provider in a conf.d snippet), no
  directory user without groups (`access_provider = deny`); local accounts never reach sssd. The snippet is written
  by assets/bootstrap/elastic-slurm-directory, run here for real (stand-ins for aws, systemctl, getent, the CLI) with
  the real `python -m slurm_plugin.render.sssd`.
- With `directory.pam_slurm_adopt`, the same script puts pam_slurm_adopt last in sshd's account stack on compute
  nodes (pam_systemd out of its sessions) and slurm.conf gets PrologFlags=Contain.
- Group names are data at `validate` (a pattern) and again at the sink.

The controller's snippet meets real PAM and sssd in tests/security/test_controller_login_e2e.py; pam_slurm_adopt itself
is not run (the local cloud's image has no sshd, and its Slurm build no pam_slurm_adopt.so).
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from cluster_config.model_access import Directory
from slurm_plugin.render.sssd import SssdConfigError, main, render_access_conf
from tests.unit.test_render import render_small

SCRIPT = Path(__file__).resolve().parents[2] / "assets" / "bootstrap" / "elastic-slurm-directory"
REPO = Path(__file__).resolve().parents[2]
SECTION: dict[str, Any] = {"ldap_uri": ["ldaps://ldap.example.com"], "search_base": "dc=example,dc=com"}
SSHD = "auth       include      common-auth\naccount    include      common-account\nsession    required     pam_systemd.so\n"


def _directory(**fields: Any) -> Directory:
    return Directory.model_validate({**SECTION, **fields})


# ---------------------------------------------------------------- the snippet (pure)
def test_a_controller_admits_only_its_login_groups() -> None:
    text = render_access_conf(_directory(controller_login_groups=["hpc-admins", "ops@example.com"]), "controller")
    assert text is not None
    assert text.splitlines()[1:] == [
        "[domain/directory]",
        "access_provider = simple",
        "simple_allow_groups = hpc-admins, ops@example.com",
    ]


def test_a_controller_without_login_groups_admits_no_directory_user() -> None:
    """sssd's simple provider admits everyone when its lists are empty: no groups means `deny`."""
    text = render_access_conf(_directory(), "controller")
    assert text is not None and text.splitlines()[1:] == ["[domain/directory]", "access_provider = deny"]


@pytest.mark.parametrize("role", ["compute", "login"])
def test_other_nodes_get_no_snippet(role: str) -> None:
    assert render_access_conf(_directory(controller_login_groups=["hpc-admins"]), role) is None


@pytest.mark.parametrize(
    "group",
    [
        "admins,wheel",
        "admins wheel",
        "a\n[sssd]",
        "$(id)",
        "`id`",
        "a;b",
        "#x",
        "",
        "x" * 65,
        "\uff41\uff44\uff4d\uff49\uff4e",  # fullwidth look-alikes of "admin"
    ],
)
def test_a_group_name_that_is_not_data_is_refused_at_validate(group: str) -> None:
    with pytest.raises(ValidationError) as info:
        _directory(controller_login_groups=[group])
    error = info.value.errors()[0]
    # the field's pattern, or the model-wide check for control characters (which names the field in its message)
    assert error["loc"][:2] == ("controller_login_groups", 0) or "controller_login_groups" in error["msg"]


def test_the_sink_refuses_a_group_that_bypassed_validation() -> None:
    bad = Directory.model_construct(**{**SECTION, "controller_login_groups": ["x\n[sssd]"], "domain_settings": {}})
    with pytest.raises(SssdConfigError, match="controller_login_groups"):
        render_access_conf(bad, "controller")


def test_the_snippet_is_written_mode_0600_and_removed_on_other_roles(tmp_path: Path) -> None:
    section = tmp_path / "directory.json"
    section.write_text(json.dumps({**SECTION, "controller_login_groups": ["hpc-admins"]}))
    out = tmp_path / "50-elastic-slurm-access.conf"
    assert main(["--role", "controller", "--directory-json", str(section), "--out", str(out)]) == 0
    assert stat.S_IMODE(out.stat().st_mode) == 0o600 and "simple_allow_groups = hpc-admins" in out.read_text()
    assert main(["--role", "compute", "--directory-json", str(section), "--out", str(out)]) == 0
    assert not out.exists()


def test_a_bad_section_is_one_line_and_status_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    section = tmp_path / "directory.json"
    section.write_text('{"ldap_uri": []}')
    assert main(["--role", "controller", "--directory-json", str(section), "--out", str(tmp_path / "x")]) == 2
    assert len(capsys.readouterr().err.strip().splitlines()) == 1


# ---------------------------------------------------------------- the boot step, run for real
def _stub(path: Path, body: str) -> None:
    path.write_text(f"#!/bin/bash\n{body}\n")
    path.chmod(0o755)


def _boot(tmp_path: Path, role: str, section: dict[str, Any], module: bool = True) -> subprocess.CompletedProcess[str]:
    bin_dir, etc, pam_lib = tmp_path / "bin", tmp_path / "etc", tmp_path / "security"
    for d in (bin_dir, etc / "sssd", etc / "pam.d", pam_lib):
        d.mkdir(parents=True, exist_ok=True)
    if module:
        (pam_lib / "pam_slurm_adopt.so").write_bytes(b"\x7fELF")
    if not (etc / "pam.d" / "sshd").exists():
        (etc / "pam.d" / "sshd").write_text(SSHD)
    _stub(bin_dir / "aws", f"echo '{json.dumps({**SECTION, **section})}'")
    _stub(bin_dir / "systemctl", "exit 0")
    _stub(bin_dir / "elastic-slurm", 'echo "[sssd]" > "${@: -1}"')
    _stub(bin_dir / "getent", "exit 2")
    env = {
        **os.environ,
        "PATH": f"{bin_dir}:{os.environ['PATH']}",
        "PYTHONPATH": str(REPO),
        "ES_DIRECTORY_PARAMETER": "/elastic-slurm/prod/directory",
        "ES_ROLE": role,
        "ELASTIC_SLURM_BIN": str(bin_dir),
        "ELASTIC_SLURM_ETC": str(etc),
        "ELASTIC_SLURM_PYTHON": sys.executable,
        "ELASTIC_SLURM_PAM_DIRS": f"{tmp_path / 'nowhere'} {pam_lib}",
    }
    return subprocess.run(["bash", str(SCRIPT)], env=env, capture_output=True, text=True, timeout=120, check=False)


def test_the_controller_boot_writes_the_access_snippet(tmp_path: Path) -> None:
    result = _boot(tmp_path, "controller", {"controller_login_groups": ["hpc-admins"]})
    assert result.returncode == 0, result.stderr
    snippet = tmp_path / "etc" / "sssd" / "conf.d" / "50-elastic-slurm-access.conf"
    assert "access_provider = simple" in snippet.read_text()
    assert stat.S_IMODE(snippet.stat().st_mode) == 0o600
    assert (tmp_path / "etc" / "pam.d" / "sshd").read_text() == SSHD  # no pam_slurm_adopt on a controller


def test_a_compute_boot_with_pam_slurm_adopt_installs_the_account_line_once(tmp_path: Path) -> None:
    for _ in range(2):  # a re-run (after a config update) leaves one line
        result = _boot(tmp_path, "compute", {"pam_slurm_adopt": True})
        assert result.returncode == 0, result.stderr
    sshd = (tmp_path / "etc" / "pam.d" / "sshd").read_text().splitlines()
    adopt = [line for line in sshd if "pam_slurm_adopt.so" in line]
    assert adopt == [
        f"account    required    {tmp_path / 'security' / 'pam_slurm_adopt.so'}  # elastic-slurm: directory.pam_slurm_adopt"
    ]
    assert sshd[-1] == adopt[0]  # the last account module
    assert [line for line in sshd if "pam_systemd" in line and not line.startswith("#")] == []
    assert not (tmp_path / "etc" / "sssd" / "conf.d" / "50-elastic-slurm-access.conf").exists()


def test_a_compute_boot_without_the_option_leaves_sshd_alone(tmp_path: Path) -> None:
    result = _boot(tmp_path, "compute", {})
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "etc" / "pam.d" / "sshd").read_text() == SSHD


def test_pam_slurm_adopt_without_the_module_fails_the_boot_in_one_line(tmp_path: Path) -> None:
    result = _boot(tmp_path, "compute", {"pam_slurm_adopt": True}, module=False)
    assert result.returncode == 1
    assert len(result.stderr.splitlines()) == 1 and "pam_slurm_adopt.so" in result.stderr


# ---------------------------------------------------------------- slurm.conf
def test_pam_slurm_adopt_renders_prolog_flags_contain() -> None:
    directory = {**SECTION, "pam_slurm_adopt": True}
    on = render_small(directory=directory).slurm_conf
    off = render_small(directory=SECTION).slurm_conf
    assert [line for line in on.splitlines() if line.startswith("PrologFlags")] == ["PrologFlags=Contain"]
    assert [line for line in off.splitlines() if line.startswith("PrologFlags")] == []
