"""The attacker's view of the config: an injection corpus through every string field of the schema.

Every string slot of `ElasticSlurmConfig` (a field, a list item, a mapping key or value, through nested sections,
lists, mappings and unions) is enumerated from the pydantic model itself, and its number is pinned so a new field is
noticed. Each slot gets shell metacharacters, `$(...)`, backticks, newline, CR, `#`, `..`, NUL, a 100k-character
value, Unicode look-alikes and invisible characters, quotes, `%` and `\\`, written into a valid config (BASE, which
has every section) and run through the real loader (`cluster_config.loader.parse`: what `elastic-slurm validate` runs
on the YAML it read; the base config goes through `parse_yaml` too). The value is then either refused — ConfigInvalid whose errors are one line each and name the field — or it
arrives inert at every sink, rendered by the real code: bash sourcing the env file (stacks/user_data.py) yields the
value and runs nothing (a canary file must not appear), fstab lines (FSTAB_JQ, run by jq) have six fields, the license
timer drop-in has no injected line, the slurm.conf family has no injected key or line, sssd.conf no injected line, and
the deconfigure Lambda's SSM commands run nothing.

Literal and enum fields are closed sets (pydantic refuses anything else) and are not string slots here.
"""

from __future__ import annotations

import copy
import json
import re
import subprocess
import types
import typing
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from pydantic import BaseModel

from cluster_config import ConfigError, ConfigInvalid, slurm_release
from cluster_config.loader import format_loc, parse, parse_yaml
from cluster_config.model import ElasticSlurmConfig
from lambdas.deconfigure.handler import submit_host_commands
from slurm_plugin.licenses.units import timer_dropin
from slurm_plugin.naming import home_boot_env
from slurm_plugin.render.base import BaseSettings, render_base_conf, render_cgroup_conf
from slurm_plugin.render.cluster import render_cluster
from slurm_plugin.render.manifest import placeholder_infra
from slurm_plugin.render.sssd import render_sssd_conf
from stacks.user_data import (
    FSTAB_JQ,
    actions_values,
    directory_values,
    env_file_text,
    login_values,
    node_names_values,
    pool_values,
)
from tests.unit.cache_fixture import fixture_cache

