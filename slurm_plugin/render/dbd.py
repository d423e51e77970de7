"""slurmdbd.conf for production, from the accounting database's Secrets Manager secret (pure; no AWS call here).

The controller boot script fetches the secret (RDS-generated JSON: host, port, username, password) and calls
`elastic-slurm render-slurmdbd`, which writes this file with mode 0600 (slurmdbd refuses a readable one). The config's
`accounting.slurmdbd_settings` are merged in as the other custom settings are (cluster_config/slurm_settings.py): a key
written here takes the user's value, any other key is added at the end; the keys that must not change are refused when
the config is loaded.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from cluster_config.slurm_settings import SettingValue, drop_replaced, setting_lines

DEFAULT_STORAGE_LOC = "slurm_acct_db"
# The RDS CA bundle (every region's root and intermediate CAs) the image build installs (assets/image-build/aws-tools.sh):
# slurmdbd reaches the database over TLS and checks its certificate against it (StorageParameters=SSL_CA, read by
# Slurm's mysql_ssl_set); the database refuses clear-text connections (require_secure_transport, stacks/accounting.py)
RDS_CA_BUNDLE = "/opt/elastic-slurm/share/rds-global-bundle.pem"
# How long slurmdbd keeps records (slurmdbd.conf(5) Purge*After; Slurm's own default is forever, and the database
# grows with every job step): two years of jobs and usage for sreport and `elastic-slurm cost`, one year of the rest.
# `accounting.slurmdbd_settings` replaces any of them (e.g. PurgeJobAfter: 60month) or adds Archive* settings.
PURGE_DEFAULTS = (
    ("PurgeEventAfter", "12month"),
    ("PurgeJobAfter", "24month"),
    ("PurgeResvAfter", "12month"),
    ("PurgeStepAfter", "12month"),
    ("PurgeSuspendAfter", "12month"),
    ("PurgeTXNAfter", "12month"),
    ("PurgeUsageAfter", "24month"),
)
# slurm.conf-style parsing: '#' starts a comment, whitespace ends a value, quotes are taken literally.
_UNSAFE = set("#\"' \t\n\\")


class DbdConfigError(ValueError):
    """The secret cannot be turned into a slurmdbd.conf (one-line message naming the key)."""


@dataclass(frozen=True)
class DbdPaths:
    """Where slurmdbd logs and keeps its PID (production defaults)."""

    log_file: str = "/var/log/slurm/slurmdbd.log"
    pid_file: str = "/run/slurmdbd/slurmdbd.pid"  # slurmdbd runs as slurm: its unit's RuntimeDirectory
    port: int = 6819
    ssl_ca: str = RDS_CA_BUNDLE  # the CA slurmdbd checks the database's certificate with (the local cloud: its own)


def _field(secret: dict[str, Any], key: str) -> str:
    value = secret.get(key)
    if value is None or str(value) == "":
        raise DbdConfigError(f"secret: key '{key}' is missing")
    text = str(value)
    if _UNSAFE & set(text):
        raise DbdConfigError(f"secret: '{key}' has a character slurmdbd.conf cannot hold (#, quote, backslash, space)")
    return text


def render_slurmdbd_conf(
    secret: dict[str, Any],
    dbd_host: str,
    storage_loc: str = DEFAULT_STORAGE_LOC,
    paths: DbdPaths | None = None,
    settings: dict[str, SettingValue] | None = None,
    jwt_key: str | None = None,
) -> str:
    """The slurmdbd.conf text for a database described by an RDS secret, served by slurmdbd on `dbd_host`, with the
    config's `accounting.slurmdbd_settings` merged in; with `jwt_key` (the host cluster's rest_api) slurmdbd also
    accepts the JWTs slurmrestd forwards (the same key as slurmctld's, slurm_plugin/render/rest_api.py)."""
    paths = paths or DbdPaths()
    host, port = _field(secret, "host"), _field(secret, "port")
    if not port.isdigit():
        raise DbdConfigError(f"secret: 'port' must be a number, got {port!r}")
    if not paths.ssl_ca.startswith("/") or _UNSAFE & set(paths.ssl_ca) or "," in paths.ssl_ca:
        raise DbdConfigError(f"ssl_ca: not an absolute path slurmdbd.conf can hold: {paths.ssl_ca!r}")
    if not dbd_host or _UNSAFE & set(dbd_host):
        raise DbdConfigError(f"--dbd-host: not a host name: {dbd_host!r}")
    custom = settings or {}
    lines = [
        "# slurmdbd.conf — written by `elastic-slurm render-slurmdbd` (database secret + config); mode 0600",
        "AuthType=auth/munge",
        *(["AuthAltTypes=auth/jwt", f"AuthAltParameters=jwt_key={jwt_key}"] if jwt_key else []),
        f"DbdHost={dbd_host}",
        f"DbdPort={paths.port}",
        "SlurmUser=slurm",
        f"LogFile={paths.log_file}",
        f"PidFile={paths.pid_file}",
        "StorageType=accounting_storage/mysql",
        f"StorageHost={host}",
        f"StoragePort={port}",
        f"StorageUser={_field(secret, 'username')}",
        f"StoragePass={_field(secret, 'password')}",
        *(f"{key}={value}" for key, value in PURGE_DEFAULTS),
        f"StorageParameters=SSL_CA={paths.ssl_ca}",  # TLS to the database, its certificate checked
        f"StorageLoc={storage_loc}",
    ]
    if custom:  # the user's settings come last and replace the product's same keys
        lines = [*drop_replaced(lines, custom), "# accounting.slurmdbd_settings of the config", *setting_lines(custom)]
    return "\n".join([*lines, ""])
