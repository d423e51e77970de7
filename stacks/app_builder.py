"""Builds the CDK app from a validated config: per cluster a network, storage, images and cluster stack, plus the
shared accounting stack in the host cluster's region. cdk-nag's AwsSolutions pack validates everything.

`build_app(config_path, outdir)` is the in-process entry (tests); stacks/cdk_app.py uses `add_stacks` on the CLI's App.
Both build with cdk.json's context (stacks/project.py: the checkout's, or a pip-installed package's copy).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aws_cdk as cdk
from cdk_nag import AwsSolutionsChecks

from cluster_config import load
from cluster_config.checks import network_azs
from cluster_config.model import Cluster, ElasticSlurmConfig, ExistingNetwork, NewNetwork, RemoteRegion
from slurm_plugin.licenses.units import schedules
from stacks.accounting import AccountingStack
from stacks.cluster import ClusterStack
from stacks.federation import add_federation_stacks, federation_peer_cidrs, munge_sharing, peered_members
from stacks.images import ImagesStack
from stacks.nag import suppress_reviewed_findings
from stacks.naming import PLACEHOLDER_ACCOUNT, TAG_CLUSTER, stack_name
from stacks.network import NetworkStack
from stacks.onprem import onprem_ingress
from stacks.project import cdk_context
from stacks.region import RegionStack
from stacks.storage import StorageStack


@dataclass(frozen=True)
class ClusterStacks:
    """The stacks of one cluster."""

    network: NetworkStack
    storage: StorageStack
    images: ImagesStack
    cluster: ClusterStack
    accounting: AccountingStack | None
    remote: list[tuple[NetworkStack, RegionStack]]


def environment(cluster: Cluster) -> cdk.Environment:
    """Account from the config, else the CLI's default account, else a placeholder (synth needs no AWS account)."""
    account = cluster.account_id or os.environ.get("CDK_DEFAULT_ACCOUNT") or PLACEHOLDER_ACCOUNT
    return cdk.Environment(account=account, region=cluster.region)


def host_cluster(config: ElasticSlurmConfig) -> str:
    """The cluster whose region holds the accounting database and whose controller runs slurmdbd."""
    return config.accounting_host


def add_stacks(app: cdk.App, config: ElasticSlurmConfig, config_path: Path) -> dict[str, ClusterStacks]:
    """Add every stack of `config` to `app`; returns them by cluster name."""
    result: dict[str, ClusterStacks] = {}
    for cluster in config.clusters:
        # The AZs are in the config: give CDK its AZ context so synth needs no AWS account (no lookup).
        account = environment(cluster).account
        for region, network in [
            (cluster.region, cluster.network),
            *((r.region, r.network) for r in cluster.remote_regions),
        ]:
            key = f"availability-zones:account={account}:region={region}"
            if app.node.try_get_context(key) is None:
                app.node.set_context(key, network_azs(network))
    for cluster in config.clusters:
        result[cluster.name] = _cluster_stacks(app, config, cluster, config_path)
    federation = add_federation_stacks(app, config, result)
    for name, stacks in result.items():
        kinds: list[tuple[str, cdk.Stack | None]] = [("network", stacks.network), ("storage", stacks.storage)]
        kinds += [("federation", s) for s in federation.get(name, [])]
        kinds += [("images", stacks.images), ("cluster", stacks.cluster), ("accounting", stacks.accounting)]
        kinds += [(kind, s) for pair in stacks.remote for kind, s in zip(("network", "region"), pair, strict=True)]
        cluster = config.cluster(name)
        regions = [cluster.region, *(r.region for r in cluster.remote_regions)]
        for kind, stack in kinds:
            if stack is None:
                continue
            for key, value in {**config.tags, **cluster.tags}.items():
                # not on launch templates: a tag there is a new template version, and a new version of the
                # controllers' template replaces them. Controllers carry the tags on the instance resource (updated
                # in place); compute instances get them from the plugin at launch (manifest tags).
                cdk.Tags.of(stack).add(key, value, exclude_resource_types=["AWS::EC2::LaunchTemplate"])
            suppress_reviewed_findings(stack, kind, name, regions)
    # cdk-nag v3 runs as a CDK policy-validation plugin (v2 was an Aspect); findings fail the synth.
    cdk.Validations.of(app).add_plugins(AwsSolutionsChecks(app))
    return result


