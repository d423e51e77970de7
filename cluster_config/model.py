"""Pydantic v2 schema of the cluster YAML: one file describes one or more clusters that may share accounting.

Every field carries a description: it becomes the JSON Schema (`elastic-slurm schema`) and docs/configuration.md.
Single-field rules (patterns, ranges) live here and in the sections it imports (`model_base`: patterns and the strict
base class; `model_infra`: network and storage; `model_site`: site customizations — custom actions, capacity
reservations, extra IAM policies; `model_accounting`: slurmdbd and its database); rules that span fields live in
`cluster_config.checks`.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import AfterValidator, Field

from cluster_config import model_site, slurm_release, slurm_syntax
from cluster_config.model_access import Directory, LoginPool
from cluster_config.model_accounting import Accounting
from cluster_config.model_base import (
    AZ_PATTERN,
    CLUSTER_NAME_PATTERN,
    DB_INSTANCE_CLASS_PATTERN,
    HOST_PORT_PATTERN,
    INSTANCE_TYPE_PATTERN,
    NAME_PATTERN,
    REGION_PATTERN,
    SECURITY_GROUP_PATTERN,
    PurchaseOption,
    StrictModel,
)
from cluster_config.model_budget import Budget
from cluster_config.model_infra import (
    EfsStorage,
    ExistingNetwork,
    ExistingSubnet,
    ExtraMount,
    FsxLustreStorage,
    FsxOntapStorage,
    FsxOpenZfsStorage,
    Network,
    NewNetwork,
    RemoteRegion,
    Storage,
)
from cluster_config.model_onprem import OnpremCluster
from cluster_config.model_rest_api import RestApi
from cluster_config.model_site import CapacityReservation, CustomAction, CustomActions, IamPolicies
from cluster_config.safe_types import HttpsUrl, RuleCidrList, SafeText, ScheduleExpression, SystemdCalendar, Tags
from cluster_config.slurm_settings import (
    CGROUP_OWNED,
    CLUSTER_OWNED,
    GRES_OWNED,
    GRES_POOL_OWNED,
    PARTITION_OWNED,
    POOL_OWNED,
    SlurmSettings,
    refuse_owned,
)
from cluster_config.slurm_syntax import FEATURE_PATTERN

__all__ = [  # the sections' models and patterns, re-exported: `from cluster_config.model import X` works for each
    "AZ_PATTERN",
    "CLUSTER_NAME_PATTERN",
    "DB_INSTANCE_CLASS_PATTERN",
    "HOST_PORT_PATTERN",
    "INSTANCE_TYPE_PATTERN",
    "NAME_PATTERN",
    "REGION_PATTERN",
    "SECURITY_GROUP_PATTERN",
    "Accounting",
    "Budget",
    "CapacityReservation",
    "CustomAction",
    "CustomActions",
    "Directory",
    "EfsStorage",
    "ExistingNetwork",
    "ExistingSubnet",
    "ExtraMount",
    "FsxLustreStorage",
    "FsxOntapStorage",
    "FsxOpenZfsStorage",
    "IamPolicies",
    "LoginPool",
    "Network",
    "NewNetwork",
    "PurchaseOption",
    "RemoteRegion",
    "RestApi",
    "Storage",
    "StrictModel",
]


# ---------------------------------------------------------------- images, controller (accounting: model_accounting)
class SlurmSource(StrictModel):
    """Where an image gets the Slurm source when it builds a release other than the pinned one."""

    url: HttpsUrl = Field(description="HTTPS URL of the source tarball (e.g. SchedMD's .tar.bz2).")
    sha256: str = Field(pattern=r"^[0-9a-f]{64}$", description="Its sha256; the build stops on any other content.")


class Images(StrictModel):
    """AMIs baked by EC2 Image Builder for controllers and compute."""

    base_os: Literal["debian13", "rocky9", "rhel9", "al2023", "ubuntu2204", "ubuntu2404"] = Field(
        default="debian13",
        description="Base OS of every AMI. debian13 is the one executed end to end by the tests (docs/images.md).",
    )
    slurm_version: str = Field(
        default=slurm_release.VERSION,
        pattern=r"^\d+\.\d+\.\d+$",
        description="Slurm release built into the images; the local cloud runs the same release.",
    )
    slurm_source: SlurmSource | None = Field(
        default=None,
        description="Source tarball and sha256 of `slurm_version`; required for any release but the pinned one"
        " (cluster_config/slurm_release.py).",
    )
    rebuild_schedule: ScheduleExpression | None = Field(
        default="cron(0 4 ? * SUN *)",
        description="Image Builder schedule expression, cron(...) or rate(...); null: build only on deploy.",
    )

    def source(self) -> SlurmSource:
        """The source the images build: the configured one, else the pinned release's."""
        if self.slurm_source is not None:
            return self.slurm_source
        return SlurmSource(url=slurm_release.SOURCE_URL, sha256=slurm_release.SOURCE_SHA256)


