"""Estimated idle monthly cost of a config: what a deployed cluster costs with no job running (pure).

EC2 hours (controllers, `min_nodes` always-on nodes, login nodes) come from a price lookup the caller builds from the
instance cache (`elastic-slurm instance-cache refresh`); everything else from the public us-east-1 list prices below
(approximate elsewhere). Usage-priced items (EFS bytes, S3, data transfer, the Slurm logs) are left out: they are near
zero on an idle cluster. One usage-priced item is modelled because it never stops: the VPC flow logs of a created VPC
(stacks/network.py, to CloudWatch Logs) record the always-on instances' traffic even with no job running (FLOW_LOG_*
below states the assumed idle traffic). docs/deploy.md and docs/cost.md explain each line.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from cluster_config.model import Cluster, ElasticSlurmConfig, NewNetwork

HOURS_PER_MONTH = 730
# USD list prices, us-east-1.
NAT_GATEWAY_HOUR = 0.045
INTERFACE_ENDPOINT_AZ_HOUR = 0.01
INTERFACE_ENDPOINTS = 7  # stacks/network.py INTERFACE_ENDPOINTS
GP3_GIB_MONTH = 0.08
CONTROLLER_ROOT_GIB = 100  # stacks/launch_templates.py ROOT_VOLUME_GIB
COMPUTE_ROOT_GIB = {False: 50, True: 200}
SECRET_MONTH = 0.40
KMS_KEY_MONTH = 1.0
DASHBOARD_MONTH = 3.0
AURORA_ACU_HOUR = 0.12
AURORA_MIN_ACU = 0.5  # slurmdbd holds a connection open, so Aurora never auto-pauses at 0 ACU
RDS_GP3_GIB_MONTH = 0.115
RDS_STORAGE_GIB = 20
RDS_INSTANCE_HOUR = {
    "t4g.micro": 0.016,
    "t4g.small": 0.032,
    "t4g.medium": 0.065,
    "t4g.large": 0.129,
    "m7g.large": 0.168,
}
LUSTRE_GIB_MONTH = {"SCRATCH_2": 0.14, "PERSISTENT_2": 0.145}
ONTAP_GIB_MONTH, ONTAP_MBPS_MONTH = 0.125, 0.72
OPENZFS_GIB_MONTH, OPENZFS_MBPS_MONTH = 0.09, 0.26

# VPC flow logs are "vended logs": CloudWatch Logs bills their delivery per GB ingested (first 10 TB a month) and their
# storage per GB-month (https://aws.amazon.com/cloudwatch/pricing/, Logs: Vended Logs, Delivery to CloudWatch Logs).
FLOW_LOG_INGEST_GB = 0.50
LOGS_STORAGE_GB_MONTH = (
    0.03  # the flow log group keeps one month (stacks/network.py): an upper bound (billed compressed)
)
# Assumed idle traffic, a documented guess (docs/cost.md): the flow log writes one record per flow (5-tuple, so each
# direction of a connection) per network interface per aggregation interval (10 minutes, the default), and an idle
# always-on instance opens about 60 short flows every 10 minutes (the cluster manager's and timers' AWS calls, the
# CloudWatch and SSM agents, NFS to EFS, slurmdbd's database connection, slurmctld's pings): 120 records for its own
# interface, as many again on the interface of the endpoint, NAT gateway, mount target or database at the other end.
FLOW_LOG_RECORDS_PER_INSTANCE_HOUR = 2 * 120 * 6
FLOW_LOG_RECORD_BYTES = 150  # a default-format (version 2) record is about 110 characters, rounded up for metering

PriceLookup = Callable[[str, str], float | None]  # (region, instance type) -> on-demand USD/hour, None if unknown


@dataclass(frozen=True)
class CostEstimate:
    """Line items (what, USD per month) and what could not be priced."""

    items: list[tuple[str, float]] = field(default_factory=list)
    unpriced: list[str] = field(default_factory=list)

    @property
    def total(self) -> float:
        """Sum of the priced items."""
        return sum(usd for _, usd in self.items)


def idle_cost(config: ElasticSlurmConfig, on_demand: PriceLookup) -> CostEstimate:
    """The idle monthly cost of every cluster of `config` plus its shared accounting database."""
    estimate = CostEstimate()
    for cluster in config.clusters:
        _cluster(cluster, on_demand, estimate)
    _accounting(config, estimate)
    return estimate


def _hourly(estimate: CostEstimate, what: str, count: int, price: float | None) -> None:
    if count == 0:
        return
    if price is None:
        estimate.unpriced.append(what)
    else:
        estimate.items.append((what, count * price * HOURS_PER_MONTH))


def _cluster(cluster: Cluster, on_demand: PriceLookup, estimate: CostEstimate) -> None:
    name, items = cluster.name, estimate.items
    controller = cluster.controller
    _hourly(
        estimate,
        f"{name}: {controller.count} controller(s) {controller.instance_type}",
        controller.count,
        on_demand(cluster.region, controller.instance_type),
    )
    items.append((f"{name}: controller root volumes", controller.count * CONTROLLER_ROOT_GIB * GP3_GIB_MONTH))
    for partition in cluster.partitions:
        for pool in partition.pools:
            if pool.min_nodes:
                itype = pool.instance_types[0]
                label = f"{name}: {pool.min_nodes} always-on {partition.name}-{pool.name} node(s) {itype}"
                _hourly(estimate, label, pool.min_nodes, on_demand(cluster.region, itype))
                volume = COMPUTE_ROOT_GIB[pool.gpu is not None] * GP3_GIB_MONTH
                items.append((f"{label}: root volumes", pool.min_nodes * volume))
    for login in cluster.login_nodes:
        label = f"{name}: {login.count} login node(s) {login.name} {login.instance_type}"
        _hourly(estimate, label, login.count, on_demand(cluster.region, login.instance_type))
        if login.count:
            items.append((f"{label}: root volumes", login.count * COMPUTE_ROOT_GIB[False] * GP3_GIB_MONTH))
    if isinstance(cluster.network, NewNetwork):
        items.append(_flow_logs(cluster))
    networks = [cluster.network, *(r.network for r in cluster.remote_regions)]
    for network in networks:
        if isinstance(network, NewNetwork):
            items.append((f"{name}: NAT gateway ({network.vpc_cidr})", NAT_GATEWAY_HOUR * HOURS_PER_MONTH))
            if network.interface_endpoints:
                azs = len(network.availability_zones)
                per_month = INTERFACE_ENDPOINTS * azs * INTERFACE_ENDPOINT_AZ_HOUR * HOURS_PER_MONTH
                items.append((f"{name}: {INTERFACE_ENDPOINTS} interface endpoints x {azs} AZs", per_month))
    storage = cluster.storage
    if storage.fsx_lustre:
        lustre = storage.fsx_lustre
        gib = lustre.storage_capacity_gib * LUSTRE_GIB_MONTH[lustre.deployment_type]
        items.append((f"{name}: FSx for Lustre {lustre.storage_capacity_gib} GiB", gib))
    if storage.fsx_ontap:
        ontap = storage.fsx_ontap
        usd = ontap.storage_capacity_gib * ONTAP_GIB_MONTH + ontap.throughput_mbps * ONTAP_MBPS_MONTH
        items.append((f"{name}: FSx for ONTAP", usd))
    if storage.fsx_openzfs:
        zfs = storage.fsx_openzfs
        usd = zfs.storage_capacity_gib * OPENZFS_GIB_MONTH + zfs.throughput_mbps * OPENZFS_MBPS_MONTH
        items.append((f"{name}: FSx for OpenZFS", usd))
    items.append((f"{name}: munge secret, alerts KMS key, dashboard", SECRET_MONTH + KMS_KEY_MONTH + DASHBOARD_MONTH))


def always_on_instances(cluster: Cluster) -> int:
    """Instances that run with no job: controllers, login nodes and every pool's `min_nodes`."""
    pools = sum(pool.min_nodes for partition in cluster.partitions for pool in partition.pools)
    return cluster.controller.count + sum(login.count for login in cluster.login_nodes) + pools