ARN = "arn:aws:secretsmanager:us-east-1:111122223333:secret:"
POOL: dict[str, Any] = {
    "name": "gpu",
    "instance_types": ["g5.12xlarge"],
    "max_nodes": 4,
    "gpu": {},
    "availability_zones": ["us-east-1a"],
    "features": ["ampere"],
    "ami_id": "ami-0123456789abcdef0",
    "security_groups": ["sg-0123456789abcdef0"],
    "capacity_reservation": {"id": "cr-0123456789abcdef0"},
    "custom_actions": {
        "on_node_start": [{"script": "/opt/site/gpu-start.sh", "args": ["a"]}],
        "on_node_configured": [{"script": "s3://site-bucket/gpu.sh", "args": ["--check"]}],
    },
    "slurm_settings": {"TmpDisk": 100},
    "gres_settings": {"Flags": "nvidia_gpu_env"},
}
# A valid config with every section of the schema (so every slot has a place to be written).
BASE: dict[str, Any] = {
    "clusters": [
        {
            "name": "alpha",
            "region": "us-east-1",
            "account_id": "111122223333",
            "network": {"mode": "create", "availability_zones": ["us-east-1a", "us-east-1b"]},
            "remote_regions": [
                {
                    "region": "us-west-2",
                    "network": {
                        "mode": "import",
                        "vpc_id": "vpc-0123456789abcdef0",
                        "subnets": [
                            {
                                "subnet_id": "subnet-0123456789abcdef0",
                                "availability_zone": "us-west-2a",
                                "cidr": "100.65.0.0/20",
                            }
                        ],
                    },
                },
                {
                    "region": "us-west-1",
                    "network": {"mode": "create", "vpc_cidr": "100.67.0.0/16", "availability_zones": ["us-west-1a"]},
                },
            ],
            "storage": {
                "efs": {"mount_point": "/shared"},
                "fsx_lustre": {"mount_point": "/fsx", "s3_import_path": "s3://site-data/inputs"},
                "fsx_ontap": {"mount_point": "/ontap"},
                "fsx_openzfs": {"mount_point": "/zfs"},
                "extra_mounts": [
                    {"source": "nfs.example.com:/export", "mount_point": "/tools", "options": "defaults,_netdev"}
                ],
            },
            "images": {
                "base_os": "ubuntu2404",
                "rebuild_schedule": "cron(0 4 ? * SUN *)",
                "slurm_version": slurm_release.VERSION,
                "slurm_source": {"url": slurm_release.SOURCE_URL, "sha256": slurm_release.SOURCE_SHA256},
            },
            "controller": {
                "security_groups": ["sg-0123456789abcdef0"],
                "custom_actions": {
                    "on_node_start": [{"script": "/opt/site/start.sh", "args": ["one"]}],
                    "on_node_configured": [{"script": "/opt/site/ready.sh", "args": ["two"]}],
                },
            },
            "partitions": [
                {
                    "name": "gpu",
                    "default": True,
                    "max_time": "1-00:00:00",
                    "slurm_settings": {"MaxNodes": 4},
                    "pools": [POOL],
                },
                {"name": "inter", "share_nodes_of": ["gpu"], "interactive": True, "priority_tier": 2},
            ],
            "login_nodes": [
                {
                    "name": "login",
                    "security_groups": ["sg-0123456789abcdef0"],
                    "custom_actions": {
                        "on_node_start": [{"script": "/opt/site/login.sh", "args": ["three"]}],
                        "on_node_configured": [{"script": "/opt/site/login-ready.sh", "args": ["four"]}],
                    },
                }
            ],
            "directory": {
                "ldap_uri": ["ldaps://ldap.example.com"],
                "search_base": "dc=example,dc=com",
                "bind_dn": "cn=reader,dc=example,dc=com",
                "bind_password_secret_arn": ARN + "ldap-AbCdEf",
                "bind_password_kms_key_arn": "arn:aws:kms:us-east-1:111122223333:key/0a1b2c3d-4e5f",
                "domain_settings": {"ldap_user_search_base": "ou=people,dc=example,dc=com"},
                "controller_login_groups": ["hpc-admins"],
            },
            "ssh_allowed_cidrs": ["100.64.0.0/10"],
            "iam_policies": {
                "controller": ["arn:aws:iam::aws:policy/ReadOnlyAccess"],
                "compute": ["arn:aws:iam::111122223333:policy/site-read"],
                "login": ["arn:aws:iam::111122223333:policy/site-read"],
            },
            "tags": {"team": "hpc"},
            "budget": {"monthly_limit_usd": 1000, "alert_emails": ["ops@example.com"]},
            "rest_api": {"enabled": True, "allowed_cidrs": ["100.64.0.0/10"]},
            "slurm_settings": {"SchedulerParameters": "bf_continue"},
            "cgroup_settings": {"AllowedRAMSpace": 98},
            "gres_settings": {"AutoDetect": "off"},
        },
        {
            "name": "beta",
            "region": "us-east-1",
            "network": {
                "mode": "import",
                "vpc_id": "vpc-0fedcba9876543210",
                "subnets": [
                    {
                        "subnet_id": "subnet-0fedcba9876543210",
                        "availability_zone": "us-east-1a",
                        "cidr": "100.66.0.0/20",
                    }
                ],
            },
            "storage": {"efs": {}},
            "partitions": [
                {"name": "cpu", "pools": [{"name": "c7i", "instance_types": ["c7i.large"], "max_nodes": 2}]}
            ],
        },
    ],
    "accounting": {
        "mode": "existing",
        "endpoint": "db.example.com:3306",
        "secret_arn": ARN + "slurmdbd-AbCdEf",
        "host_cluster": "alpha",
        "slurmdbd_settings": {"PurgeJobAfter": "12month"},
    },
    "licenses": [
        {
            "name": "ansys",
            "count": 10,
            "server_type": "flexlm",
            "server": "27000@lic.example.com",
            "feature": "ansys_cfd",
            "sync_schedule": "*:0/5",
            "clusters": {"alpha": 50},
        }
    ],
    "federation": {"name": "fed", "clusters": ["alpha", "beta"], "cluster_features": {"alpha": ["gpu"]}},
    "onprem_clusters": [
        {
            "name": "site",
            "burst_to": ["alpha"],
            "controller_cidrs": ["100.68.0.0/24"],
            "submit_cidrs": ["100.68.1.0/24"],
        }
    ],
    "accounts": [{"name": "proj", "description": "Project", "organization": "Org", "users": ["alice"]}],
    "qos": [{"name": "high", "description": "High", "preempt": ["low"]}, {"name": "low"}],
    "tags": {"owner": "ops"},
}

