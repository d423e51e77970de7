"""Network stack: the cluster's VPC (new, across the configured AZs, or imported by id) and its security groups.

New VPC: one private compute subnet per AZ sized by `compute_subnet_prefix`, small public subnets only to host the
single NAT gateway, an S3 gateway endpoint, interface VPC endpoints for EC2, SSM, Secrets Manager, CloudWatch Logs and
SQS unless `interface_endpoints: false` (then AWS calls cross the NAT), and VPC flow logs to CloudWatch Logs.

Security groups: one per kind of host (controllers, compute, login), plus SSH/web access, the monitoring group (for
the host that scrapes the exporter) and the file systems'. Every flow the cluster uses has its rule here and nothing
else is opened: slurmdbd admits only the controllers, the database only the controllers (stacks/accounting.py),
all-traffic only between compute nodes (MPI, EFA). tests/contracts/test_network_flows.py checks each flow against the
synthesized groups and that what they open beyond the flows is the short documented list (cross-region peering,
where a group cannot name the other region's groups).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import aws_cdk as cdk
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_logs as logs
from constructs import Construct

from cluster_config.checks import network_azs
from cluster_config.deploy_checks import address_ranges
from cluster_config.efa import pool_uses_efa
from cluster_config.model import Cluster, ExistingNetwork, NewNetwork
from slurm_plugin.exporter import EXPORTER_PORT
from stacks.naming import SLURMCTLD_PORT, SLURMD_PORT, SLURMDBD_PORT, SRUN_PORT_RANGE, TAG_ROLE
from stacks.onprem import OnpremIngress

PUBLIC_SUBNET_PREFIX = 26
INTERFACE_ENDPOINTS = {
    "Ec2": ec2.InterfaceVpcEndpointAwsService.EC2,
    "Ssm": ec2.InterfaceVpcEndpointAwsService.SSM,
    "SsmMessages": ec2.InterfaceVpcEndpointAwsService.SSM_MESSAGES,
    "Ec2Messages": ec2.InterfaceVpcEndpointAwsService.EC2_MESSAGES,
    "SecretsManager": ec2.InterfaceVpcEndpointAwsService.SECRETS_MANAGER,
    "Logs": ec2.InterfaceVpcEndpointAwsService.CLOUDWATCH_LOGS,
    "Sqs": ec2.InterfaceVpcEndpointAwsService.SQS,
}


@dataclass(frozen=True)
class ClusterSecurityGroups:
    """The security groups every other stack attaches: one per kind of host, so each port admits only the kinds
    whose flows need it (tests/contracts/test_network_flows.py)."""

    controllers: ec2.ISecurityGroup  # slurmctld, slurmdbd (controllers only), the exporter (monitoring only)
    compute: ec2.ISecurityGroup  # slurmd and srun; all traffic between compute nodes (MPI, NCCL, EFA)
    login: ec2.ISecurityGroup  # srun's ports (controllers, compute nodes), sackd's (controllers)
    ssh: ec2.ISecurityGroup  # controllers and login nodes: SSH (and rest_api.web_port) from the configured CIDRs
    monitoring: ec2.ISecurityGroup  # no host of ours: attach it to the Prometheus/ADOT host that scrapes the exporter
    storage: ec2.ISecurityGroup  # EFS/FSx: NFS and Lustre from the nodes only
    # the controllers' own EFS (slurm_plugin/controller_state.py): NFS from them only; none in a remote region
    controller_state: ec2.ISecurityGroup | None

    @property
    def clients(self) -> tuple[ec2.ISecurityGroup, ...]:
        """Every kind of host that mounts the shared file systems."""
        return (self.controllers, self.compute, self.login)


class NetworkStack(cdk.Stack):
    """VPC + security groups of one cluster region: the home region, or (with `network`) a remote region whose
    members reach the home region's members over VPC peering (`peer_cidrs`: the other side's address ranges)."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        cluster: Cluster,
        network: NewNetwork | ExistingNetwork | None = None,
        peer_cidrs: tuple[str, ...] = (),
        onprem: tuple[OnpremIngress, ...] = (),
        runs_slurmdbd: bool = False,
        **kwargs: Any,
    ) -> None:
        super().__init__(scope, construct_id, **kwargs)
        self.remote = network is not None  # a remote region of the cluster: compute nodes only
        self.runs_slurmdbd = runs_slurmdbd and not self.remote  # the accounting host's controllers
        network = network or cluster.network
        self.network = network
        self.peer_cidrs = peer_cidrs
        self.onprem = onprem
        self.azs = network_azs(network)
        self.creates_vpc = isinstance(network, NewNetwork)
        if isinstance(network, NewNetwork):
            self.vpc: ec2.IVpc = self._new_vpc(network)
        else:
            self.vpc = self._imported_vpc(network)
        self.compute_subnets = self.vpc.select_subnets(subnet_type=ec2.SubnetType.PRIVATE_WITH_EGRESS).subnets
        self.security_groups = self._security_groups(cluster)

    def _new_vpc(self, network: NewNetwork) -> ec2.Vpc:
        vpc = ec2.Vpc(
            self,
            "Vpc",
            ip_addresses=ec2.IpAddresses.cidr(network.vpc_cidr),
            availability_zones=list(network.availability_zones),
            nat_gateways=1,  # one NAT for the whole VPC: AWS traffic goes through the endpoints below
            restrict_default_security_group=False,  # the default SG is unused; avoids a custom-resource Lambda
            subnet_configuration=[
                ec2.SubnetConfiguration(
                    name="public", subnet_type=ec2.SubnetType.PUBLIC, cidr_mask=PUBLIC_SUBNET_PREFIX
                ),
                ec2.SubnetConfiguration(
                    name="compute",
                    subnet_type=ec2.SubnetType.PRIVATE_WITH_EGRESS,
                    cidr_mask=network.compute_subnet_prefix,
                ),
            ],
        )
        flow_log_group = logs.LogGroup(
            self, "FlowLogs", retention=logs.RetentionDays.ONE_MONTH, removal_policy=cdk.RemovalPolicy.DESTROY
        )
        vpc.add_flow_log("FlowLog", destination=ec2.FlowLogDestination.to_cloud_watch_logs(flow_log_group))
        vpc.add_gateway_endpoint("S3", service=ec2.GatewayVpcEndpointAwsService.S3)
        if not network.interface_endpoints:
            return vpc  # AWS calls go through the NAT gateway (cheaper when idle, docs/deploy.md)
        endpoints_sg = ec2.SecurityGroup(self, "Endpoints", vpc=vpc, description="Interface VPC endpoints")
        endpoints_sg.add_ingress_rule(ec2.Peer.ipv4(network.vpc_cidr), ec2.Port.tcp(443), "HTTPS from inside the VPC")
        for name, service in INTERFACE_ENDPOINTS.items():
            vpc.add_interface_endpoint(
                name,
                service=service,
                subnets=ec2.SubnetSelection(subnet_type=ec2.SubnetType.PRIVATE_WITH_EGRESS),
                security_groups=[endpoints_sg],
                open=False,
            )
        return vpc

    def _imported_vpc(self, network: ExistingNetwork) -> ec2.IVpc:
        # Vpc.from_lookup needs AWS credentials at synth time; the config carries every id we need instead.
        cdk.Annotations.of(self).acknowledge_warning(
            "@aws-cdk/aws-ec2:noSubnetRouteTableId",
            "Imported subnets' route tables are the operator's; the stacks add no routes or gateway endpoints to them.",
        )
        return ec2.Vpc.from_vpc_attributes(
            self,
            "Vpc",
            vpc_id=network.vpc_id,
            availability_zones=[s.availability_zone for s in network.subnets],
            private_subnet_ids=[s.subnet_id for s in network.subnets],
            private_subnet_ipv4_cidr_blocks=[s.cidr for s in network.subnets],
        )

    def _group(self, construct_id: str, what: str) -> ec2.SecurityGroup:
        return ec2.SecurityGroup(self, construct_id, vpc=self.vpc, description=f"Slurm cluster {self._name}: {what}")

    def _security_groups(self, cluster: Cluster) -> ClusterSecurityGroups:
        """One group per kind of host; each ingress admits the kinds (or, across a peering, the address ranges) whose
        flows need it, on the ports the rendered slurm.conf sets (stacks/naming.py)."""
        self._name = cluster.name
        ctl = self._group("Controllers", "controllers (slurmctld, slurmdbd, exporter)")
        cmp = self._group("Compute", "compute nodes (slurmd, srun, MPI/EFA)")
        login = self._group("Login", "login nodes (srun)")
        monitoring = self._group("Monitoring", "attach to the host that scrapes the metrics exporter")
        cdk.Tags.of(monitoring).add(TAG_ROLE, "monitoring")  # found by the network contract (no host of ours has it)
        cdk.CfnOutput(self, "MonitoringGroup", value=monitoring.security_group_id,
                      description="Attach to the Prometheus/ADOT host that scrapes the exporter (port 9464)")  # fmt: skip
        ssh = self._group("Ssh", "SSH access")
        storage = self._group("Storage", "shared file systems")
        # the controllers' own file system (StateSaveLocation): no compute or login node reaches it
        controller_state = None
        if not self.remote:
            controller_state = self._group("ControllerState", "file system of the controllers only (Slurm state)")
            controller_state.add_ingress_rule(ctl, ec2.Port.tcp(2049), "NFS (EFS) from the controllers only")
        slurmctld, slurmd = ec2.Port.tcp(SLURMCTLD_PORT), ec2.Port.tcp(SLURMD_PORT)
        slurmdbd, srun = ec2.Port.tcp(SLURMDBD_PORT), ec2.Port.tcp_range(*SRUN_PORT_RANGE)
        # slurmctld: every host's daemons and client commands; the backup controller; slurmdbd: slurmctld only (job
        # users on compute and login nodes reach neither slurmdbd nor the database; sacct and sacctmgr run on a
        # controller, docs/accounting.md)
        for peer, what in ((ctl, "the other controller"), (cmp, "compute nodes"), (login, "login nodes")):
            ctl.add_ingress_rule(peer, slurmctld, f"slurmctld from {what}")
        ctl.add_ingress_rule(ctl, slurmdbd, "slurmdbd from slurmctld (controllers)")
        # sacct, sreport and sacctmgr on login nodes (users' and workflow engines' job queries): slurmdbd checks each
        # user's munge credential and its PrivateData; compute nodes still reach neither slurmdbd nor the database
        if self.runs_slurmdbd:
            ctl.add_ingress_rule(login, slurmdbd, "slurmdbd from login nodes (sacct, sreport)")
        ctl.add_ingress_rule(monitoring, ec2.Port.tcp(EXPORTER_PORT), "metrics exporter from the monitoring group")
        # slurmd from slurmctld and from srun/salloc on login nodes; srun's ports: slurmctld's messages to an srun in
        # a batch job. Between compute nodes every port and protocol: slurmd, srun, and MPI/NCCL/EFA traffic of
        # multi-node jobs (EFA needs all traffic to and from the group itself).
        cmp.add_ingress_rule(ctl, slurmd, "slurmd from slurmctld")
        cmp.add_ingress_rule(login, slurmd, "slurmd from srun/salloc on login nodes")
        cmp.add_ingress_rule(ctl, srun, "srun in a batch job, from slurmctld")
        cmp.add_ingress_rule(cmp, ec2.Port.all_traffic(), "all traffic between compute nodes (Slurm, MPI, EFA)")
        # srun on a login node: its steps' slurmstepd and slurmctld call back
        login.add_ingress_rule(cmp, srun, "srun from the steps' slurmstepd")
        login.add_ingress_rule(ctl, srun, "srun from slurmctld")
        login.add_ingress_rule(ctl, slurmd, "sackd (SlurmdPort) from slurmctld: configs pushed on reconfigure")
        if cluster.directory is not None and cluster.directory.pam_slurm_adopt:
            # SSH from the login nodes to a node where the user has a job (pam_slurm_adopt admits no one else);
            # without it no host of the cluster reaches a compute node's sshd (admins: Session Manager)
            cmp.add_ingress_rule(login, ec2.Port.tcp(22), "SSH from login nodes (pam_slurm_adopt)")
        if any(pool_uses_efa(pool) for partition in cluster.partitions for pool in partition.pools):
            # EFA needs an outbound rule to the group itself even next to the all-outbound 0.0.0.0/0 rule (EFA's
            # OS-bypass traffic is matched by group, not by address): "Prepare an EFA-enabled security group",
            # https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/efa-start.html#efa-start-security and EKS's
            # "Outbound All Self (for EFA traffic)", https://docs.aws.amazon.com/eks/latest/userguide/sec-group-reqs.html
            # L1: with allow_all_outbound the L2 group drops every further egress rule.
            ec2.CfnSecurityGroupEgress(
                self,
                "ComputeEfaEgress",
                group_id=cmp.security_group_id,
                ip_protocol="-1",
                destination_security_group_id=cmp.security_group_id,
                description="EFA: all traffic to the group itself",
            )
        self._peer_rules(cluster, ctl, cmp, login, storage)
        for rule in self.onprem:  # on-prem clusters' hosts (stacks/onprem.py): slurmctld and slurmdbd
            ctl.add_ingress_rule(ec2.Peer.ipv4(rule.cidr), ec2.Port.tcp(rule.port), rule.description)
        for cidr in cluster.ssh_allowed_cidrs:  # normalised CIDRs (cluster_config/model_base.py): IPv6 has a ':'
            ssh_peer = ec2.Peer.ipv6(cidr) if ":" in cidr else ec2.Peer.ipv4(cidr)
            ssh.add_ingress_rule(ssh_peer, ec2.Port.tcp(22), f"SSH from {cidr}")
        if cluster.rest_api.enabled:  # the web page and the REST API through it; slurmrestd itself is on 127.0.0.1
            for cidr in cluster.rest_api.allowed_cidrs:
                peer = ec2.Peer.ipv6(cidr) if ":" in cidr else ec2.Peer.ipv4(cidr)
                web = ec2.Port.tcp(cluster.rest_api.web_port)
                ssh.add_ingress_rule(peer, web, f"REST API web page from {cidr} (docs/rest-api.md)")
        groups = ClusterSecurityGroups(ctl, cmp, login, ssh, monitoring, storage, controller_state)
        self._storage_rules(cluster, groups)
        return groups

    def _peer_rules(
        self, cluster: Cluster, ctl: ec2.SecurityGroup, cmp: ec2.SecurityGroup, login: ec2.SecurityGroup,
        storage: ec2.SecurityGroup,
    ) -> None:  # fmt: skip
        """Across a VPC peering a group cannot name the other region's groups: the peer's address ranges instead,
        on the ports its flows need only."""
        if self.remote:  # a remote region's compute nodes: slurmctld (and srun on login nodes) of the home VPC call
            for cidr in self.peer_cidrs:
                cmp.add_ingress_rule(ec2.Peer.ipv4(cidr), ec2.Port.tcp(SLURMD_PORT), f"slurmd from home {cidr}")
                cmp.add_ingress_rule(ec2.Peer.ipv4(cidr), ec2.Port.tcp_range(*SRUN_PORT_RANGE), f"srun from {cidr}")
            return
        remote = {str(r) for region in cluster.remote_regions for r in address_ranges(region.network)}
        for cidr in self.peer_cidrs:
            peer = ec2.Peer.ipv4(cidr)
            if cidr in remote:  # this cluster's compute nodes in a remote region
                ctl.add_ingress_rule(peer, ec2.Port.tcp(SLURMCTLD_PORT), f"slurmctld from remote compute in {cidr}")
                login.add_ingress_rule(peer, ec2.Port.tcp_range(*SRUN_PORT_RANGE), f"srun from remote {cidr}")
                storage.add_ingress_rule(peer, ec2.Port.tcp(2049), f"NFS from remote compute in {cidr}")
            else:  # a federation member: its slurmctld calls this one's, and slurmdbd on the accounting host
                ctl.add_ingress_rule(peer, ec2.Port.tcp(SLURMCTLD_PORT), f"slurmctld from federation peer {cidr}")
                ctl.add_ingress_rule(peer, ec2.Port.tcp(SLURMDBD_PORT), f"slurmdbd from federation peer {cidr}")
                # an interactive job (srun/salloc on a member's login node) may run here: "all compute nodes must
                # be accessible to all submission hosts" (Slurm's federation.shtml, Interactive Jobs); its
                # slurmctld and slurmstepd call back the member's srun
                cmp.add_ingress_rule(peer, ec2.Port.tcp(SLURMD_PORT), f"slurmd from federation peer {cidr} (srun)")
                login.add_ingress_rule(
                    peer, ec2.Port.tcp_range(*SRUN_PORT_RANGE), f"srun from federation peer {cidr} (interactive jobs)"
                )

    @staticmethod
    def _storage_rules(cluster: Cluster, groups: ClusterSecurityGroups) -> None:
        storage = groups.storage
        for client in groups.clients:
            storage.add_ingress_rule(client, ec2.Port.tcp(2049), "NFS (EFS, ONTAP, OpenZFS) from cluster hosts")
            storage.add_ingress_rule(client, ec2.Port.tcp(988), "Lustre from cluster hosts")
            storage.add_ingress_rule(client, ec2.Port.tcp_range(1018, 1023), "Lustre from cluster hosts")
        storage.add_ingress_rule(storage, ec2.Port.tcp(988), "Lustre between file servers")
        storage.add_ingress_rule(storage, ec2.Port.tcp_range(1018, 1023), "Lustre between file servers")
        for client in groups.clients:
            if cluster.storage.fsx_lustre:
                # Lustre clients accept 988 and 1018-1023 from the file system's group ("Lustre client VPC security
                # group rules", https://docs.aws.amazon.com/fsx/latest/LustreGuide/limit-access-security-groups.html)
                client.add_ingress_rule(storage, ec2.Port.tcp(988), "Lustre from the FSx for Lustre file servers")
                client.add_ingress_rule(
                    storage, ec2.Port.tcp_range(1018, 1023), "Lustre from the FSx for Lustre file servers"
                )
            if cluster.storage.fsx_ontap or cluster.storage.fsx_openzfs:
                # NFSv3 clients of ONTAP/OpenZFS also need the portmapper and mountd/nlm ports.
                for proto, port_range in [("tcp", ec2.Port.tcp), ("udp", ec2.Port.udp)]:
                    storage.add_ingress_rule(client, port_range(111), f"NFS portmapper ({proto}) from cluster hosts")
                storage.add_ingress_rule(client, ec2.Port.tcp_range(20001, 20003), "NFS mountd/nlm from cluster hosts")
                storage.add_ingress_rule(client, ec2.Port.udp_range(20001, 20003), "NFS mountd/nlm from cluster hosts")
                storage.add_ingress_rule(client, ec2.Port.udp(2049), "NFS over UDP from cluster hosts")
