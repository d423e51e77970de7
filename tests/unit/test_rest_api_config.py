"""`clusters[].rest_api` (docs/rest-api.md): the field, its conflicts (one line naming the field), its update policy,
what render writes (slurm.conf's JWT lines, rest-api.env) and the controller security group rule."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from cluster_config import ConfigInvalid, parse, slurm_release
from cluster_config.config_paths import parse_pattern
from cluster_config.model_rest_api import DATA_PARSER
from cluster_config.update_policy import Policy, rule_for
from elastic_slurm.cli import main
from slurm_plugin.render import rest_api
from slurm_plugin.render.base import BaseSettings, render_base_conf
from slurm_plugin.render.dbd import render_slurmdbd_conf
from tests.unit.cache_fixture import write_fixture_cache
from tests.unit.test_config_invalid import base, set_path
from tests.unit.test_render import small_config

REST = "clusters[0].rest_api"


def _errors(data: dict[str, Any]) -> list[tuple[str, str]]:
    with pytest.raises(ConfigInvalid) as caught:
        parse(data)
    return [(e.path, e.message) for e in caught.value.errors]


def _enabled(**fields: Any) -> dict[str, Any]:
    data = base()
    set_path(data, REST, {"enabled": True, **fields})
    return data


def test_rest_api_is_off_by_default_with_slurms_port_and_8080() -> None:
    rest = parse(base()).clusters[0].rest_api
    assert (rest.enabled, rest.port, rest.web_port, rest.allowed_cidrs) == (False, 6820, 8080, [])
    assert parse(_enabled(allowed_cidrs=["100.64.3.0/24"])).clusters[0].rest_api.allowed_cidrs == ["100.64.3.0/24"]


def test_one_port_for_both_daemons_is_one_error_naming_web_port() -> None:
    assert _errors(_enabled(port=7000, web_port=7000)) == [
        (f"{REST}.web_port", "the web page and slurmrestd cannot share port 7000")
    ]


def test_a_slurm_daemon_port_is_refused() -> None:
    assert _errors(_enabled(web_port=6817)) == [(f"{REST}.web_port", "port 6817 is slurmctld's on the controller")]


def test_the_whole_internet_is_refused_as_allowed_cidr() -> None:
    [(where, message)] = _errors(_enabled(allowed_cidrs=["100.72.0.0/15", "0.0.0.0/0"]))
    assert where == f"{REST}.allowed_cidrs[1]"
    assert "is not private address space" in message
    halves = _errors(_enabled(allowed_cidrs=["0.0.0.0/1", "128.0.0.0/1"]))
    assert [where for where, _ in halves] == [f"{REST}.allowed_cidrs[0]", f"{REST}.allowed_cidrs[1]"]


@pytest.mark.parametrize("cidr", ["1.0.0.0/8", "203.0.113.0/24", "100.128.0.0/16", "2001:db8::/32", "fc00::/6"])
def test_public_address_space_is_refused_as_allowed_cidr(cidr: str) -> None:
    [(where, message)] = _errors(_enabled(allowed_cidrs=["100.64.0.0/10", "fd00::/8", cidr]))
    assert where == f"{REST}.allowed_cidrs[2]" and "not private address space" in message


def test_a_token_lifespan_outside_its_bounds_is_refused() -> None:
    with pytest.raises(ConfigInvalid) as info:
        parse(_enabled(max_token_lifespan=10))
    assert [e.path for e in info.value.errors] == [f"{REST}.max_token_lifespan"]


def test_allowed_cidrs_without_the_api_enabled_is_an_error() -> None:
    data = base()
    set_path(data, REST, {"allowed_cidrs": ["100.72.0.0/15"]})
    assert _errors(data) == [
        (f"{REST}.allowed_cidrs", "the REST API is not enabled: set rest_api.enabled: true or remove them")
    ]


def test_a_bad_cidr_names_the_field() -> None:
    [(where, message)] = _errors(_enabled(allowed_cidrs=["198.18.0.300/15"]))
    assert where.startswith(f"{REST}.allowed_cidrs")
    assert "is not a CIDR" in message


def test_a_users_auth_alt_types_conflicts_with_the_rest_api() -> None:
    data = _enabled()
    set_path(data, "clusters[0].slurm_settings", {"AuthAltTypes": "auth/jwt"})
    assert _errors(data) == [
        (
            "clusters[0].slurm_settings.AuthAltTypes",
            "rest_api.enabled sets AuthAltTypes=auth/jwt and its key: remove this setting or disable the REST API",
        )
    ]


@pytest.mark.parametrize("version", ["24.11.5", "25.11.7"])
def test_a_release_that_does_not_serve_the_pages_data_parser_is_refused_with_the_rest_api(version: str) -> None:
    data = _enabled()
    set_path(
        data,
        "clusters[0].images",
        {"slurm_version": version, "slurm_source": {"url": "https://example.com/s.tar.bz2", "sha256": "a" * 64}},
    )
    [(where, message)] = _errors(data)
    assert where == f"{REST}.enabled"
    assert f"Slurm {version} is not supported with the REST API (the web page speaks {DATA_PARSER}" in message


def test_the_pinned_release_and_its_point_releases_are_accepted_with_the_rest_api() -> None:
    pinned = parse(_enabled()).clusters[0]  # the pinned release (cluster_config/slurm_release.py)
    assert (pinned.rest_api.enabled, pinned.images.slurm_version) == (True, slurm_release.VERSION)
    data = _enabled()
    set_path(
        data,
        "clusters[0].images",
        {"slurm_version": "26.05.9", "slurm_source": {"url": "https://example.com/s.tar.bz2", "sha256": "a" * 64}},
    )
    later = parse(data).clusters[0]
    assert (later.rest_api.enabled, later.images.slurm_version) == (True, "26.05.9")


def test_update_policy_of_each_field() -> None:
    def policy(path: str) -> Policy:
        return rule_for(parse_pattern(path)).policy

    assert policy("clusters[0].rest_api.enabled") == Policy.RECONFIGURE
    assert policy("clusters[0].rest_api.web_port") == Policy.RECONFIGURE
    assert policy("clusters[0].rest_api.allowed_cidrs[0]") == Policy.NONE


def test_render_adds_jwt_auth_with_the_key_in_the_shared_state_dir() -> None:
    config = small_config(rest_api={"enabled": True})
    text = render_base_conf(config, "small", BaseSettings(controller_hosts=("ip-1(127.0.0.1)",)))
    assert "AuthType=auth/munge" in text.splitlines()
    assert "AuthAltTypes=auth/jwt" in text.splitlines()
    assert (
        "AuthAltParameters=jwt_key=/var/spool/slurm-state/small/slurmctld/jwt_hs256.key,max_token_lifespan=86400"
        in text.splitlines()
    )
    off = render_base_conf(small_config(), "small", BaseSettings(controller_hosts=("ip-1(127.0.0.1)",)))
    assert "AuthAlt" not in off


def test_rest_api_env_listens_on_loopback_and_the_page_everywhere_unless_overridden() -> None:
    cluster = small_config(rest_api={"enabled": True, "port": 6900, "web_port": 9000}).clusters[0]
    lines = rest_api.env_file(cluster, "/shared/s").splitlines()
    assert "ES_REST_API=1" in lines
    assert "ES_RESTD_LISTEN=127.0.0.1:6900" in lines
    assert "ES_WEBUI_LISTEN=0.0.0.0:9000" in lines
    assert "ES_JWT_KEY=/shared/s/jwt_hs256.key" in lines
    local = rest_api.env_file(cluster, "/s", restd_port=20001, web_listen="127.0.0.1:20002").splitlines()
    assert "ES_RESTD_URL=http://127.0.0.1:20001" in local
    assert "ES_WEBUI_LISTEN=127.0.0.1:20002" in local
    assert rest_api.env_file(small_config().clusters[0], "/s").splitlines()[-1] == "ES_REST_API=0"


def test_render_command_writes_rest_api_env_with_the_local_overrides(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = tmp_path / "c.yaml"
    text = (Path(__file__).parents[2] / "cluster_config/examples/minimal.yaml").read_text()
    config.write_text(text.replace("    partitions:", "    rest_api: {enabled: true}\n    partitions:", 1))
    overrides = tmp_path / "overrides.json"
    overrides.write_text(json.dumps({"base": {"rest_api_port": 20001, "web_ui_listen": "127.0.0.1:20002"}}))
    monkeypatch.setenv("ES_RENDER_OVERRIDES", str(overrides))
    cache = str(write_fixture_cache(tmp_path / "cache.json"))
    out = tmp_path / "out"
    hosts = ["--controller-hosts", "ip-a(127.0.0.10)", "--slurmdbd-host", "127.0.0.10"]
    assert main(["render", str(config), "--out", str(out), "--cache", cache, *hosts]) == 0
    env = (out / rest_api.ENV_NAME).read_text().splitlines()
    assert "ES_REST_API=1" in env
    assert "ES_RESTD_LISTEN=127.0.0.1:20001" in env
    assert "ES_WEBUI_LISTEN=127.0.0.1:20002" in env
    assert "AuthAltTypes=auth/jwt" in (out / "slurm.conf").read_text().splitlines()


def test_slurmdbd_checks_tokens_with_the_host_clusters_key() -> None:
    acct = {
        "mode": "existing",
        "endpoint": "db.example.com:3306",
        "secret_arn": "arn:aws:secretsmanager:us-east-1:123456789012:secret:x",
    }
    config = small_config(rest_api={"enabled": True})
    config = config.model_copy(update={"accounting": config.accounting.model_validate(acct)})
    assert rest_api.dbd_jwt_key(config, {}) == "/var/spool/slurm-state/small/slurmctld/jwt_hs256.key"
    assert rest_api.dbd_jwt_key(config, {"state_save_location": "/var/tmp/x"}) == "/var/tmp/x/jwt_hs256.key"
    assert rest_api.dbd_jwt_key(small_config(rest_api={"enabled": True}), {}) is None  # no accounting
    text = render_slurmdbd_conf(
        {"host": "db", "port": 3306, "username": "u", "password": "p"}, "ip-1", jwt_key="/s/jwt_hs256.key"
    )
    assert "AuthAltParameters=jwt_key=/s/jwt_hs256.key" in text.splitlines()


def test_the_rest_api_on_a_cluster_not_hosting_slurmdbd_is_refused() -> None:
    data = base()
    second = json.loads(json.dumps(data["clusters"][0]))
    second["name"] = "second"
    second["rest_api"] = {"enabled": True}
    data["clusters"][0]["network"]["vpc_cidr"] = "127.16.0.0/16"  # federation members: disjoint, peered VPCs
    second["network"]["vpc_cidr"] = "127.17.0.0/16"
    data["clusters"].append(second)
    data["federation"] = {"name": "both", "clusters": [data["clusters"][0]["name"], "second"]}
    data["accounting"] = {"mode": "create", "host_cluster": data["clusters"][0]["name"]}
    errors = _errors(data)
    assert [where for where, _ in errors] == ["clusters[1].rest_api.enabled"]
    assert "enable the REST API on" in errors[0][1]
