"""The site's LDAP directory, stood in for by a real OpenLDAP slapd on 127.0.0.1 (Debian's `slapd` on the host).

When the config has `clusters[].directory`, `local up` starts slapd with its own configuration and database under
the state dir (`directory/`), seeded with a read-only bind account and directory-only users and groups, and puts the
bind password into the emulated Secrets Manager: what a site's directory and its secret are on AWS. The nodes then
bind to it through SSSD exactly as on EC2 (stacks/user_data.py); only the URI (its port) differs from the config's.

Entries (rfc2307): `ldapuser` (uid 3001, primary group `ldapuser` 3001, also in `eda` 3100) — a user no machine of
the cloud has in /etc/passwd.
"""

from __future__ import annotations

import secrets
import socket
import subprocess
from dataclasses import dataclass
from pathlib import Path

from localcloud.layout import Layout
from localcloud.services import procs

SLAPD = Path("/usr/sbin/slapd")
SLAPADD = Path("/usr/sbin/slapadd")
SUFFIX = "dc=elastic-slurm,dc=local"
READER = f"cn=reader,{SUFFIX}"
SCHEMAS = ("core", "cosine", "nis", "inetorgperson")
USER = "ldapuser"
USER_UID = 3001
GROUP = "eda"
GROUP_GID = 3100


class DirectoryError(RuntimeError):
    """slapd could not be set up or started (one line)."""


@dataclass(frozen=True)
class LocalDirectory:
    """A running slapd: its URI and the reader's password."""

    uri: str
    bind_password: str


def _config_ldif(base: Path, admin_password: str) -> str:
    schemas = "\n".join(f"include: file:///etc/ldap/schema/{name}.ldif" for name in SCHEMAS)
    return f"""dn: cn=config
objectClass: olcGlobal
cn: config
olcPidFile: {base}/slapd.pid

dn: cn=module{{0}},cn=config
objectClass: olcModuleList
cn: module{{0}}
olcModulePath: /usr/lib/ldap
olcModuleLoad: back_mdb

dn: cn=schema,cn=config
objectClass: olcSchemaConfig
cn: schema

{schemas}

dn: olcDatabase={{1}}mdb,cn=config
objectClass: olcDatabaseConfig
objectClass: olcMdbConfig
olcDatabase: {{1}}mdb
olcDbDirectory: {base}/data
olcSuffix: {SUFFIX}
olcRootDN: cn=admin,{SUFFIX}
olcRootPW: {admin_password}
olcAccess: {{0}}to attrs=userPassword by self write by anonymous auth by * none
olcAccess: {{1}}to * by dn.exact="{READER}" read by * none
"""


def _data_ldif(reader_password: str) -> str:
    return f"""dn: {SUFFIX}
objectClass: dcObject
objectClass: organization
dc: elastic-slurm
o: elastic-slurm local cloud

dn: ou=people,{SUFFIX}
objectClass: organizationalUnit
ou: people

dn: ou=groups,{SUFFIX}
objectClass: organizationalUnit
ou: groups

dn: {READER}
objectClass: organizationalRole
objectClass: simpleSecurityObject
cn: reader
userPassword: {reader_password}

dn: uid={USER},ou=people,{SUFFIX}
objectClass: inetOrgPerson
objectClass: posixAccount
uid: {USER}
cn: LDAP User
sn: User
uidNumber: {USER_UID}
gidNumber: {USER_UID}
homeDirectory: /tmp
loginShell: /bin/bash

dn: cn={USER},ou=groups,{SUFFIX}
objectClass: posixGroup
cn: {USER}
gidNumber: {USER_UID}

dn: cn={GROUP},ou=groups,{SUFFIX}
objectClass: posixGroup
cn: {GROUP}
gidNumber: {GROUP_GID}
memberUid: {USER}
"""


def _listening(port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(0.5)
        return sock.connect_ex(("127.0.0.1", port)) == 0


def start(layout: Layout, port: int) -> LocalDirectory:
    """Create the directory under the state dir and start slapd on 127.0.0.1:`port` (PID file run/slapd.pid)."""
    if not SLAPD.exists():
        raise DirectoryError("slapd is not installed (scripts/setup.sh installs Debian's slapd and ldap-utils)")
    base = layout.state / "directory"
    config_dir, data_dir = base / "slapd.d", base / "data"
    for path in (config_dir, data_dir):
        path.mkdir(parents=True, exist_ok=True)
    reader_password = secrets.token_hex(12)
    for name, text in (
        ("config.ldif", _config_ldif(base, secrets.token_hex(12))),
        ("data.ldif", _data_ldif(reader_password)),
    ):
        path = base / name  # they hold the passwords: root only
        path.touch(mode=0o600)
        path.chmod(0o600)
        path.write_text(text)
    for args in (["-n", "0", "-l", str(base / "config.ldif")], ["-n", "1", "-l", str(base / "data.ldif")]):
        done = subprocess.run([str(SLAPADD), "-F", str(config_dir), *args], capture_output=True, text=True)
        if done.returncode != 0:
            raise DirectoryError(f"slapadd {args[1]}: {' '.join((done.stderr or done.stdout).split())[:300]}")
    uri = f"ldap://127.0.0.1:{port}"
    log = layout.log_file("slapd")
    # -d 0: in the foreground (the PID is slapd's own), logging to the log file
    procs.spawn([str(SLAPD), "-d", "0", "-F", str(config_dir), "-h", f"{uri}/"], log, layout.pid_file("slapd"))
    if not procs.wait_until(lambda: _listening(port), 20):
        raise DirectoryError(f"slapd did not listen on {uri}: {log.read_text(errors='replace')[-300:]}")
    return LocalDirectory(uri, reader_password)
