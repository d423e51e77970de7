"""The config model's access section: login nodes, where users log in and submit jobs (docs/login-nodes.md), and the
site's directory their accounts come from (docs/users.md)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, model_validator

from cluster_config.model_base import INSTANCE_TYPE_PATTERN, NAME_PATTERN, SECURITY_GROUP_PATTERN, StrictModel
from cluster_config.model_site import CustomActions
from cluster_config.safe_types import SafeText, SecretArn

# One Auto Scaling group per login pool; a handful of login nodes serve thousands of users' shells.
MAX_LOGIN_NODES = 20


class LoginPool(StrictModel):
    """A group of identical login nodes: the cluster's compute image running the Slurm clients and `sackd`
    (configless: no slurm.conf on their disks), kept at `count` instances by an Auto Scaling group."""

    name: str = Field(
        pattern=NAME_PATTERN, max_length=32, description="Login pool name (lowercase letters and digits)."
    )
    instance_type: str = Field(
        default="c7i.large", pattern=INSTANCE_TYPE_PATTERN, description="Instance type of the login nodes."
    )
    count: int = Field(
        default=1,
        ge=0,
        le=MAX_LOGIN_NODES,
        description="Login nodes kept running (an Auto Scaling group replaces one that fails its EC2 status checks).",
    )
    security_groups: list[Annotated[str, Field(pattern=SECURITY_GROUP_PATTERN)]] = Field(
        default_factory=list,
        description="Extra security groups (of the cluster's VPC) on the login nodes, e.g. SSH from your network; "
        "they also get the cluster's SSH group (clusters[].ssh_allowed_cidrs).",
    )
    custom_actions: CustomActions = Field(default_factory=CustomActions, description="Boot scripts of the login nodes.")


# A directory group name as sssd's simple access provider lists it (comma-separated: no comma, blank or quote; a
# qualified `group@domain` is fine). sssd.conf is the sink: a newline or `[` would add a line or a section.
GROUP_NAME_PATTERN = r"^[A-Za-z0-9_][A-Za-z0-9_.@-]{0,63}$"

# sssd.conf domain options the product writes from the fields above (or needs as they are)
DIRECTORY_OWNED = {
    "id_provider": "the domain is an LDAP domain",
    "auth_provider": "the domain is an LDAP domain",
    "ldap_uri": "set directory.ldap_uri",
    "ldap_search_base": "set directory.search_base",
    "ldap_schema": "set directory.ldap_schema",
    "ldap_default_bind_dn": "set directory.bind_dn",
    "ldap_default_authtok_type": "set directory.bind_password_secret_arn",
    "ldap_default_authtok": "set directory.bind_password_secret_arn (never a password in the config)",
    "ldap_tls_reqcert": "set directory.tls_reqcert",
}


class Directory(StrictModel):
    """Users and groups from the site's LDAP directory (OpenLDAP, 389 DS, FreeIPA's LDAP, Active Directory's LDAP),
    resolved on every node by SSSD (docs/users.md): no local accounts for your users in the images."""

    ldap_uri: list[Annotated[str, Field(pattern=r"^ldaps?://[A-Za-z0-9.\-\[\]:]+(:\d{1,5})?/?$")]] = Field(
        min_length=1,
        description="LDAP servers in order of preference, e.g. ldaps://ldap.example.com (ldaps:// or "
        "ldap:// with StartTLS in domain_settings for anything but a lab).",
    )
    search_base: SafeText = Field(
        pattern=r"^[A-Za-z]+=[^,\n]+(,[A-Za-z]+=[^,\n]+)*$",
        description="Base DN of users and groups, e.g. dc=example,dc=com.",
    )
    ldap_schema: Literal["rfc2307", "rfc2307bis", "ad"] = Field(
        default="rfc2307",
        description="Group membership schema: rfc2307 (memberUid), rfc2307bis (member DNs) or ad (Active Directory).",
    )
    bind_dn: SafeText | None = Field(
        default=None,
        pattern=r"^[A-Za-z]+=[^,\n]+(,[A-Za-z]+=[^,\n]+)*$",
        description="DN the nodes bind as (a read-only account); none: anonymous binds.",
    )
    bind_password_secret_arn: SecretArn | None = Field(
        default=None,
        description="Secrets Manager secret whose SecretString is the bind DN's password (read by the nodes at boot; "
        "their roles may read exactly this secret).",
    )
    bind_password_kms_key_arn: str | None = Field(
        default=None,
        pattern=r"^arn:aws[a-z-]*:kms:[a-z0-9-]+:\d{12}:key/[A-Za-z0-9-]+$",
        description="The customer managed KMS key the secret is encrypted with, if not Secrets Manager's own: the nodes "
        "may decrypt with it.",
    )
    tls_reqcert: Literal["demand", "hard", "allow", "try", "never"] = Field(
        default="demand", description="SSSD ldap_tls_reqcert: how the server's certificate is checked."
    )
    controller_login_groups: list[Annotated[str, Field(pattern=GROUP_NAME_PATTERN)]] = Field(
        default_factory=list,
        max_length=32,
        description="Directory groups whose members may log in to the controllers (SSH, `su`, anything through "
        "PAM); none: no directory user may (root and Session Manager still can). On controllers this replaces any "
        "access_provider of domain_settings; login and compute nodes keep those (by default they admit every "
        "directory user; compute nodes only those with a job there when pam_slurm_adopt is on).",
    )
    pam_slurm_adopt: bool = Field(
        default=False,
        description="On compute nodes, admit a directory user's SSH only while the user has a job on the node, and put "
        "the session into that job's cgroup (Slurm's pam_slurm_adopt; slurm.conf gets PrologFlags=Contain).",
    )
    domain_settings: dict[Annotated[str, Field(pattern=r"^[a-z][a-z0-9_]*$")], str | int | bool] = Field(
        default_factory=dict,
        description="Extra options of SSSD's domain section (sssd-ldap(5)), e.g. ldap_id_use_start_tls: true, "
        "ldap_user_search_base: ou=people,dc=example,dc=com; the options above are refused here.",
    )

    @model_validator(mode="after")
    def _consistent(self) -> Directory:
        if (self.bind_dn is None) != (self.bind_password_secret_arn is None):
            raise ValueError("bind_dn and bind_password_secret_arn go together (or neither, for anonymous binds)")
        for key, value in self.domain_settings.items():
            if key in DIRECTORY_OWNED:
                raise ValueError(f"domain_settings: key '{key}' is set by elastic-slurm ({DIRECTORY_OWNED[key]})")
            if "\n" in str(value):
                raise ValueError(f"domain_settings: key '{key}': a value is one line")
        return self