# Every string slot the schema has today: a new one must be added here on purpose (and get its payloads).
EXPECTED_SLOTS = 113


# ---------------------------------------------------------------- slots, from the model
@dataclass(frozen=True)
class Slot:
    """One place a string goes: `schema` names it (`clusters[].tags{key}`), `loc` is its first place in BASE and
    `kind` is `value`, `item` (of a list), `key` or `dict_value` (of a mapping)."""

    schema: str
    loc: tuple[str | int, ...]
    kind: str


def _unwrap(annotation: Any) -> list[Any]:
    """The alternatives of an annotation (Annotated and Optional removed)."""
    origin = typing.get_origin(annotation)
    if origin is typing.Annotated:
        return _unwrap(typing.get_args(annotation)[0])
    if origin in (typing.Union, types.UnionType):
        return [alt for arg in typing.get_args(annotation) for alt in _unwrap(arg)]
    return [] if annotation is type(None) else [annotation]


def _is_str(annotation: Any) -> bool:
    return any(alt is str for alt in _unwrap(annotation))


def _models(annotation: Any) -> list[type[BaseModel]]:
    return [alt for alt in _unwrap(annotation) if isinstance(alt, type) and issubclass(alt, BaseModel)]


def schema_slots(model: type[BaseModel], prefix: str = "") -> Iterator[str]:
    """Every string slot of `model`, by schema path (unions of sections: each member, `<Name>`)."""
    for name, field in model.model_fields.items():
        path = f"{prefix}.{name}" if prefix else name
        yield from _annotation_slots(field.annotation, path)


def _annotation_slots(annotation: Any, path: str) -> Iterator[str]:
    if _is_str(annotation):
        yield path
    models = _models(annotation)
    for member in models:
        yield from schema_slots(member, f"{path}<{member.__name__}>" if len(models) > 1 else path)
    for alt in _unwrap(annotation):
        origin, args = typing.get_origin(alt), typing.get_args(alt)
        if origin is list:
            yield from _annotation_slots(args[0], f"{path}[]")
        elif origin is dict:
            if _is_str(args[0]):
                yield f"{path}{{key}}"
            yield from _annotation_slots(args[1], f"{path}{{}}")


def located_slots(model: type[BaseModel], data: dict[str, Any], prefix: str, loc: tuple[str | int, ...]) -> dict:
    """Schema path -> first place in `data` (walked with the model) where a value for it can be written."""
    found: dict[str, tuple[tuple[str | int, ...], str]] = {}
    for name, field in model.model_fields.items():
        path = f"{prefix}.{name}" if prefix else name
        for schema, where in _located(field.annotation, data.get(name), path, (*loc, name)).items():
            found.setdefault(schema, where)
    return found


def _located(annotation: Any, value: Any, path: str, loc: tuple[str | int, ...]) -> dict:
    found: dict[str, tuple[tuple[str | int, ...], str]] = {}
    if _is_str(annotation):
        found[path] = (loc, "value")
    models = _models(annotation)
    if isinstance(value, dict):
        for member in models:
            mode = member.model_fields.get("mode")
            if len(models) > 1 and (mode is None or value.get("mode") not in typing.get_args(mode.annotation)):
                continue
            found |= located_slots(member, value, f"{path}<{member.__name__}>" if len(models) > 1 else path, loc)
    for alt in _unwrap(annotation):
        origin, args = typing.get_origin(alt), typing.get_args(alt)
        if origin is list:
            if _is_str(args[0]):
                found[f"{path}[]"] = (loc, "item")
            for index, item in enumerate(value if isinstance(value, list) else []):
                for schema, where in _located(args[0], item, f"{path}[]", (*loc, index)).items():
                    if where[1] != "value" or _models(args[0]):
                        found.setdefault(schema, where)
        elif origin is dict:
            if _is_str(args[0]):
                found[f"{path}{{key}}"] = (loc, "key")
            if _is_str(args[1]):
                found[f"{path}{{}}"] = (loc, "dict_value")
            inner = typing.get_origin(args[1])
            if inner is list and _is_str(typing.get_args(args[1])[0]):
                found[f"{path}{{}}[]"] = (loc, "dict_item")
    return found


