"""clusters[].directory: the section's rules (one-line errors naming the path), sssd.conf as `render-sssd` writes it
(mode 0600, the bind password from the secret's file, the operator's domain options), the parameter's JSON and the
user-data value every role's boot gets."""

from __future__ import annotations

import copy
import json
import stat
from pathlib import Path
from typing import Any

import pytest

from cluster_config import ConfigInvalid, parse
from cluster_config.model_access import Directory
from elastic_slurm.cli import main
from slurm_plugin.render.sssd import SssdConfigError, load_section, render_sssd_conf, section_json
from stacks.user_data import boot_commands, directory_values
from tests.unit.test_config_invalid import base

SECRET = "arn:aws:secretsmanager:us-east-1:123456789012:secret:ldap-bind"
SECTION: dict[str, Any] = {
    "ldap_uri": ["ldaps://ldap1.example.com", "ldaps://ldap2.example.com:636"],
    "search_base": "dc=example,dc=com",
    "bind_dn": "cn=reader,dc=example,dc=com",
    "bind_password_secret_arn": SECRET,
    "domain_settings": {"ldap_id_use_start_tls": False, "ldap_user_search_base": "ou=people,dc=example,dc=com"},
}


def _errors(section: dict[str, Any]) -> list[str]:
    data = base()
    data["clusters"][0]["directory"] = section
    with pytest.raises(ConfigInvalid) as info:
        parse(data)
    return [str(e) for e in info.value.errors]


def test_sssd_conf_has_one_ldap_domain_with_the_bind_account_and_the_operators_options() -> None:
    text = render_sssd_conf(Directory.model_validate(SECTION), "s3cret\n")
    lines = text.splitlines()
    assert "domains = directory" in lines and "[domain/directory]" in lines
    assert "ldap_uri = ldaps://ldap1.example.com, ldaps://ldap2.example.com:636" in lines
    assert "ldap_default_bind_dn = cn=reader,dc=example,dc=com" in lines
    assert "ldap_default_authtok = s3cret" in lines  # the secret's trailing newline is not part of the password
    assert "ldap_tls_reqcert = demand" in lines and "ldap_schema = rfc2307" in lines
    assert "ldap_id_use_start_tls = false" in lines
    assert "ldap_user_search_base = ou=people,dc=example,dc=com" in lines
    assert "filter_users = root, slurm, munge" in lines


def test_anonymous_binds_write_no_bind_account() -> None:
    anonymous = {k: v for k, v in SECTION.items() if k not in ("bind_dn", "bind_password_secret_arn")}
    text = render_sssd_conf(Directory.model_validate(anonymous), None)
    assert "ldap_default_bind_dn" not in text and "ldap_default_authtok" not in text


def test_a_missing_or_multiline_password_is_one_line() -> None:
    section = Directory.model_validate(SECTION)
    with pytest.raises(SssdConfigError, match="bind password secret is empty"):
        render_sssd_conf(section, "")
    with pytest.raises(SssdConfigError, match="more than one line"):
        render_sssd_conf(section, "one\ntwo")


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"bind_dn": None}, "bind_dn and bind_password_secret_arn go together"),
        (
            {"domain_settings": {"ldap_uri": "ldap://x"}},
            "key 'ldap_uri' is set by elastic-slurm (set directory.ldap_uri)",
        ),
        ({"domain_settings": {"ldap_default_authtok": "pw"}}, "never a password in the config"),
        ({"ldap_uri": ["http://ldap.example.com"]}, "ldap_uri[0]"),
        ({"search_base": "example.com"}, "search_base"),
    ],
)
def test_bad_directory_sections_are_refused_naming_the_path(change: dict[str, Any], message: str) -> None:
    section = copy.deepcopy(SECTION)
    section.update(change)
    errors = _errors({k: v for k, v in section.items() if v is not None})
    assert len(errors) == 1 and errors[0].startswith("clusters[0].directory") and message in errors[0], errors


def test_every_node_role_names_the_directory_parameter_and_runs_the_directory_step() -> None:
    data = base()
    data["clusters"][0]["directory"] = SECTION
    cluster = parse(data).clusters[0]
    assert directory_values(cluster) == {"ES_DIRECTORY_PARAMETER": "/elastic-slurm/alpha/directory"}
    assert cluster.directory is not None
    text = section_json(cluster.directory)
    assert load_section(text) == cluster.directory
    assert json.loads(text)["bind_password_secret_arn"] == SECRET  # the step reads the secret's ARN from it
    for role in ("controller", "compute", "login"):
        lines = boot_commands(role, directory_values(cluster))
        assert "/opt/elastic-slurm/bin/elastic-slurm-directory" in lines
        assert lines.index("/opt/elastic-slurm/bin/elastic-slurm-directory") < lines.index(
            "/opt/elastic-slurm/bin/elastic-slurm-custom-actions on_node_start"
        )
    assert directory_values(parse(base()).clusters[0]) == {}


def test_render_sssd_writes_the_file_with_mode_0600(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "password").write_text("s3cret\n")
    section = tmp_path / "directory.json"
    section.write_text(section_json(Directory.model_validate(SECTION)))
    out = tmp_path / "sssd" / "sssd.conf"
    argv = ["render-sssd", "--directory-json", str(section), "--password-file", str(tmp_path / "password")]
    assert main([*argv, "--out", str(out)]) == 0
    assert stat.S_IMODE(out.stat().st_mode) == 0o600 and "ldap_default_authtok = s3cret" in out.read_text()
    section.write_text("not json")
    assert main([*argv, "--out", str(out)]) == 2
    assert capsys.readouterr().err.startswith("elastic-slurm render-sssd: --directory-json: not a directory section")


def test_sssd_serves_no_system_id_and_a_lower_min_id_is_refused() -> None:
    lines = render_sssd_conf(Directory.model_validate(SECTION), "s3cret").splitlines()
    assert "min_id = 1000" in lines
    lowered = Directory.model_validate({**SECTION, "domain_settings": {"min_id": 0}})
    with pytest.raises(SssdConfigError, match="min_id must be at least 1000"):
        render_sssd_conf(lowered, "s3cret")
