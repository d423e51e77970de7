"""sssd.conf for a node of a cluster with `clusters[].directory` (pure): one LDAP domain, the NSS and PAM responders.

Every node (controllers, login and compute nodes) resolves the site's users and groups through SSSD: slurmctld to put
names on uids, login nodes for the users' shells, compute nodes for the job's user and groups. The config's
`directory` section is an SSM parameter (JSON, `section_json`); at boot assets/bootstrap/elastic-slurm-directory
reads it and the bind password from Secrets Manager and runs `elastic-slurm render-sssd`, which writes this text with
mode 0600 (sssd refuses a file others can read).
"""

from __future__ import annotations

import json

from cluster_config.model_access import Directory

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