def all_slots() -> list[Slot]:
    located = located_slots(ElasticSlurmConfig, BASE, "", ())
    return [Slot(schema, *located[schema]) for schema in schema_slots(ElasticSlurmConfig) if schema in located]


# ---------------------------------------------------------------- payloads
CANARY = "pwned"
PAYLOADS = {
    "subst": f"$(touch {CANARY})",
    "subst_ifs": f"$(touch${{IFS}}{CANARY})",
    "backticks": f"`touch {CANARY}`",
    "semicolon": f"; touch {CANARY}",
    "pipe_amp": f"| touch {CANARY} &",
    "newline": f"\ntouch {CANARY}",
    "cr": f"\rtouch {CANARY}",
    "hash": " #comment",
    "hash_tight": "#x",
    "dotdot": "/../etc",
    "nul": "\x00",
    "long": "a" * 100_000,
    "fullwidth": f"\uff04\uff08touch {CANARY}\uff09",  # fullwidth $( )
    "zero_width": "\u200b",
    "rtl_override": "\u202e",
    "quotes": "'\"",
    "percent": "%n",
    "backslash": "\\",
}
MUST_HAVE = ("subst", "newline", "hash")


def _at(data: Any, loc: tuple[str | int, ...]) -> tuple[Any, str | int]:
    for part in loc[:-1]:
        data = data[part]
    return data, loc[-1]


def injected(slot: Slot, payload: str) -> tuple[dict[str, Any], str]:
    """BASE with `payload` written into the slot (appended to the value already there, so a pattern that checks only
    a prefix is tried too); returns the config and the string written."""
    data = copy.deepcopy(BASE)
    parent, last = _at(data, slot.loc)
    current = parent.get(last) if isinstance(parent, dict) else parent[last]
    if slot.kind == "value":
        text = (current if isinstance(current, str) else "x") + payload
        parent[last] = text
    elif slot.kind == "item":
        text = ((current or ["x"])[0]) + payload
        parent[last] = [text]
    elif slot.kind in ("key", "dict_value", "dict_item"):
        mapping = dict(current or {"Key": "x"})
        key, value = next(iter(mapping.items()))
        if slot.kind == "key":
            text = key + payload
            parent[last] = {text: value}
        elif slot.kind == "dict_value":
            text = (value if isinstance(value, str) else "x") + payload
            parent[last] = {key: text}
        else:
            text = value[0] + payload
            parent[last] = {key: [text]}
    else:
        raise AssertionError(slot.kind)
    return data, text


# ---------------------------------------------------------------- sinks, rendered with the real code
def env_values(config: ElasticSlurmConfig) -> dict[str, str]:
    """Every env-file value the stacks derive from the config (stacks/cluster.py, region.py, launch_templates.py,
    login_nodes.py): names, the directory and node-names values, pools, login pools, actions, the database secret."""
    values: dict[str, str] = {}
    for cluster in config.clusters:
        values |= home_boot_env(cluster.name, cluster.region)
        values |= directory_values(cluster) | node_names_values(cluster)
        values |= actions_values(cluster.controller.custom_actions)
        for partition in cluster.partitions:
            for pool in partition.pools:
                values |= pool_values(partition.name, pool)
        for login in cluster.login_nodes:
            values |= login_values(login)
    if config.accounting.secret_arn:
        values["ES_DB_SECRET"] = config.accounting.secret_arn
    return values


def check_env_file(values: dict[str, str], tmp: Path, writer: Callable[[dict[str, str]], str] = env_file_text) -> None:
    """bash sources the env file: every value comes back as written, nothing runs."""
    env = tmp / "env"
    env.write_text(writer(values))
    keys = " ".join(values)
    script = f'set -a; . "$1"; set +a; for k in {keys}; do printf "%s\\0" "${{!k}}"; done'
    out = subprocess.run(["bash", "-c", script, "bash", str(env)], cwd=tmp, capture_output=True, check=True)
    assert out.stdout.decode().split("\0")[:-1] == list(values.values())
    assert not (tmp / CANARY).exists()


