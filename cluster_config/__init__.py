"""The cluster config: pydantic schema, cross-field checks and the YAML loader (see docs/configuration.md)."""

from cluster_config.checks import ConfigError, architecture_of, node_name, pool_azs, region_of_az
from cluster_config.loader import ConfigInvalid, load, parse
from cluster_config.model import Cluster, ElasticSlurmConfig, Partition, Pool, PurchaseOption

__all__ = [
    "Cluster",
    "ConfigError",
    "ConfigInvalid",
    "ElasticSlurmConfig",
    "Partition",
    "Pool",
    "PurchaseOption",
    "architecture_of",
    "load",
    "node_name",
    "parse",
    "pool_azs",
    "region_of_az",
]
