"""The config model's accounting section: the slurmdbd database and slurmdbd.conf settings, shared by every cluster of
the file (re-exported by `cluster_config.model`)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import AfterValidator, Field

from cluster_config import aws_catalog
from cluster_config.model_base import CLUSTER_NAME_PATTERN, DB_INSTANCE_CLASS_PATTERN, HOST_PORT_PATTERN, StrictModel
from cluster_config.safe_types import SecretArn
from cluster_config.slurm_settings import DBD_OWNED, SlurmSettings, refuse_owned


class Accounting(StrictModel):
    """Slurm accounting (slurmdbd). Shared by every cluster of the file."""

    mode: Literal["none", "create", "existing"] = Field(
        default="none", description="`create` an RDS database, use an `existing` endpoint, or `none` (no slurmdbd)."
    )
    engine: Literal["aurora_serverless_v2", "mariadb_instance"] = Field(
        default="aurora_serverless_v2", description="With `create`: Aurora MySQL Serverless v2 or a single RDS MariaDB."
    )
    instance_class: Annotated[str, AfterValidator(aws_catalog.rds_instance_class)] = Field(
        default="t4g.medium",
        pattern=DB_INSTANCE_CLASS_PATTERN,
        description="With `mariadb_instance`: the RDS instance class, e.g. t4g.medium (a leading `db.` is dropped).",
    )
    deletion_protection: bool = Field(default=True, description="Protect the database from deletion.")
    host_cluster: str | None = Field(
        default=None,
        pattern=CLUSTER_NAME_PATTERN,
        description="Cluster whose controller runs slurmdbd; default: the first cluster.",
    )
    endpoint: str | None = Field(
        default=None, pattern=HOST_PORT_PATTERN, description="With `existing`: host:port of the database."
    )
    secret_arn: SecretArn | None = Field(
        default=None,
        description="With `existing`: ARN of the Secrets Manager secret with the credentials "
        "(arn:aws:secretsmanager:REGION:ACCOUNT:secret:NAME-abcdef).",
    )
    slurmdbd_settings: Annotated[SlurmSettings, AfterValidator(refuse_owned(DBD_OWNED))] = Field(
        default_factory=dict,
        description="Extra slurmdbd.conf settings (`Key: value`), merged into what elastic-slurm renders: a key it "
        "also writes takes this value, keys it owns are refused (docs/custom-settings.md). E.g. PurgeJobAfter: 12month",
    )
