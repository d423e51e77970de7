"""What AWS offers and accepts: region and EC2 instance type names (as the installed botocore knows them), and the
value rules of AWS APIs the model checks single fields against (FSx for Lustre capacity, RDS instance class).

`deploy_checks` looks names up here so a typo (`c7i.lrage`, `us-east-9`) fails `elastic-slurm validate` with a
did-you-mean, not a failed deploy. Both lists ship inside botocore (no AWS call, no credentials): the regions of every
partition from its endpoint data, the instance types from the `InstanceType` enum of its EC2 service model. Each is
read once per process.

A name newer than the installed botocore: upgrade botocore (`pip install -U botocore`), or list the name in the
environment variable ELASTIC_SLURM_EXTRA_INSTANCE_TYPES or ELASTIC_SLURM_EXTRA_REGIONS (comma-separated), which are
accepted as well — wherever the config is loaded (validate, instance-cache refresh, synth, deploy). The controllers'
config apply sets ELASTIC_SLURM_NAMES_CHECKED=1: the deploy checked the names already, and the image's botocore may
be older than the deployer's.
"""

from __future__ import annotations

import difflib
import functools
import os
from typing import Any

EXTRA_INSTANCE_TYPES_ENV = "ELASTIC_SLURM_EXTRA_INSTANCE_TYPES"
EXTRA_REGIONS_ENV = "ELASTIC_SLURM_EXTRA_REGIONS"
# Set by the controllers' config apply: the deploy already checked the names, with the deployer's (newer) botocore.
NAMES_CHECKED_ENV = "ELASTIC_SLURM_NAMES_CHECKED"


@functools.cache
def _loader() -> Any:
    import botocore.loaders  # deferred: the catalog is only read when a config is checked

    return botocore.loaders.Loader()


@functools.cache
def instance_types() -> frozenset[str]:
    """Every EC2 instance type name botocore's EC2 model lists."""
    model = _loader().load_service_model("ec2", "service-2")
    return frozenset(model["shapes"]["InstanceType"]["enum"])


@functools.cache
def regions() -> frozenset[str]:
    """Every region name of every AWS partition (aws, aws-cn, aws-us-gov, ...) in botocore's endpoint data."""
    endpoints = _loader().load_data("endpoints")
    return frozenset(region for partition in endpoints["partitions"] for region in partition["regions"])


def _names_checked() -> bool:
    return os.environ.get(NAMES_CHECKED_ENV) == "1"


def _extra(env: str) -> frozenset[str]:
    return frozenset(name.strip() for name in os.environ.get(env, "").split(",") if name.strip())


def unknown_instance_type(name: str) -> str | None:
    """None when `name` is a known instance type, else the one-line problem (with a did-you-mean when one is close)."""
    if _names_checked() or name in instance_types() or name in _extra(EXTRA_INSTANCE_TYPES_ENV):
        return None
    return f"unknown instance type '{name}' ({_hint(name, instance_types(), EXTRA_INSTANCE_TYPES_ENV)})"


def unknown_region(name: str) -> str | None:
    """None when `name` is a known region, else the one-line problem (with a did-you-mean when one is close)."""
    if _names_checked() or name in regions() or name in _extra(EXTRA_REGIONS_ENV):
        return None
    return f"unknown region '{name}' ({_hint(name, regions(), EXTRA_REGIONS_ENV)})"


def _hint(name: str, known: frozenset[str], env: str) -> str:
    close = difflib.get_close_matches(name, sorted(known), n=1)
    if close:
        return f"did you mean '{close[0]}'?"
    return f"not in botocore's list; if it is newer than your botocore, upgrade botocore or add it to {env}"


def lustre_capacity(gib: int) -> int:
    """Return `gib` if FSx for Lustre SCRATCH_2 / PERSISTENT_2 (SSD) accepts it, else raise ValueError.

    FSx API reference, CreateFileSystem, StorageCapacity: "For SCRATCH_2, PERSISTENT_2, and PERSISTENT_1 deployment
    types using SSD storage type, the valid values are 1200 GiB, 2400 GiB, and increments of 2400 GiB."
    """
    if gib != 1200 and gib % 2400:
        raise ValueError(f"FSx for Lustre takes 1200 GiB or a multiple of 2400 GiB, got {gib}")
    return gib


def rds_instance_class(name: str) -> str:
    """`db.r6g.large` → `r6g.large`: CDK's rds.DatabaseInstance and the cost estimate add the `db.` themselves."""
    return name.removeprefix("db.")  # no family is called `db` (model.DB_INSTANCE_CLASS_PATTERN)