class Controller(StrictModel):
    """The Slurm controller(s)."""

    instance_type: str = Field(
        default="c7i.large",
        pattern=INSTANCE_TYPE_PATTERN,
        description="Controller instance type (slurmctld, slurmdbd and the cluster manager; 2 vCPUs serve hundreds of"
        " nodes).",
    )
    count: Literal[1, 2] = Field(default=1, description="1, or 2 for a primary + backup in different AZs.")
    custom_actions: CustomActions = Field(default_factory=CustomActions, description="Boot scripts of the controllers.")
    security_groups: list[Annotated[str, Field(pattern=SECURITY_GROUP_PATTERN)]] = Field(
        default_factory=list, description="Extra security groups (of the cluster's VPC) on the controllers."
    )
    exporter_per_user_series: bool = Field(
        default=False,
        description="The metrics exporter also serves series by user and by account (user and account names as "
        "labels) to the monitoring group; off: by partition, pool and state only (docs/observability.md).",
    )


# ---------------------------------------------------------------- partitions and pools
class GpuSettings(StrictModel):
    """GPU settings of a pool (GPU count and type come from the instance cache)."""

    health_check: bool = Field(default=True, description="Run the GPU health checks on these nodes.")
    nccl_min_busbw_gbps: float | None = Field(default=None, gt=0, description="Minimum all_reduce bus bandwidth.")


