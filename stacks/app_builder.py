"""Builds the CDK app from a validated config: per cluster a network, storage, images and cluster stack, plus the
shared accounting stack in the host cluster's region. cdk-nag's AwsSolutions pack validates everything.

`build_app(config_path, outdir)` is the in-process entry (tests); app.py uses `add_stacks` on the CLI's App.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import aws_cdk as cdk
from cdk_nag import AwsSolutionsChecks

import json

from cluster_config import load
from cluster_config.checks import network_azs
from cluster_config.model import Cluster, ElasticSlurmConfig
from stacks.accounting import AccountingStack
from stacks.cluster import ClusterStack
from stacks.images import ImagesStack
from stacks.nag import suppress_reviewed_findings
from stacks.naming import PLACEHOLDER_ACCOUNT, TAG_CLUSTER, stack_name
from stacks.network import NetworkStack
from stacks.storage import StorageStack

REPO_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_CONFIG = REPO_ROOT / "cluster_config" / "examples" / "minimal.yaml"


@dataclass(frozen=True)
class ClusterStacks:
    """The stacks of one cluster."""

    network: NetworkStack
    storage: StorageStack
    images: ImagesStack
    cluster: ClusterStack
    accounting: AccountingStack | None


def environment(cluster: Cluster) -> cdk.Environment:
    """Account from the config, else the CLI's default account, else a placeholder (synth needs no AWS account)."""
    account = cluster.account_id or os.environ.get("CDK_DEFAULT_ACCOUNT") or PLACEHOLDER_ACCOUNT
    return cdk.Environment(account=account, region=cluster.region)


def host_cluster(config: ElasticSlurmConfig) -> str:
    """The cluster whose region holds the accounting database and whose controller runs slurmdbd."""
    return config.accounting.host_cluster or config.clusters[0].name


def add_stacks(app: cdk.App, config: ElasticSlurmConfig, config_path: Path) -> dict[str, ClusterStacks]:
    """Add every stack of `config` to `app`; returns them by cluster name."""
    result: dict[str, ClusterStacks] = {}
    for cluster in config.clusters:
        # The AZs are in the config: give CDK its AZ context so synth needs no AWS account (no lookup).
        account = environment(cluster).account
        azs = [az for az in network_azs(cluster.network)]
        key = f"availability-zones:account={account}:region={cluster.region}"
        if app.node.try_get_context(key) is None:
            app.node.set_context(key, azs)
    for cluster in config.clusters:
        result[cluster.name] = _cluster_stacks(app, config, cluster, config_path)
    for name, stacks in result.items():
        kinds = {"network": stacks.network, "storage": stacks.storage, "images": stacks.images}
        kinds |= {"cluster": stacks.cluster, "accounting": stacks.accounting}
        for kind, stack in kinds.items():
            if stack is None:
                continue
            for key, value in {**config.tags, **config.cluster(name).tags}.items():
                cdk.Tags.of(stack).add(key, value)
            suppress_reviewed_findings(stack, kind, name)
    # cdk-nag v3 runs as a CDK policy-validation plugin (v2 was an Aspect); findings fail the synth.
    cdk.Validations.of(app).add_plugins(AwsSolutionsChecks(app))
    return result


def _cluster_stacks(app: cdk.App, config: ElasticSlurmConfig, cluster: Cluster, config_path: Path) -> ClusterStacks:
    env = environment(cluster)
    name = cluster.name
    network = NetworkStack(
        app, stack_name(name, "network"), cluster=cluster, env=env, description=f"Slurm cluster {name}: VPC and SGs"
    )
    subnets = network.compute_subnets
    common = {"env": env, "vpc": network.vpc, "subnets": subnets}
    storage = StorageStack(
        app, stack_name(name, "storage"), cluster=cluster, security_groups=network.security_groups,
        description=f"Slurm cluster {name}: shared file systems", **common,
    )  # fmt: skip
    images = ImagesStack(
        app, stack_name(name, "images"), cluster=cluster, description=f"Slurm cluster {name}: AMI pipelines", **common
    )
    accounting = None
    if config.accounting.mode == "create" and name == host_cluster(config):
        accounting = AccountingStack(
            app, stack_name(name, "accounting"), accounting=config.accounting, clients=network.security_groups.nodes,
            description="Slurm accounting database (shared by every cluster of the config)", **common,
        )  # fmt: skip
    mount_points = [m["mount_point"] for m in storage.mounts]
    cluster_stack = ClusterStack(
        app,
        stack_name(name, "cluster"),
        cluster=cluster,
        config_path=config_path.resolve(),
        security_groups=network.security_groups,
        mounts_parameter=storage.mounts_parameter,
        file_system_arns=storage.file_system_arns,
        mount_points=mount_points,
        database_secret=accounting.secret if accounting else None,
        database_endpoint=accounting.endpoint if accounting else config.accounting.endpoint,
        existing_database_secret_arn=config.accounting.secret_arn,
        description=f"Slurm cluster {name}: controllers, launch templates, events, deconfigure",
        **common,
    )
    # Deletion order: the cluster stack (and its deconfigure resource) goes before storage, images and the database.
    for dependency in (storage, images, accounting):
        if dependency is not None:
            cluster_stack.add_stack_dependency(dependency, "deconfigure must run before shared resources are deleted")
    for stack in (network, storage, images, cluster_stack):
        cdk.Tags.of(stack).add(TAG_CLUSTER, name)
    if accounting is not None:
        cdk.Tags.of(accounting).add(TAG_CLUSTER, name)
    return ClusterStacks(network, storage, images, cluster_stack, accounting)


def build_app(config_path: str | Path = DEFAULT_CONFIG, outdir: str | Path | None = None) -> cdk.App:
    """A fully built (not yet synthesized) app for `config_path`; raises cluster_config.ConfigInvalid."""
    path = Path(config_path)
    config = load(path)
    context = json.loads((REPO_ROOT / "cdk.json").read_text(encoding="utf-8"))["context"]
    app = cdk.App(outdir=str(outdir) if outdir is not None else None, context=context)
    add_stacks(app, config, path)
    return app
