"""sssd.conf for a node of a cluster with `clusters[].directory` (pure): one LDAP domain, the NSS and PAM responders.

Every node (controllers, login and compute nodes) resolves the site's users and groups through SSSD: slurmctld to put
names on uids, login nodes for the users' shells, compute nodes for the job's user and groups. The config's
`directory` section is an SSM parameter (JSON, `section_json`); at boot assets/bootstrap/elastic-slurm-directory
reads it and the bind password from Secrets Manager and runs `elastic-slurm render-sssd`, which writes this text with
mode 0600 (sssd refuses a file others can read).

On controllers the same script adds a snippet (`render_access_conf`, written by `python -m slurm_plugin.render.sssd`)
in /etc/sssd/conf.d/ that limits logins to `directory.controller_login_groups` through sssd's simple access provider
(or denies every directory user without groups): slurmctld, the munge key and the database secret live there, and
the shared /home is mounted, so any directory user's shell there would be one step from them (issue 30). sssd merges
the snippet over sssd.conf; the access provider decides PAM's account phase only, so name lookups (slurmctld putting
names on uids) are unchanged, and local accounts (root, Session Manager's ssm-user) never reach sssd.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from collections.abc import Sequence
from pathlib import Path

from cluster_config.model_access import GROUP_NAME_PATTERN, Directory

DOMAIN = "directory"
# system accounts the directory must never shadow
FILTERED_USERS = ("root", "slurm", "munge")
# Directory ids below this are never served: uid/gid 0 and the distributions' system accounts (issue 30). The slurm
# account's fixed uid/gid 64030 lies above it; the boot refuses a directory that serves it
# (assets/bootstrap/elastic-slurm-directory), since filter_users filters by name only.
MIN_ID = 1000


class SssdConfigError(ValueError):
    """The directory settings cannot become an sssd.conf (one line)."""


def section_json(directory: Directory) -> str:
    """The section as the directory parameter holds it (JSON, the config's field names)."""
    return directory.model_dump_json()


def load_section(text: str) -> Directory:
    """The parameter's JSON back into the section (SssdConfigError when it is not one)."""
    try:
        return Directory.model_validate(json.loads(text))
    except ValueError as exc:
        raise SssdConfigError(f"not a directory section: {' '.join(str(exc).split())[:200]}") from None


def _value(value: str | int | bool) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def render_sssd_conf(directory: Directory, bind_password: str | None) -> str:
    """The sssd.conf text; `bind_password` is the secret's value (required exactly when the section has a bind DN)."""
    if directory.bind_dn is not None and not bind_password:
        raise SssdConfigError("directory.bind_dn is set but the bind password secret is empty")
    if bind_password is not None and ("\n" in bind_password.strip("\n") or "\r" in bind_password):
        raise SssdConfigError("the bind password secret holds more than one line")
    domain = {
        "id_provider": "ldap",
        "auth_provider": "ldap",
        "ldap_uri": ", ".join(directory.ldap_uri),
        "ldap_search_base": directory.search_base,
        "ldap_schema": directory.ldap_schema,
        "ldap_tls_reqcert": directory.tls_reqcert,
        "cache_credentials": "true",
        "enumerate": "false",
        "min_id": str(MIN_ID),
    }
    if directory.bind_dn is not None and bind_password:
        domain |= {
            "ldap_default_bind_dn": directory.bind_dn,
            "ldap_default_authtok_type": "password",
            "ldap_default_authtok": bind_password.strip("\n"),
        }
    domain |= {key: _value(value) for key, value in directory.domain_settings.items()}
    if not str(domain["min_id"]).isdigit() or int(domain["min_id"]) < MIN_ID:
        raise SssdConfigError(f"directory.domain_settings.min_id must be at least {MIN_ID} (system accounts' ids)")
    lines = [
        "# sssd.conf — written at boot by `elastic-slurm render-sssd` from clusters[].directory; mode 0600",
        "[sssd]",
        "services = nss, pam",
        f"domains = {DOMAIN}",
        "",
        "[nss]",
        f"filter_users = {', '.join(FILTERED_USERS)}",
        "filter_groups = root",
        "",
        "[pam]",
        "",
        f"[domain/{DOMAIN}]",
        *(f"{key} = {value}" for key, value in domain.items()),
    ]
    return "\n".join(lines) + "\n"


# the controllers' access snippet, read by sssd after sssd.conf (sssd.conf(5), "conf.d")
ACCESS_SNIPPET = "50-elastic-slurm-access.conf"


def render_access_conf(directory: Directory, role: str) -> str | None:
    """The conf.d snippet of a node of `role`: on a controller, the simple access provider admitting the members of
    `controller_login_groups` (or `deny` without any: sssd's simple provider admits everyone when its lists are
    empty); None on other nodes (their domain's own access settings apply)."""
    if role != "controller":
        return None
    bad = [g for g in directory.controller_login_groups if not re.fullmatch(GROUP_NAME_PATTERN, g)]
    if bad:  # validated at `validate` already; refused again at the sink
        raise SssdConfigError(f"directory.controller_login_groups: {bad[0][:64]!r} is not a group name")
    lines = [
        "# written at boot by elastic-slurm-directory on controllers: only clusters[].directory.controller_login_groups",
        f"[domain/{DOMAIN}]",
    ]
    if directory.controller_login_groups:
        lines += ["access_provider = simple", f"simple_allow_groups = {', '.join(directory.controller_login_groups)}"]
    else:
        lines += ["access_provider = deny"]
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    """Write (or remove, on other roles) the access snippet of this node; one line and status 2 on a bad section."""
    parser = argparse.ArgumentParser(
        prog="python -m slurm_plugin.render.sssd",
        description="Write the sssd conf.d snippet limiting a controller's logins to directory.controller_login_groups.",
    )
    parser.add_argument("--role", required=True, choices=["controller", "compute", "login"], help="this node's role")
    parser.add_argument("--directory-json", required=True, metavar="FILE", help="the directory parameter's value")
    parser.add_argument(
        "--out", required=True, metavar="FILE", help=f"the snippet, e.g. /etc/sssd/conf.d/{ACCESS_SNIPPET}"
    )
    args = parser.parse_args(argv)
    try:
        text = render_access_conf(load_section(Path(args.directory_json).read_text(encoding="utf-8")), args.role)
    except (OSError, SssdConfigError) as exc:
        print(f"render-sssd-access: {exc}", file=sys.stderr)
        return 2
    out = Path(args.out)
    if text is None:
        out.unlink(missing_ok=True)
        return 0
    temp = out.with_name(f".{out.name}.tmp")
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(text)
    os.chmod(temp, 0o600)  # sssd refuses a snippet others can read
    os.replace(temp, out)
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