class Pool(StrictModel):
    """A set of interchangeable instances. Node names are `{partition}-{pool}-{index}`."""

    name: str = Field(
        pattern=NAME_PATTERN,
        max_length=40,
        description="Pool name (lowercase letters and digits); `{partition}-{pool}-{index}` must fit 63 characters.",
    )
    instance_types: list[Annotated[str, Field(pattern=INSTANCE_TYPE_PATTERN)]] = Field(
        min_length=1, description="Instance types, in order of preference; one architecture."
    )
    purchase_option: PurchaseOption = Field(
        default=PurchaseOption.ON_DEMAND, strict=False, description="on_demand, spot, or both."
    )
    availability_zones: list[Annotated[str, Field(pattern=AZ_PATTERN)]] | None = Field(
        default=None,
        min_length=1,
        description="AZs in priority order (may span regions); default: every AZ of the home network.",
    )
    min_nodes: int = Field(default=0, ge=0, description="Always-on nodes (never suspended).")
    max_nodes: int = Field(ge=1, le=10000, description="Largest number of nodes.")
    placement_group: bool = Field(default=False, description="Launch into a cluster placement group (single AZ).")
    spread_jobs_across_azs: bool = Field(
        default=False,
        description="Let one multi-node job's nodes span AZs (and regions). Default: all of a job's nodes in one AZ, "
        "launched all-or-nothing there (MPI, NCCL and EFA traffic stays in one AZ, with no cross-AZ data charges).",
    )
    gpu: GpuSettings | None = Field(default=None, description="GPU settings, for GPU instance types.")
    features: list[Annotated[str, Field(pattern=FEATURE_PATTERN)]] = Field(
        default_factory=list, description="Extra Slurm node features (letters, digits, '_', '.' and '-')."
    )
    weight: int | None = Field(default=None, ge=1, description="Override the price-derived Slurm node weight.")
    capacity_reservation: CapacityReservation | None = Field(
        default=None,
        description="Launch only into this capacity reservation (one instance type and one AZ, those of the "
        "reservation; on_demand).",
    )
    custom_actions: CustomActions = Field(
        default_factory=CustomActions, description="Boot scripts of this pool's nodes."
    )
    ami_id: str | None = Field(
        default=None,
        pattern=r"^ami-[0-9a-f]{8,17}$",
        description="A custom AMI for this pool's nodes, built from the cluster's compute image (docs/images.md); "
        "home-region pools only. Default: the cluster's image, resolved at each launch.",
    )
    security_groups: list[Annotated[str, Field(pattern=SECURITY_GROUP_PATTERN)]] = Field(
        default_factory=list,
        description="Extra security groups (of the cluster's home VPC) on this pool's nodes; home-region pools only.",
    )
    slurm_settings: Annotated[SlurmSettings, AfterValidator(refuse_owned(POOL_OWNED))] = Field(
        default_factory=dict,
        description="Extra NodeName-line settings (`Key: value`), merged into what elastic-slurm renders: a key it also writes "
        "takes this value, keys it owns are refused (docs/custom-settings.md). E.g. MemSpecLimit: 1024",
    )
    gres_settings: Annotated[SlurmSettings, AfterValidator(refuse_owned(GRES_POOL_OWNED))] = Field(
        default_factory=dict,
        description="Extra settings of this GPU pool's gres.conf line (`Key: value`), merged like slurm_settings "
        "(docs/custom-settings.md); render fails for a pool without GPUs. E.g. Flags: nvidia_gpu_env",
    )
    disable_hyperthreading: bool = Field(
        default=False,
        description="One thread per physical core: each node takes its sibling threads offline before slurmd starts, "
        "and Slurm gets the pool's smallest core count as CPUs (docs/hyperthreading.md).",
    )
    network_topology: bool = Field(
        default=False,
        description="Put multi-node jobs on the fewest EC2 network nodes: the cluster manager asks EC2 where this "
        "pool's running instances sit (DescribeInstanceTopology) and keeps Slurm's topology.conf (topology/tree) in "
        "step. EC2 reports network nodes for some instance types only (hpc, p, trn, g6e, ...); nodes of other types "
        "stay under their pool's switch (docs/topology.md).",
    )
    efa: bool | None = Field(
        default=None,
        description="Attach Elastic Fabric Adapters to this pool's nodes (docs/efa.md); the instance types must "
        "support EFA. Default (null): on for a placement-group pool whose instance types all have a known EFA "
        "layout (p5.48xlarge, p5e.48xlarge) and no capacity_reservation, off otherwise.",
    )


class Partition(StrictModel):
    """A Slurm partition made of pools."""

    name: str = Field(pattern=NAME_PATTERN, max_length=40, description="Partition name (lowercase letters and digits).")
    default: bool = Field(default=False, description="The default partition (at most one).")
    pools: list[Pool] = Field(
        default_factory=list,
        description="Pools whose nodes form this partition (may be empty only when share_nodes_of is set).",
    )
    max_time: Annotated[str, AfterValidator(slurm_syntax.time_limit)] = Field(
        default="INFINITE",
        description="Slurm MaxTime: INFINITE, minutes, minutes:seconds, hours:minutes:seconds, days-hours,"
        " days-hours:minutes or days-hours:minutes:seconds.",
    )
    priority_tier: int = Field(default=1, ge=0, le=65533, description="Slurm PriorityTier (partition preemption).")
    interactive: bool = Field(default=False, description="An interactive partition (may preempt batch ones).")
    allocation: Literal["shared", "exclusive"] = Field(
        default="shared",
        description="How jobs get nodes. shared: jobs share nodes, Slurm tracks each node's cores and memory (a job "
        "without --mem gets DefMemPerCPU). exclusive: each job gets whole nodes, one job per node, and memory is not "
        "a scheduling resource (OverSubscribe=EXCLUSIVE, SelectTypeParameters=CR_Core): less for slurmctld to track, "
        "as Slurm's large-cluster guide advises (docs/scheduling.md).",
    )
    share_nodes_of: list[Annotated[str, Field(pattern=NAME_PATTERN)]] = Field(
        default_factory=list,
        description=(
            "Also schedule on the nodes of these partitions of the same cluster — e.g. an interactive partition with a"
            " higher priority_tier over the batch partition's nodes, so partition-priority preemption can requeue"
            " batch jobs. The nodes still belong to (and are launched for) their own partition's pools."
        ),
    )
    slurm_settings: Annotated[SlurmSettings, AfterValidator(refuse_owned(PARTITION_OWNED))] = Field(
        default_factory=dict,
        description="Extra PartitionName-line settings (`Key: value`), merged into what elastic-slurm renders: a key it also writes "
        "takes this value, keys it owns are refused (docs/custom-settings.md). E.g. MaxNodes: 64, DefMemPerNode: 4096",
    )


