"""Storage stack: EFS (encrypted, lifecycle, AWS Backup plan), FSx for Lustre, ONTAP and OpenZFS.

Mount information for the bootstrap scripts is published as one SSM parameter (`/elastic-slurm/{cluster}/mounts`,
JSON list of {type, dns/id, mount_point, options}), so nodes need no CloudFormation access. The controllers read
another (`/elastic-slurm/{cluster}/mounts-controller`): the same list and their own file system, an EFS for Slurm's
state that no compute or login node can reach or mount (slurm_plugin/controller_state.py). With remote regions, a
second one (`/elastic-slurm/{cluster}/mounts-remote`) lists what their nodes mount: the EFS by the IP address of its
first mount target, across the VPC peering (EFS DNS names resolve only inside their own VPC); FSx file systems are not
mounted in remote regions (docs/deploy.md, "Remote regions").

EFS is mounted with IAM authorization (efs-utils `tls,iam`): the file system policy (`EFS_FILE_SYSTEM_POLICY`) refuses
clients without TLS and allows no client anything by itself, so an anonymous mount is refused and each node role's
statements (stacks/node_policies.py `file_system_statements`) are the whole grant. Remote regions' compute roles get
theirs from here (`RegionStack.allow_mounts`): their stacks exist before this one, and the file system's ARN is known
only now. Nothing in a VPC subnet is retained (docs/deploy.md, "Teardown"): EFS is (home directories) but its mount
targets are not, so the network stack deletes cleanly; FSx file systems hold network interfaces in the subnets and
the `Storage` security group, so they are deleted with the stack.
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
from slurm_plugin.controller_state import CONTROLLER_STATE_MOUNT
from stacks.naming import controller_mounts_parameter, mounts_parameter, remote_mounts_parameter
from stacks.network import ClusterSecurityGroups
from stacks.region import RegionStack

EFS_CLIENT_ACTIONS = [
    "elasticfilesystem:ClientMount",
    "elasticfilesystem:ClientWrite",
    "elasticfilesystem:ClientRootAccess",
]
# The EFS file system policy. CDK's own (feature flag @aws-cdk/aws-efs:denyAnonymousAccess) allows ClientWrite and
# ClientRootAccess to every principal through a mount target, i.e. root to every node; ours allows nothing, so the
# roles' identity statements decide (an Allow in either policy suffices, a Deny in either wins) and anonymous
# clients, which have no identity policy, are refused; it denies every client without TLS (aws:SecureTransport).
# https://docs.aws.amazon.com/efs/latest/ug/iam-access-control-nfs-efs.html
EFS_FILE_SYSTEM_POLICY: dict[str, Any] = {
    "Version": "2012-10-17",
    "Statement": [
        {
            "Sid": "RefuseClientsWithoutTls",
            "Effect": "Deny",
            "Principal": {"AWS": "*"},
            "Action": EFS_CLIENT_ACTIONS,
            "Condition": {"Bool": {"aws:SecureTransport": "false"}},
        }
    ],
}
# efs-utils options: TLS, and IAM authorization with the instance profile's credentials
# (https://docs.aws.amazon.com/efs/latest/ug/mounting-IAM-option.html)
EFS_MOUNT_OPTIONS = "tls,iam"

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


def tls_and_roles_only(file_system: efs.FileSystem) -> None:
    """Replace the file system policy CDK generates with EFS_FILE_SYSTEM_POLICY (an escape hatch: no L2 option)."""
    efs_resource = file_system.node.default_child
    assert isinstance(efs_resource, efs.CfnFileSystem)
    efs_resource.add_property_override("FileSystemPolicy", EFS_FILE_SYSTEM_POLICY)


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
        self._cluster = cluster.name
        network = cluster.network
        # NFS clients of the OpenZFS export: the nodes' subnets (controllers, compute and login nodes all live in
        # them), not the whole VPC (issue 30)
        self._client_cidrs = (
            [s.ipv4_cidr_block for s in subnets]
            if isinstance(network, NewNetwork)
            else [s.cidr for s in network.subnets]
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
        assert security_groups.controller_state is not None  # a home region's network
        self.controller_state_arn, state_mount = self._controller_state(security_groups.controller_state)
        self.controller_mounts_parameter = ssm.StringParameter(
            self,
            "ControllerMounts",
            parameter_name=controller_mounts_parameter(cluster.name),
            description="What the controllers mount: the shared file systems and their own (JSON)",
            string_value=self.to_json_string([*self.mounts, state_mount]),
        )
        if cluster.remote_regions:
            self._grant_remote_regions(scope, cluster.name)
            ssm.StringParameter(
                self,
                "RemoteMounts",
                parameter_name=remote_mounts_parameter(cluster.name),
                description="Shared file systems nodes in remote regions mount (JSON)",
                string_value=self.to_json_string(self.remote_mounts),
            )

    def _grant_remote_regions(self, scope: Construct, cluster: str) -> None:
        """The remote regions' compute roles may mount the file systems (a CDK cross-region reference: the region
        stacks deploy after this one). Their stacks are this app's RegionStacks of `cluster`."""
        for stack in scope.node.children:
            if isinstance(stack, RegionStack) and stack.cluster_name == cluster:
                stack.allow_mounts(self.file_system_arns)
        # cfn-lint W3005 on the cross-region export writer CDK generates here (see stacks/app_builder.py)
        self.template_options.metadata = {"cfn-lint": {"config": {"ignore_checks": ["W3005"]}}}

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
        tls_and_roles_only(file_system)
        if conf.backup:
            plan = backup.BackupPlan.daily35_day_retention(self, "EfsBackup", self._backup_vault())
            plan.add_selection("Efs", resources=[backup.BackupResource.from_efs_file_system(file_system)])
        self.file_system_arns.append(file_system.file_system_arn)
        self.mounts.append(
            {
                "type": "efs",
                "source": file_system.file_system_id,
                "mount_point": conf.mount_point,
                "options": EFS_MOUNT_OPTIONS,
            }
        )
        # remote regions: by a mount target's address (efs-utils `mounttargetip`), the file system's region named —
        # efs-utils signs the IAM authorization for that region, where the file system and its policy are
        # (https://docs.aws.amazon.com/efs/latest/ug/mount-fs-different-vpc.html)
        targets = [c for c in file_system.node.children if isinstance(c, efs.CfnMountTarget)]
        options = cdk.Fn.join(
            "", [EFS_MOUNT_OPTIONS, ",region=", self.region, ",mounttargetip=", targets[0].attr_ip_address]
        )
        self.remote_mounts.append(
            {"type": "efs", "source": file_system.file_system_id, "mount_point": conf.mount_point, "options": options}
        )

    def _controller_state(self, security_group: ec2.ISecurityGroup) -> tuple[str, dict[str, str]]:
        """The controllers' own file system (slurm_plugin/controller_state.py: slurmctld's StateSaveLocation and, with
        two controllers, the plugin's state), and its entry of the controllers' mounts parameter. Elastic
        throughput: no burst credits for a long busy spell to drain under slurmctld's state saves. Encrypted, with
        the users' EFS policy (TLS only, nothing allowed by the policy itself); its mount targets admit NFS from the
        controllers' group only (stacks/network.py) and only the controllers' role may mount it (stacks/cluster.py).
        Retained like the users' EFS (its mount targets are not): a stack deleted by mistake leaves the queue to
        recover. One mount target per AZ (EFS allows no more), in the subnet the controllers of that AZ use (the last
        one of the AZ, as stacks/cluster.py picks it)."""
        one_per_az = list({s.availability_zone: s for s in self._subnets}.values())
        file_system = efs.FileSystem(
            self,
            "ControllerState",
            vpc=self._vpc,
            vpc_subnets=ec2.SubnetSelection(subnets=one_per_az),
            security_group=security_group,
            encrypted=True,
            throughput_mode=efs.ThroughputMode.ELASTIC,
            removal_policy=cdk.RemovalPolicy.RETAIN,
        )
        tls_and_roles_only(file_system)
        cdk.Tags.of(file_system).add("Name", f"{self._cluster}-controller-state")  # found again once retained
        mount = {
            "type": "efs",
            "source": file_system.file_system_id,
            "mount_point": CONTROLLER_STATE_MOUNT,
            "options": EFS_MOUNT_OPTIONS,
        }
        return file_system.file_system_arn, mount

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
            # never retained: a retained file system keeps its network interfaces in the subnets and the Storage
            # security group in use, so the network stack could not be deleted (docs/deploy.md, "Teardown")
            removal_policy=cdk.RemovalPolicy.DESTROY,
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
        # CloudFormation cannot set an SVM's export policy (its `default` policy admits every client), so who may
        # mount is decided by the `Storage` security group: NFS from the cluster's node group only
        # (stacks/network.py; tests/cdk/test_nfs_exports.py).
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
        # No L2 construct exists for FSx for OpenZFS: L1 file system exporting its root volume to the nodes' subnets.
        # Root is not squashed: the controller's boot and sites' prologs write the share as root, and NFS trusts the
        # client's uids anyway (root on a node can act as any user), as for EFS (stacks/node_policies.py); what keeps
        # other machines of the VPC out is the client list and the `Storage` security group.
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
