"""Storage stack: EFS (encrypted, lifecycle, AWS Backup plan), FSx for Lustre, ONTAP and OpenZFS.

Mount information for the bootstrap scripts is published as one SSM parameter (`/elastic-slurm/{cluster}/mounts`,
JSON list of {type, dns/id, mount_point, options}), so nodes need no CloudFormation access. With remote regions, a
second one (`/elastic-slurm/{cluster}/mounts-remote`) lists what their nodes mount: the EFS by the IP address of its
first mount target, across the VPC peering (EFS DNS names resolve only inside their own VPC); FSx file systems are not
mounted in remote regions (docs/deploy.md, "Remote regions").
"""

from __future__ import annotations

from typing import Any

import aws_cdk as cdk
from aws_cdk import aws_backup as backup
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_efs as efs
from aws_cdk import aws_fsx as fsx
from aws_cdk import aws_ssm as ssm
from constructs import Construct

from cluster_config.model import (
    Cluster,
    EfsStorage,
    FsxLustreStorage,
    FsxOntapStorage,
    FsxOpenZfsStorage,
    NewNetwork,
)
from stacks.naming import mounts_parameter, remote_mounts_parameter
from stacks.network import ClusterSecurityGroups

LIFECYCLE_DAYS = {
    1: efs.LifecyclePolicy.AFTER_1_DAY,
    7: efs.LifecyclePolicy.AFTER_7_DAYS,
    14: efs.LifecyclePolicy.AFTER_14_DAYS,
    30: efs.LifecyclePolicy.AFTER_30_DAYS,
    60: efs.LifecyclePolicy.AFTER_60_DAYS,
    90: efs.LifecyclePolicy.AFTER_90_DAYS,
    180: efs.LifecyclePolicy.AFTER_180_DAYS,
    270: efs.LifecyclePolicy.AFTER_270_DAYS,
    365: efs.LifecyclePolicy.AFTER_365_DAYS,
}


def efs_lifecycle(days: int | None) -> efs.LifecyclePolicy | None:
    """The EFS lifecycle policy for `lifecycle_days`: the largest allowed step not above it (EFS has fixed steps)."""
    if days is None:
        return None
    return LIFECYCLE_DAYS[max(d for d in LIFECYCLE_DAYS if d <= days)]