class Preemption(StrictModel):
    """How jobs preempt each other."""

    type: Literal["none", "partition_priority", "qos"] = Field(default="none", description="Slurm PreemptType.")
    mode: Literal["requeue", "suspend", "cancel"] = Field(default="requeue", description="Slurm PreemptMode.")
    grace_time: int = Field(default=0, ge=0, description="Seconds a preempted job gets to finish (GraceTime).")


class HealthChecks(StrictModel):
    """Node health checks."""

    interval: int = Field(default=300, ge=30, description="HealthCheckInterval in seconds.")
    impaired_threshold: int = Field(default=300, ge=60, description="Seconds an EC2 status may stay impaired.")


class SlurmTimers(StrictModel):
    """Power-save timers and capacity cool-down."""

    suspend_time: int = Field(default=300, ge=10, description="Idle seconds before a node is powered down.")
    suspend_timeout: int = Field(default=120, ge=10, description="Seconds allowed for a power-down.")
    resume_timeout: int = Field(default=600, ge=30, description="Seconds allowed for a node to boot and register.")
    capacity_cooldown: int = Field(
        default=600, ge=0, description="Seconds a pool/AZ is skipped after a capacity error."
    )
    boot_failure_limit: int = Field(
        default=10,
        ge=0,
        description="Consecutive failed boots after which a pool stops launching (protected mode) until "
        "`slurm-pool-protection --clear POOL` or a config change; 0 never stops.",
    )
    early_start: bool = Field(
        default=True,
        description="Start a job on freshly booted nodes as soon as they are up (PrologSlurmctld waits for them, "
        "followed by one boot watch) instead of at slurmctld's next 30 s pass; false: no PrologSlurmctld, which "
        "SchedMD's high-throughput guide advises for clusters of many short jobs on warm nodes "
        "(docs/cold-start.md).",
    )