def _flow_logs(cluster: Cluster) -> tuple[str, float]:
    """The home VPC's flow logs at the assumed idle traffic of the cluster's always-on instances (remote regions' VPCs
    hold no always-on instance but `min_nodes` placed there, counted here too)."""
    instances = always_on_instances(cluster)
    gb = instances * FLOW_LOG_RECORDS_PER_INSTANCE_HOUR * HOURS_PER_MONTH * FLOW_LOG_RECORD_BYTES / 1e9
    return (
        f"{cluster.name}: VPC flow logs (~{gb:.1f} GB/month of {instances} always-on instance(s))",
        gb * (FLOW_LOG_INGEST_GB + LOGS_STORAGE_GB_MONTH),
    )


def _accounting(config: ElasticSlurmConfig, estimate: CostEstimate) -> None:
    accounting = config.accounting
    if accounting.mode != "create":
        return
    if accounting.engine == "aurora_serverless_v2":
        usd = AURORA_MIN_ACU * AURORA_ACU_HOUR * HOURS_PER_MONTH
        estimate.items.append((f"accounting: Aurora Serverless v2 at its {AURORA_MIN_ACU} ACU floor", usd))
    else:
        _hourly(
            estimate,
            f"accounting: RDS MariaDB db.{accounting.instance_class}",
            1,
            RDS_INSTANCE_HOUR.get(accounting.instance_class),
        )
        estimate.items.append(("accounting: RDS storage", RDS_STORAGE_GIB * RDS_GP3_GIB_MONTH))
    estimate.items.append(("accounting: database secret", SECRET_MONTH))


def cost_lines(estimate: CostEstimate) -> list[str]:
    """The estimate as printable lines: the total first, then the items, then what is not priced."""
    floor = "at least " if estimate.unpriced else ""
    lines = [f"  estimated idle cost: {floor}${estimate.total:,.0f}/month (no jobs running; list prices, us-east-1)"]
    lines += [f"    ${usd:9,.2f}  {what}" for what, usd in estimate.items]
    lines += [f"    not priced (not in the instance cache, see --cache): {what}" for what in estimate.unpriced]
    return lines
