"""Cross-field rules of `clusters[].rest_api` (docs/rest-api.md): ports that collide, a world-open web page, the
Slurm settings it owns, and Slurm releases the web page's data parser is not tested with."""

from __future__ import annotations

from collections.abc import Iterator

from cluster_config.address_space import address_space
from cluster_config.model import Cluster, ElasticSlurmConfig
from cluster_config.model_rest_api import DATA_PARSER

# Ports the controller already listens on: slurmctld, slurmd, slurmdbd (Slurm's defaults), the metrics exporter
TAKEN_PORTS = {6817: "slurmctld", 6818: "slurmd", 6819: "slurmdbd", 9464: "the metrics exporter", 22: "SSH"}
# slurm.conf keys the REST API writes (slurm_plugin/render/rest_api.py)
OWNED_KEYS = ("authalttypes", "authaltparameters")
# Where the web page may be opened: private and shared address space only (the page is for the cluster's own network;
# its tokens are bearer credentials): cluster_config/address_space.py
TESTED_RELEASES = ("26.05",)  # Slurm releases serving the data parser the web page speaks, tested with slurmrestd


def rest_api_problems(cluster: Cluster, path: str) -> Iterator[tuple[str, str]]:
    """(YAML path, message) per problem of the cluster's REST API section."""
    rest = cluster.rest_api
    where = f"{path}.rest_api"
    if not rest.enabled:
        if rest.allowed_cidrs:
            yield f"{where}.allowed_cidrs", "the REST API is not enabled: set rest_api.enabled: true or remove them"
        return
    if rest.port == rest.web_port:
        yield f"{where}.web_port", f"the web page and slurmrestd cannot share port {rest.port}"
    for field, port in (("port", rest.port), ("web_port", rest.web_port)):
        if port in TAKEN_PORTS:
            yield f"{where}.{field}", f"port {port} is {TAKEN_PORTS[port]}'s on the controller"
    for index, cidr in enumerate(rest.allowed_cidrs):
        if address_space(cidr) != "private":
            yield (
                f"{where}.allowed_cidrs[{index}]",
                f"{cidr} is not private address space: the web page hands out what tokens can do to whoever holds one, "
                "name your VPN's or office's private CIDRs (RFC 1918, 100.64.0.0/10, fc00::/7), or use an SSH tunnel",
            )
    for key in cluster.slurm_settings:
        if key.lower() in OWNED_KEYS:
            yield (
                f"{path}.slurm_settings.{key}",
                "rest_api.enabled sets AuthAltTypes=auth/jwt and its key: remove this setting or disable the REST API",
            )
    release = ".".join(cluster.images.slurm_version.split(".")[:2])
    if release not in TESTED_RELEASES:
        yield (
            f"{where}.enabled",
            f"Slurm {cluster.images.slurm_version} is not supported with the REST API (the web page speaks "
            f"{DATA_PARSER}, served by and tested with Slurm {', '.join(TESTED_RELEASES)})",
        )


def rest_api_accounting_problems(config: ElasticSlurmConfig) -> Iterator[tuple[str, str]]:
    """slurmrestd's answers go through slurmdbd with the user's token, which slurmdbd checks with the key of the
    cluster whose controller runs it: only that cluster (the accounting host) may have the REST API."""
    if config.accounting.mode == "none":
        return
    host = config.accounting_host
    for index, cluster in enumerate(config.clusters):
        if cluster.rest_api.enabled and cluster.name != host:
            yield (
                f"clusters[{index}].rest_api.enabled",
                f"slurmdbd runs on cluster {host}'s controller and checks tokens with its key: enable the REST API "
                f"on {host} only",
            )