class StorageStack(cdk.Stack):
    """The cluster's shared file systems."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        cluster: Cluster,
        vpc: ec2.IVpc,
        subnets: list[ec2.ISubnet],
        security_groups: ClusterSecurityGroups,
        **kwargs: Any,
    ) -> None:
        super().__init__(scope, construct_id, **kwargs)
        self._vpc = vpc
        self._subnets = subnets
        self._sg = security_groups.storage
        network = cluster.network
        self._client_cidrs = (
            [network.vpc_cidr] if isinstance(network, NewNetwork) else [s.cidr for s in network.subnets]
        )
        self.mounts: list[dict[str, str]] = []
        self.remote_mounts: list[dict[str, str]] = []
        self.file_system_arns: list[str] = []
        storage = cluster.storage
        if storage.efs:
            self._efs(storage.efs)
        if storage.fsx_lustre:
            self._lustre(storage.fsx_lustre)
        if storage.fsx_ontap:
            self._ontap(storage.fsx_ontap)
        if storage.fsx_openzfs:
            self._openzfs(storage.fsx_openzfs)
        for extra in storage.extra_mounts:
            self.mounts.append(
                {
                    "type": extra.fs_type,
                    "source": extra.source,
                    "mount_point": extra.mount_point,
                    "options": extra.options,
                }
            )
        self.mounts_parameter = ssm.StringParameter(
            self,
            "Mounts",
            parameter_name=mounts_parameter(cluster.name),
            description="Shared file systems every node mounts (JSON)",
            string_value=self.to_json_string(self.mounts),
        )
        if cluster.remote_regions:
            ssm.StringParameter(
                self,
                "RemoteMounts",
                parameter_name=remote_mounts_parameter(cluster.name),
                description="Shared file systems nodes in remote regions mount (JSON)",
                string_value=self.to_json_string(self.remote_mounts),
            )

    def _backup_vault(self) -> backup.BackupVault:
        """The EFS backup vault, retained with its recovery points when the stack is deleted. Vault names are unique
        per account and region and CloudFormation requires one, so it carries this stack's id: a retained vault of
        a deleted cluster never blocks deploying the same cluster again."""
        stack_uuid = cdk.Fn.select(2, cdk.Fn.split("/", self.stack_id))
        return backup.BackupVault(
            self,
            "EfsVault",
            backup_vault_name=cdk.Fn.join("-", ["efs", stack_uuid]),
            removal_policy=cdk.RemovalPolicy.RETAIN,
        )

    def _efs(self, conf: EfsStorage) -> None:
        throughput = efs.ThroughputMode.ELASTIC if conf.throughput_mode == "elastic" else efs.ThroughputMode.BURSTING
        file_system = efs.FileSystem(
            self,
            "Efs",
            vpc=self._vpc,
            vpc_subnets=ec2.SubnetSelection(subnets=self._subnets),
            security_group=self._sg,
            encrypted=True,
            lifecycle_policy=efs_lifecycle(conf.lifecycle_days),
            throughput_mode=throughput,
            removal_policy=cdk.RemovalPolicy.RETAIN,  # home directories outlive the cluster; see docs/deploy.md
        )
        if conf.backup:
            plan = backup.BackupPlan.daily35_day_retention(self, "EfsBackup", self._backup_vault())
            plan.add_selection("Efs", resources=[backup.BackupResource.from_efs_file_system(file_system)])
        self.file_system_arns.append(file_system.file_system_arn)
        self.mounts.append(
            {"type": "efs", "source": file_system.file_system_id, "mount_point": conf.mount_point, "options": "tls"}
        )
        # remote regions: by a mount target's address (efs-utils `mounttargetip`), the file system's region named
        targets = [c for c in file_system.node.children if isinstance(c, efs.CfnMountTarget)]
        options = cdk.Fn.join("", ["tls,region=", self.region, ",mounttargetip=", targets[0].attr_ip_address])
        self.remote_mounts.append(
            {"type": "efs", "source": file_system.file_system_id, "mount_point": conf.mount_point, "options": options}
        )

    def _lustre(self, conf: FsxLustreStorage) -> None:
        persistent = conf.deployment_type == "PERSISTENT_2"
        file_system = fsx.LustreFileSystem(
            self,
            "Lustre",
            vpc=self._vpc,
            vpc_subnet=self._subnets[0],  # Lustre lives in one AZ; the first one is the pools' default first choice
            security_group=self._sg,
            storage_capacity_gib=conf.storage_capacity_gib,
            lustre_configuration=fsx.LustreConfiguration(
                deployment_type=fsx.LustreDeploymentType[conf.deployment_type],
                per_unit_storage_throughput=conf.per_unit_storage_throughput or (125 if persistent else None),
                import_path=None if persistent else conf.s3_import_path,
                data_compression_type=fsx.LustreDataCompressionType.LZ4,
            ),
            removal_policy=cdk.RemovalPolicy.RETAIN if persistent else cdk.RemovalPolicy.DESTROY,
        )
        if persistent and conf.s3_import_path:
            # PERSISTENT_2 links S3 through a data repository association (no L2 construct exists for it).
            fsx.CfnDataRepositoryAssociation(
                self,
                "LustreS3",
                file_system_id=file_system.file_system_id,
                file_system_path="/",
                data_repository_path=conf.s3_import_path,
                batch_import_meta_data_on_create=True,
                s3=fsx.CfnDataRepositoryAssociation.S3Property(
                    auto_import_policy=fsx.CfnDataRepositoryAssociation.AutoImportPolicyProperty(
                        events=["NEW", "CHANGED", "DELETED"]
                    )
                ),
            )
        self.mounts.append(
            {
                "type": "lustre",
                "source": f"{file_system.dns_name}@tcp:/{file_system.mount_name}",
                "mount_point": conf.mount_point,
                "options": "relatime,flock,_netdev",
            }
        )

    def _ontap(self, conf: FsxOntapStorage) -> None:
        # No L2 construct exists for FSx for ONTAP: L1 file system + storage virtual machine + one NFS volume.
        file_system = fsx.CfnFileSystem(
            self,
            "Ontap",
            file_system_type="ONTAP",
            storage_capacity=conf.storage_capacity_gib,
            subnet_ids=[self._subnets[0].subnet_id],
            security_group_ids=[self._sg.security_group_id],
            ontap_configuration=fsx.CfnFileSystem.OntapConfigurationProperty(
                deployment_type="SINGLE_AZ_1",
                throughput_capacity=conf.throughput_mbps,
                automatic_backup_retention_days=7,
            ),
        )
        svm = fsx.CfnStorageVirtualMachine(
            self, "OntapSvm", file_system_id=file_system.ref, name="slurm", root_volume_security_style="UNIX"
        )
        fsx.CfnVolume(
            self,
            "OntapVolume",
            name="shared",
            volume_type="ONTAP",
            ontap_configuration=fsx.CfnVolume.OntapConfigurationProperty(
                storage_virtual_machine_id=svm.ref,
                junction_path="/shared",
                size_in_megabytes=str(conf.storage_capacity_gib * 1024 // 2),
                storage_efficiency_enabled="true",
                security_style="UNIX",
            ),
        )
        self.mounts.append(
            {
                "type": "nfs4",
                "source": f"{svm.ref}.{file_system.ref}.fsx.{self.region}.{self.url_suffix}:/shared",
                "mount_point": conf.mount_point,
                "options": "_netdev",
            }
        )

    def _openzfs(self, conf: FsxOpenZfsStorage) -> None:
        # No L2 construct exists for FSx for OpenZFS: L1 file system exporting its root volume to the VPC.
        file_system = fsx.CfnFileSystem(
            self,
            "OpenZfs",
            file_system_type="OPENZFS",
            storage_capacity=conf.storage_capacity_gib,
            subnet_ids=[self._subnets[0].subnet_id],
            security_group_ids=[self._sg.security_group_id],
            open_zfs_configuration=fsx.CfnFileSystem.OpenZFSConfigurationProperty(
                deployment_type="SINGLE_AZ_1",
                throughput_capacity=conf.throughput_mbps,
                automatic_backup_retention_days=7,
                root_volume_configuration=fsx.CfnFileSystem.RootVolumeConfigurationProperty(
                    nfs_exports=[
                        fsx.CfnFileSystem.NfsExportsProperty(
                            client_configurations=[
                                fsx.CfnFileSystem.ClientConfigurationsProperty(
                                    clients=cidr, options=["rw", "crossmnt", "no_root_squash"]
                                )
                                for cidr in self._client_cidrs
                            ]
                        )
                    ]
                ),
            ),
        )
        self.mounts.append(
            {
                "type": "nfs4",
                "source": f"{file_system.attr_dns_name}:/fsx",
                "mount_point": conf.mount_point,
                "options": "nfsvers=4.1,_netdev",
            }
        )