def mounts(config: ElasticSlurmConfig) -> list[dict[str, str]]:
    """The mounts parameter's entries as stacks/storage.py writes them (sources of created file systems are ids)."""
    entries = []
    for cluster in config.clusters:
        storage = cluster.storage
        created = [("efs", storage.efs), ("lustre", storage.fsx_lustre), ("ontap", storage.fsx_ontap)]
        created += [("openzfs", storage.fsx_openzfs)]
        for kind, fs in created:
            if fs is not None:
                entries.append({"type": kind, "source": "fs-0123", "mount_point": fs.mount_point, "options": "_netdev"})
        entries += [
            {"type": m.fs_type, "source": m.source, "mount_point": m.mount_point, "options": m.options}
            for m in storage.extra_mounts
        ]
    return entries


def check_fstab(entries: list[dict[str, str]], program: str = FSTAB_JQ) -> None:
    """Every fstab line the boot writes has six fields, the second the mount point."""
    out = subprocess.run(["jq", "-r", program], input=json.dumps(entries), capture_output=True, text=True, check=True)
    rows = out.stdout.splitlines()
    assert len(rows) == len(entries)
    for row, entry in zip(rows, entries, strict=True):
        mount_point, line = row.split("\t")
        assert mount_point == entry["mount_point"]
        fields = line.split()
        assert len(fields) == 6 and fields[1] == entry["mount_point"], line


def check_timer(config: ElasticSlurmConfig) -> None:
    """The license timer drop-in: one [Timer] section, OnCalendar= lines only, no specifier."""
    text = timer_dropin(config)
    if text is None:
        return
    lines = text.splitlines()
    assert lines[1] == "[Timer]" and [x for x in lines if x.startswith("[")] == ["[Timer]"]
    assert all(x.startswith(("#", "OnCalendar=")) for x in lines if x != "[Timer]")
    assert "%" not in text and "\r" not in text


CACHE = fixture_cache()
SLURM_WORD = re.compile(r"^[A-Za-z][A-Za-z0-9]*=")


def slurm_files(config: ElasticSlurmConfig) -> dict[str, str]:
    files = {}
    for cluster in config.clusters:
        out = render_cluster(config, cluster.name, placeholder_infra(cluster), CACHE)
        files |= {f"{cluster.name}/{name}": text for name, text in out.fragments.items()}
        files[f"{cluster.name}/slurm.conf"] = render_base_conf(
            config, cluster.name, BaseSettings(controller_hosts=("ip-127-0-0-1",), slurmdbd_host="127.0.0.1")
        )
        files[f"{cluster.name}/cgroup.conf"] = render_cgroup_conf(None, cluster.cgroup_settings)
    return files


def slurm_keys(files: dict[str, str]) -> set[str]:
    keys = set()
    for text in files.values():
        assert "\r" not in text and "\x00" not in text
        for line in text.splitlines():
            if line.strip() and not line.lstrip().startswith("#"):
                keys |= {word.split("=", 1)[0].lower() for word in line.split() if SLURM_WORD.match(word)}
    return keys


BASE_SLURM_KEYS = slurm_keys(slurm_files(parse_yaml(yaml.safe_dump(BASE))))


def check_slurm(config: ElasticSlurmConfig, text: str) -> None:
    """slurm.conf, its fragments, cgroup.conf, gres.conf: no key but the base's (and the injected one)."""
    injected_key = {text.lower()} if SLURM_WORD.match(text + "=") else set()
    assert slurm_keys(slurm_files(config)) <= BASE_SLURM_KEYS | injected_key


def check_sssd(config: ElasticSlurmConfig) -> None:
    """sssd.conf: every line a section header, `key = value` or blank; the sections of the base."""
    for cluster in config.clusters:
        if cluster.directory is None:
            continue
        lines = render_sssd_conf(cluster.directory, "secret").splitlines()
        sections = [x for x in lines if x.startswith("[")]
        assert sections == ["[sssd]", "[nss]", "[pam]", "[domain/directory]"], sections
        assert all(re.match(r"^([a-z_0-9]+ = |\[|#|$)", x) for x in lines), lines


def check_deconfigure(config: ElasticSlurmConfig, tmp: Path) -> None:
    """The Lambda's SSM commands (umount, rm stubbed) run nothing else."""
    mount_points = [m["mount_point"] for m in mounts(config)]
    commands = [c for cluster in config.clusters for c in submit_host_commands(mount_points, cluster.name)]
    # AWS-RunShellScript runs the commands as the lines of one script
    subprocess.run(["bash", "-c", "umount() { :; }; rm() { :; }\n" + "\n".join(commands)], cwd=tmp, check=True)
    assert not (tmp / CANARY).exists()


