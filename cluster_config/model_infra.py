"""The config model's networks (new or imported VPCs, remote regions) and shared storage (EFS, FSx, extra mounts)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import AfterValidator, Field, field_validator

from cluster_config import aws_catalog
from cluster_config.model_base import AZ_PATTERN, REGION_PATTERN, StrictModel, vpc_cidr
from cluster_config.safe_types import FstabOptions, FsType, MountPoint, MountSource, S3Uri


# ---------------------------------------------------------------- network
class NewNetwork(StrictModel):
    """Create a VPC with one private compute subnet per availability zone."""

    mode: Literal["create"] = Field(description="`create`: the stacks build a new VPC.")
    vpc_cidr: str = Field(
        default="10.0.0.0/16",
        description="IPv4 CIDR block of the new VPC (/16 to /28); VPCs of one cluster must not overlap.",
    )
    availability_zones: list[Annotated[str, Field(pattern=AZ_PATTERN)]] = Field(
        min_length=1, max_length=6, description="AZs of this network's region to create subnets in, e.g. us-east-1a."
    )
    compute_subnet_prefix: int = Field(
        default=20,
        ge=16,
        le=28,
        description="Prefix length of each AZ's private compute subnet (20 → 4091 usable addresses).",
    )
    interface_endpoints: bool = Field(
        default=True,
        description="Interface VPC endpoints (EC2, SSM, Secrets Manager, Logs, SQS) in every AZ: AWS calls skip the"
        " NAT gateway, at about $7/month per endpoint and AZ. false: AWS calls go through the NAT gateway.",
    )

    @field_validator("vpc_cidr")
    @classmethod
    def _cidr(cls, value: str) -> str:
        return vpc_cidr(value)


class ExistingSubnet(StrictModel):
    """One subnet of an imported VPC."""

    subnet_id: str = Field(pattern=r"^subnet-[0-9a-f]{8,17}$", description="Subnet id.")
    availability_zone: str = Field(pattern=AZ_PATTERN, description="AZ name the subnet lives in.")
    cidr: str = Field(
        description="The subnet's IPv4 CIDR (/16 to /28); used to check that max nodes fit its address space."
    )

    @field_validator("cidr")
    @classmethod
    def _cidr(cls, value: str) -> str:
        return vpc_cidr(value)


class ExistingNetwork(StrictModel):
    """Use an existing VPC and subnets (imported by id)."""

    mode: Literal["import"] = Field(description="`import`: use an existing VPC.")
    vpc_id: str = Field(pattern=r"^vpc-[0-9a-f]{8,17}$", description="Id of the existing VPC.")
    subnets: list[ExistingSubnet] = Field(min_length=1, description="Private subnets compute nodes may use.")


Network = Annotated[NewNetwork | ExistingNetwork, Field(discriminator="mode")]


class RemoteRegion(StrictModel):
    """An extra region some pools may launch into (its own VPC, peered to the home VPC)."""

    region: str = Field(pattern=REGION_PATTERN, description="Region name, e.g. us-west-2.")
    network: Network = Field(description="The network in that region (its CIDR must not overlap the home VPC).")


# ---------------------------------------------------------------- storage
_MOUNT_POINT = (
    "Where nodes mount it: an absolute path of letters, digits and ._+@- (no '.' or '..' segment), not a system or "
    "elastic-slurm directory (/etc, /usr, /opt/elastic-slurm, ...)."
)


class EfsStorage(StrictModel):
    """An encrypted EFS file system shared by controller and compute nodes."""

    mount_point: MountPoint = Field(default="/shared", description=_MOUNT_POINT)
    throughput_mode: Literal["elastic", "bursting"] = Field(default="elastic", description="EFS throughput mode.")
    lifecycle_days: int | None = Field(
        default=30, ge=1, description="Move files to Infrequent Access after N days; null: never."
    )
    backup: bool = Field(default=True, description="Protect it with an AWS Backup plan.")


class FsxLustreStorage(StrictModel):
    """An FSx for Lustre file system (scratch or persistent)."""

    mount_point: MountPoint = Field(default="/fsx", description=_MOUNT_POINT)
    deployment_type: Literal["SCRATCH_2", "PERSISTENT_2"] = Field(
        default="SCRATCH_2", description="FSx deployment type."
    )
    storage_capacity_gib: Annotated[int, AfterValidator(aws_catalog.lustre_capacity)] = Field(
        default=1200, ge=1200, description="Capacity in GiB (1200 or a multiple of 2400)."
    )
    per_unit_storage_throughput: Literal[125, 250, 500, 1000] | None = Field(
        default=None, description="MB/s/TiB, PERSISTENT_2 only (125, 250, 500, 1000); null there: 125."
    )
    s3_import_path: S3Uri | None = Field(
        default=None, description="Optional S3 data repository: s3://bucket or s3://bucket/prefix."
    )


class FsxOntapStorage(StrictModel):
    """An FSx for NetApp ONTAP file system with one NFS volume."""

    mount_point: MountPoint = Field(default="/ontap", description=_MOUNT_POINT)
    storage_capacity_gib: int = Field(default=1024, ge=1024, description="SSD capacity in GiB.")
    # FSx API reference, ThroughputCapacity of SINGLE_AZ_1 (the deployment type the stacks create); same for OpenZFS.
    throughput_mbps: Literal[128, 256, 512, 1024, 2048, 4096] = Field(
        default=128, description="Throughput capacity in MB/s (128, 256, 512, 1024, 2048 or 4096)."
    )


class FsxOpenZfsStorage(StrictModel):
    """An FSx for OpenZFS file system."""

    mount_point: MountPoint = Field(default="/zfs", description=_MOUNT_POINT)
    storage_capacity_gib: int = Field(default=64, ge=64, description="Capacity in GiB.")
    throughput_mbps: Literal[64, 128, 256, 512, 1024, 2048, 3072, 4096] = Field(
        default=64, description="Throughput capacity in MB/s (64, 128, 256, 512, 1024, 2048, 3072 or 4096)."
    )


class ExtraMount(StrictModel):
    """Any other NFS (or similar) export to mount on every node."""

    source: MountSource = Field(
        description="What to mount, e.g. nfs.example.com:/export/tools (letters, digits and _.:/@[]=+- only)."
    )
    mount_point: MountPoint = Field(description=_MOUNT_POINT)
    fs_type: FsType = Field(default="nfs4", description="File system type passed to mount -t, e.g. nfs4 or fuse.sshfs.")
    options: FstabOptions = Field(
        default="defaults,_netdev",
        description="Mount options, comma separated (letters, digits and _.=:/@+- in each; no blanks or '#').",
    )


class Storage(StrictModel):
    """Shared storage. At least one shared file system is needed for home directories (Slurm's own state is on the
    controllers' file system, which every cluster gets)."""

    efs: EfsStorage | None = Field(default=None, description="Create an EFS file system.")
    fsx_lustre: FsxLustreStorage | None = Field(default=None, description="Create an FSx for Lustre file system.")
    fsx_ontap: FsxOntapStorage | None = Field(default=None, description="Create an FSx for ONTAP file system.")
    fsx_openzfs: FsxOpenZfsStorage | None = Field(default=None, description="Create an FSx for OpenZFS file system.")
    extra_mounts: list[ExtraMount] = Field(default_factory=list, description="Further mounts on every node.")