class Cluster(StrictModel):
    """One Slurm cluster (one slurmctld)."""

    name: str = Field(pattern=CLUSTER_NAME_PATTERN, max_length=32, description="Cluster name (Slurm ClusterName).")
    region: str = Field(pattern=REGION_PATTERN, description="Home region (controllers, storage).")
    account_id: str | None = Field(default=None, pattern=r"^\d{12}$", description="AWS account id to deploy to.")
    network: Network = Field(description="Network of the home region.")
    remote_regions: list[RemoteRegion] = Field(default_factory=list, description="Extra regions pools may use.")
    storage: Storage = Field(default_factory=Storage, description="Shared storage.")
    images: Images = Field(default_factory=Images, description="AMI build settings.")
    controller: Controller = Field(default_factory=Controller, description="Controller settings.")
    partitions: list[Partition] = Field(min_length=1, description="Slurm partitions.")
    login_nodes: list[LoginPool] = Field(
        default_factory=list, description="Login node pools (users log in and submit there; docs/login-nodes.md)."
    )
    directory: Directory | None = Field(
        default=None, description="Users and groups from your LDAP directory through SSSD (docs/users.md)."
    )
    preemption: Preemption = Field(default_factory=Preemption, description="Preemption policy.")
    health_checks: HealthChecks = Field(default_factory=HealthChecks, description="Health checks.")
    slurm: SlurmTimers = Field(default_factory=SlurmTimers, description="Power-save timers.")
    ssh_allowed_cidrs: RuleCidrList = Field(
        default_factory=list,
        description="IPv4 or IPv6 CIDRs allowed to SSH to the controllers and login nodes: private ranges (RFC 1918, "
        "100.64.0.0/10, fc00::/7) or documentation ranges; public ones need `ssh_allow_public_cidrs`.",
    )
    ssh_allow_public_cidrs: bool = Field(
        default=False,
        description="Allow public address space in `ssh_allowed_cidrs` (e.g. an office's public range); never "
        "0.0.0.0/0 or ::/0.",
    )
    iam_policies: IamPolicies = Field(default_factory=IamPolicies, description="Extra managed policies of the roles.")
    tags: Tags = Field(
        default_factory=dict,
        description="Tags added to every resource of this cluster (AWS tag characters: letters, digits, spaces and "
        "_.:/=+-@; no key starting with aws:).",
    )
    budget: Budget | None = Field(
        default=None, description="A monthly AWS Budgets cost budget with email and alerts-topic alerts (docs/cost.md)."
    )
    nss_slurm: bool = Field(default=False, description=model_site.NSS_SLURM_DESCRIPTION)
    rest_api: RestApi = Field(
        default_factory=RestApi, description="slurmrestd (JWT) and the web page on the controllers (docs/rest-api.md)."
    )
    slurm_settings: Annotated[SlurmSettings, AfterValidator(refuse_owned(CLUSTER_OWNED))] = Field(
        default_factory=dict,
        description="Extra slurm.conf settings (`Key: value`), merged into what elastic-slurm renders: a key it also writes "
        "takes this value, keys it owns are refused (docs/custom-settings.md). E.g. SchedulerParameters: bf_continue,bf_window=4320",
    )
    cgroup_settings: Annotated[SlurmSettings, AfterValidator(refuse_owned(CGROUP_OWNED))] = Field(
        default_factory=dict,
        description="Extra cgroup.conf settings (`Key: value`), merged into what elastic-slurm renders: a key it also writes "
        "takes this value, keys it owns are refused (docs/custom-settings.md). E.g. AllowedRAMSpace: 98",
    )
    gres_settings: Annotated[SlurmSettings, AfterValidator(refuse_owned(GRES_OWNED))] = Field(
        default_factory=dict,
        description="Global gres.conf lines (`Key: value`), written before the GPU pools' lines; keys of a GPU's line are "
        "refused (set them in pools[].gres_settings; docs/custom-settings.md). E.g. AutoDetect: off",
    )


# ---------------------------------------------------------------- multi-cluster
class License(StrictModel):
    """A Slurm remote license, optionally kept in sync with a license server."""

    name: str = Field(pattern=r"^[A-Za-z][A-Za-z0-9_]*$", description="License (feature) name as jobs request it.")
    count: int = Field(ge=0, description="Licenses Slurm may hand out.")
    server_type: Literal["flexlm", "rlm", "static"] = Field(default="static", description="Where counts come from.")
    server: str | None = Field(default=None, pattern=r"^\d+@[A-Za-z0-9.-]+$", description="port@host of the server.")
    feature: str | None = Field(
        default=None,
        pattern=r"^[A-Za-z0-9_.+-]+$",
        max_length=64,
        description="Feature name on the server; default: `name`.",
    )
    sync_schedule: SystemdCalendar | None = Field(
        default=None,
        description="systemd OnCalendar expression for the sync, e.g. '*:0/5' (systemd.time(7); no '%', '\\' or ';');"
        " null: none.",
    )
    clusters: dict[Annotated[str, Field(pattern=CLUSTER_NAME_PATTERN)], int] = Field(
        default_factory=dict,
        description="Percent of the licenses each cluster may use; at most 100 in all (Slurm refuses more). "
        "Default: 100 for all.",
    )


