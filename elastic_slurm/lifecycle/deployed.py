"""The config a cluster runs: the S3 object its SSM parameter `/elastic-slurm/NAME/config-url` names.

`cdk deploy` uploads the YAML file as it is (a content-addressed CDK asset, stacks/cluster.py `Config`) and the
cluster stack writes the object's `s3://bucket/key` URL into that parameter in the cluster's home region; the
controllers read it the same way (assets/bootstrap/elastic-slurm-config-apply; localcloud/instances/controller_boot.py
`deploy_config` does the same in the local cloud). So the old config is parsed here exactly like a local file.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from cluster_config import ConfigInvalid, ElasticSlurmConfig
from cluster_config.loader import parse_yaml
from elastic_slurm.errors import OperationFailed, UserError
from elastic_slurm.lifecycle.aws import aws_errors, client, error_code
from slurm_plugin.naming import config_url_parameter

_S3_URL = re.compile(r"^s3://([^/]+)/(.+)$")


@dataclass(frozen=True)
class DeployedConfig:
    """The deployed config of one cluster, and where it was read from."""

    cluster: str
    region: str
    url: str
    config: ElasticSlurmConfig


def config_url(cluster: str, region: str) -> str | None:
    """The value of the cluster's config-url parameter; None when it does not exist (not deployed)."""
    from botocore.exceptions import ClientError

    name = config_url_parameter(cluster)
    with aws_errors(f"ssm get-parameter {name} ({region})"):
        try:
            return str(client("ssm", region).get_parameter(Name=name)["Parameter"]["Value"])
        except ClientError as exc:
            if error_code(exc) == "ParameterNotFound":
                return None
            raise


def read_object(url: str, region: str) -> str:
    """The text of the `s3://bucket/key` object."""
    match = _S3_URL.match(url)
    if match is None:
        raise UserError(f"config-url parameter: '{url}' is not an s3://bucket/key URL")
    with aws_errors(f"s3 get-object {url}"):
        body = client("s3", region).get_object(Bucket=match[1], Key=match[2])["Body"].read()
    try:
        return str(body.decode("utf-8"))
    except UnicodeDecodeError:
        raise UserError(f"deployed config {url}: not UTF-8 text") from None


def parse_deployed(text: str, url: str) -> ElasticSlurmConfig:
    """Validate a deployed config; one line when it no longer validates (the schema may have changed since)."""
    try:
        return parse_yaml(text, url)
    except ConfigInvalid as exc:
        more = f" (and {len(exc.errors) - 1} more)" if len(exc.errors) > 1 else ""
        raise UserError(
            f"deployed config {url} does not validate with this version: {exc.errors[0]}{more}; "
            "compare with a local copy instead: --against OLD.yaml"
        ) from None


def read_deployed(config: ElasticSlurmConfig) -> DeployedConfig:
    """The deployed config of the first cluster of `config` that is deployed (every cluster of one file is deployed
    from the same file); OperationFailed (exit 1) when none is."""
    for cluster in config.clusters:
        url = config_url(cluster.name, cluster.region)
        if url is not None:
            return DeployedConfig(
                cluster.name, cluster.region, url, parse_deployed(read_object(url, cluster.region), url)
            )
    names = ", ".join(f"{c.name} ({c.region})" for c in config.clusters)
    raise OperationFailed(
        f"no deployed cluster in this file: {names} has no {config_url_parameter('NAME')} parameter; "
        "deploy with `elastic-slurm cluster create`, or compare offline with --against OLD.yaml"
    )