def _cluster_stacks(app: cdk.App, config: ElasticSlurmConfig, cluster: Cluster, config_path: Path) -> ClusterStacks:
    env = environment(cluster)
    name = cluster.name
    federation_cidrs = federation_peer_cidrs(config, name)
    # CDK cross-region references (SSM-backed) only when regions are remote or federation peers sit elsewhere
    crossing = bool(cluster.remote_regions) or any(
        config.cluster(peer).region != cluster.region
        for pair in peered_members(config)
        if name in pair
        for peer in pair
    )
    remote_cidrs = tuple(c for r in cluster.remote_regions for c in network_cidrs(r.network))
    network = NetworkStack(
        app,
        stack_name(name, "network"),
        cluster=cluster,
        peer_cidrs=remote_cidrs + federation_cidrs,
        onprem=onprem_ingress(config, name, host_cluster(config)),
        runs_slurmdbd=config.accounting.mode != "none" and name == host_cluster(config),
        env=env,
        cross_region_references=crossing,
        description=f"Slurm cluster {name}: VPC and SGs",
    )
    owner, replica_regions = munge_sharing(config, name)
    remote = [_region_stacks(app, cluster, network, r, owner) for r in cluster.remote_regions]
    subnets = network.compute_subnets
    common: dict[str, Any] = {"env": env, "vpc": network.vpc, "subnets": subnets}
    storage = StorageStack(
        app,
        stack_name(name, "storage"),
        cluster=cluster,
        security_groups=network.security_groups,
        description=f"Slurm cluster {name}: shared file systems",
        **common,
    )
    images = ImagesStack(
        app, stack_name(name, "images"), cluster=cluster, description=f"Slurm cluster {name}: AMI pipelines", **common
    )
    for _, region_stack in remote:
        # Image Builder writes the region's AMI parameter during the images stack's deploy
        region_stack.add_stack_dependency(images, "launch templates resolve the AMI parameter Image Builder writes")
    accounting = None
    is_host = name == host_cluster(config)
    if config.accounting.mode == "create" and is_host:
        accounting = AccountingStack(
            app,
            stack_name(name, "accounting"),
            accounting=config.accounting,
            clients=network.security_groups.controllers,
            description="Slurm accounting database (shared by every cluster of the config)",
            **common,
        )
    mount_points = [m["mount_point"] for m in storage.mounts]
    cluster_stack = ClusterStack(
        app,
        stack_name(name, "cluster"),
        cluster=cluster,
        config_path=config_path.resolve(),
        security_groups=network.security_groups,
        mounts_parameter=storage.mounts_parameter,
        file_system_arns=storage.file_system_arns,
        controller_mounts_parameter=storage.controller_mounts_parameter,
        controller_state_arn=storage.controller_state_arn,
        mount_points=mount_points,
        # only the accounting host's controller runs slurmdbd: another cluster of the file gets neither the database
        # secret nor its endpoint, so its role cannot read the secret (issue 30 #3); its slurm.conf names the host's
        # slurmdbd (slurm_plugin/controller_hosts.py)
        database_secret=accounting.secret if accounting else None,
        database_endpoint=(accounting.endpoint if accounting else config.accounting.endpoint) if is_host else None,
        existing_database_secret_arn=config.accounting.secret_arn if is_host else None,
        remote_regions=[region for _, region in remote],
        munge_owner=owner,
        munge_replica_regions=replica_regions,
        accounting=config.accounting.mode != "none",
        license_schedules=tuple(schedules(config)),
        cross_region_references=crossing,
        description=f"Slurm cluster {name}: controllers, launch templates, events, deconfigure",
        **common,
    )
    # Deletion order: the cluster stack (and its deconfigure resource) goes before storage, images and the database.
    for dependency in (storage, images, accounting):
        if dependency is not None:
            cluster_stack.add_stack_dependency(dependency, "deconfigure must run before shared resources are deleted")
    for stack in (network, storage, images, cluster_stack, *(s for pair in remote for s in pair)):
        cdk.Tags.of(stack).add(TAG_CLUSTER, name)
    if crossing:
        for stack in (network, cluster_stack, *(s for pair in remote for s in pair)):
            # cfn-lint W3005, template-wide because CDK generates its cross-region reference providers during
            # synthesis (after our code and aspects ran, so no per-resource metadata): like every aws-cdk-lib
            # Lambda they carry a DependsOn on their role next to the GetAtt. Harmless.
            stack.template_options.metadata = {"cfn-lint": {"config": {"ignore_checks": ["W3005"]}}}
    if accounting is not None:
        cdk.Tags.of(accounting).add(TAG_CLUSTER, name)
    return ClusterStacks(network, storage, images, cluster_stack, accounting, remote)


def network_cidrs(network: NewNetwork | ExistingNetwork) -> tuple[str, ...]:
    """The address ranges of a network (its VPC CIDR, or its imported subnets' CIDRs)."""
    if isinstance(network, NewNetwork):
        return (network.vpc_cidr,)
    return tuple(s.cidr for s in network.subnets)


def _region_stacks(
    app: cdk.App, cluster: Cluster, home: NetworkStack, remote: RemoteRegion, munge_owner: str | None
) -> tuple[NetworkStack, RegionStack]:
    """The network and region stacks of one remote region, peered with the home VPC."""
    env = cdk.Environment(account=environment(cluster).account, region=remote.region)
    home_cidrs = network_cidrs(cluster.network)
    name = cluster.name
    network = NetworkStack(
        app,
        stack_name(name, f"network-{remote.region}"),
        cluster=cluster,
        network=remote.network,
        peer_cidrs=home_cidrs,
        env=env,
        description=f"Slurm cluster {name}: VPC and SGs in {remote.region}",
    )
    region = RegionStack(
        app,
        stack_name(name, f"region-{remote.region}"),
        cluster=cluster,
        network=network,
        home_vpc_id=home.vpc.vpc_id,
        home_region=cluster.region,
        home_cidrs=home_cidrs,
        munge_owner=munge_owner,
        env=env,
        cross_region_references=True,
        description=f"Slurm cluster {name}: peering and launch templates in {remote.region}",
    )
    return network, region


def build_app(config_path: str | Path, outdir: str | Path | None = None) -> cdk.App:
    """A fully built (not yet synthesized) app for `config_path`; raises cluster_config.ConfigInvalid."""
    path = Path(config_path)
    config = load(path)
    app = cdk.App(outdir=str(outdir) if outdir is not None else None, context=cdk_context())
    add_stacks(app, config, path)
    return app
