"""The config model's REST API section (clusters[].rest_api): slurmrestd with JWT authentication on the controllers
and the small web page in front of it (slurm_plugin/webui, docs/rest-api.md).

slurmrestd listens on the controller's 127.0.0.1 only; the web page's server (`web_port`) serves the page and
forwards `/slurm/...` and `/openapi/...` to it, so one port is opened, and only to `allowed_cidrs`.
"""

from __future__ import annotations

from pydantic import Field

from cluster_config.model_base import CidrList, StrictModel

DEFAULT_RESTD_PORT = 6820  # Slurm's default slurmrestd port
DEFAULT_WEB_PORT = 8080  # the web page and the /slurm/ proxy
# the data parser the web page speaks: the newest Slurm 26.05 serves (it serves v0.0.42, deprecated and removed in
# 26.11, to v0.0.45: RELEASE_NOTES.md of 26.05, https://slurm.schedmd.com/openapi_release_notes.html); 24.11 serves
# v0.0.40 to v0.0.42 and 25.11 v0.0.41 to v0.0.44, so neither serves it
DATA_PARSER = "v0.0.45"


class RestApi(StrictModel):
    """slurmrestd (JWT) on the controllers and the web page in front of it (docs/rest-api.md)."""

    enabled: bool = Field(
        default=False,
        description="Run slurmrestd with JWT authentication (AuthAltTypes=auth/jwt) and the web page on the controllers.",
    )
    port: int = Field(
        default=DEFAULT_RESTD_PORT,
        ge=1024,
        le=65535,
        description="slurmrestd's port, on the controller's 127.0.0.1 only (the web page forwards to it).",
    )
    web_port: int = Field(
        default=DEFAULT_WEB_PORT,
        ge=1024,
        le=65535,
        description="Port of the web page and of the REST API through it (`/slurm/...`, `/openapi/...`), HTTPS with "
        "the controller's own certificate (its fingerprint is in the controller's boot log).",
    )
    allowed_cidrs: CidrList = Field(
        default_factory=list,
        description="Private CIDRs (RFC 1918, 100.64.0.0/10, fc00::/7) the controllers' security group lets reach "
        "`web_port` (e.g. your VPN's); empty: only through an SSH tunnel. Public address space is refused: the "
        "page is for the cluster's own network.",
    )
    max_token_lifespan: int = Field(
        default=86400,
        ge=300,
        le=2592000,
        description="Longest lifespan (seconds) of a token `scontrol token` issues to a user "
        "(AuthAltParameters=max_token_lifespan; SlurmUser's are not limited): a leaked token expires by then.",
    )