class Federation(StrictModel):
    """A Slurm federation of clusters sharing the accounting database."""

    name: str = Field(pattern=CLUSTER_NAME_PATTERN, description="Federation name.")
    clusters: list[Annotated[str, Field(pattern=CLUSTER_NAME_PATTERN)]] = Field(
        min_length=2, description="Names of the member clusters."
    )
    cluster_features: dict[
        Annotated[str, Field(pattern=CLUSTER_NAME_PATTERN)], list[Annotated[str, Field(pattern=FEATURE_PATTERN)]]
    ] = Field(
        default_factory=dict,
        description="Slurm cluster features per member (jobs pick clusters with `--cluster-constraint`).",
    )


_SACCT_NAME = r"^[a-z][a-z0-9_-]*$"  # QOS and account names (sacctmgr)


class SlurmQos(StrictModel):
    """A Slurm QOS applied with sacctmgr (idempotently; QOS not in the file are left alone)."""

    name: str = Field(pattern=_SACCT_NAME, description="QOS name.")
    description: SafeText | None = Field(default=None, description="Free text (one line); default: the name.")
    priority: int = Field(default=0, ge=0, description="QOS priority (adds to the job priority).")
    preempt: list[Annotated[str, Field(pattern=_SACCT_NAME)]] = Field(
        default_factory=list, description="QOS this one may preempt (with preemption type qos)."
    )
    preempt_mode: Literal["cluster", "requeue", "suspend", "cancel"] = Field(
        default="cluster", description="PreemptMode of jobs in this QOS; `cluster`: the cluster's mode."
    )


class SlurmAccount(StrictModel):
    """A Slurm account and its users, applied with sacctmgr on every cluster (never deleted automatically)."""

    name: str = Field(pattern=_SACCT_NAME, description="Account name.")
    description: SafeText | None = Field(default=None, description="Free text (one line); default: the name.")
    organization: SafeText | None = Field(default=None, description="Organization (one line); default: the name.")
    parent: str = Field(default="root", pattern=_SACCT_NAME, description="Parent account.")
    users: list[Annotated[str, Field(pattern=r"^[a-z_][a-z0-9_.-]*$")]] = Field(
        default_factory=list, description="Users of the account; a user's default account is the first listing them."
    )


class ElasticSlurmConfig(StrictModel):
    """The whole file: clusters, and what they share (accounting, licenses, federation)."""

    clusters: list[Cluster] = Field(min_length=1, description="The clusters.")
    accounting: Accounting = Field(default_factory=Accounting, description="Shared Slurm accounting.")
    licenses: list[License] = Field(default_factory=list, description="Remote licenses.")
    federation: Federation | None = Field(default=None, description="Optional federation of the clusters.")
    onprem_clusters: list[OnpremCluster] = Field(
        default_factory=list,
        description="Existing on-prem Slurm clusters that burst into these (docs/onprem-burst.md).",
    )
    accounts: list[SlurmAccount] = Field(default_factory=list, description="Slurm accounts and users (sacctmgr).")
    qos: list[SlurmQos] = Field(default_factory=list, description="Slurm QOS (sacctmgr).")
    tags: Tags = Field(
        default_factory=dict,
        description="Tags added to every resource (AWS tag characters: letters, digits, spaces and _.:/=+-@; no key "
        "starting with aws:).",
    )

    def cluster(self, name: str) -> Cluster:
        """Return the cluster called `name` (KeyError if none)."""
        for cluster in self.clusters:
            if cluster.name == name:
                return cluster
        raise KeyError(name)

    @property
    def accounting_host(self) -> str:
        """The cluster whose region holds the accounting database and whose controller 0 runs slurmdbd."""
        return self.accounting.host_cluster or self.clusters[0].name

    def slurm_cluster_names(self) -> list[str]:
        """Every cluster the accounting database holds: the file's clusters, then the on-prem ones."""
        return [c.name for c in self.clusters] + [o.name for o in self.onprem_clusters]