# ---------------------------------------------------------------- tests
def _names(error: ConfigError, where: str) -> bool:
    """Whether an error points at the slot's YAML path `where`: by its path, or by its section's path and a message
    starting with the field's name (the check of invisible characters runs for a whole section)."""
    path = "" if error.path == "(top level)" else error.path
    field = error.message.split(":", 1)[0]
    if re.fullmatch(r"[a-z_]+", field):
        path = f"{path}.{field}" if path else field
    return where.startswith(path) or path.startswith(where)


SLOTS = all_slots()


def test_every_string_slot_of_the_schema_is_enumerated_and_placed_in_the_base_config() -> None:
    schema = list(schema_slots(ElasticSlurmConfig))
    unplaced = sorted(set(schema) - {s.schema for s in SLOTS})
    assert not unplaced, f"give these slots a place in BASE: {unplaced}"
    assert len(schema) == len(set(schema)) == EXPECTED_SLOTS, (len(schema), schema)


def test_a_new_string_field_is_noticed() -> None:
    class Extended(ElasticSlurmConfig):
        brand_new: str = ""
        more: dict[str, list[str]] = {}

    assert [s for s in schema_slots(Extended) if s not in set(schema_slots(ElasticSlurmConfig))] == [
        "brand_new",
        "more{key}",
        "more{}[]",
    ]


def test_the_base_config_is_valid_and_its_sinks_are_clean(tmp_path: Path) -> None:
    config = parse_yaml(yaml.safe_dump(BASE))
    check_env_file(env_values(config), tmp_path)
    check_fstab(mounts(config))
    check_timer(config)
    check_sssd(config)
    check_deconfigure(config, tmp_path)
    assert {"nodename", "partitionname", "schedulerparameters", "allowedramspace"} <= BASE_SLURM_KEYS


@pytest.mark.parametrize("slot", SLOTS, ids=lambda s: s.schema)
def test_every_payload_is_refused_with_one_line_naming_the_field_or_arrives_inert(slot: Slot, tmp_path: Path) -> None:
    outcomes = {}
    for name, payload in PAYLOADS.items():
        data, text = injected(slot, payload)
        try:
            config = parse(data, "corpus.yaml")
        except ConfigInvalid as refused:
            where = format_loc(slot.loc)
            assert refused.errors, name
            for error in refused.errors:
                assert "\n" not in str(error) and "\r" not in str(error) and len(str(error)) < 600, (name, error)
            assert any(_names(error, where) for error in refused.errors), (
                name,
                where,
                [str(e) for e in refused.errors],
            )
            outcomes[name] = "refused"
            continue
        check_env_file(env_values(config), tmp_path)
        check_fstab(mounts(config))
        check_timer(config)
        check_slurm(config, text)
        check_sssd(config)
        check_deconfigure(config, tmp_path)
        outcomes[name] = "inert"
    assert set(outcomes) == set(PAYLOADS)
    # no field takes a newline, CR, NUL, invisible character or 100k characters
    assert {outcomes[p] for p in ("newline", "cr", "nul", "zero_width", "rtl_override", "long")} == {"refused"}


def test_the_env_file_check_catches_an_unquoted_env_file(tmp_path: Path) -> None:
    """Negative case: the env file as the stacks wrote it before (KEY=value, unquoted) runs the payload."""
    values = {"ES_DB_SECRET": f"{ARN}db$(touch {CANARY})-abcdef"}
    with pytest.raises(AssertionError):
        check_env_file(values, tmp_path, lambda vs: "".join(f"{k}={v}\n" for k, v in vs.items()))
    assert (tmp_path / CANARY).exists()


def test_the_fstab_check_catches_unescaped_fields() -> None:
    """Negative case: fstab lines of the fields as given (the boot before) have more or fewer than six fields."""
    unescaped = FSTAB_JQ.replace("map(fstab)", ".")
    assert unescaped != FSTAB_JQ
    for options in ("defaults #x", "a b"):
        entry = {"type": "nfs4", "source": "nfs:/x", "mount_point": "/tools", "options": options}
        check_fstab([entry])
        with pytest.raises(AssertionError):
            check_fstab([entry], unescaped)
