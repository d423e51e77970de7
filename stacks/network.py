"""Network stack: the cluster's VPC (new, across the configured AZs, or imported by id) and its security groups.

New VPC: one private compute subnet per AZ sized by `compute_subnet_prefix`, small public subnets only to host the
single NAT gateway, an S3 gateway endpoint, interface VPC endpoints for EC2, SSM, Secrets Manager, CloudWatch Logs and
SQS unless `interface_endpoints: false` (then AWS calls cross the NAT), and VPC flow logs to CloudWatch Logs.

Every flow the cluster uses has its rule here, and tests/contracts/test_network_flows.py checks each flow against the
synthesized groups (and lists the openings no flow needs).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import aws_cdk as cdk
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_logs as logs
from constructs import Construct

from cluster_config.checks import network_azs
from cluster_config.efa import pool_uses_efa
from cluster_config.model import Cluster, ExistingNetwork, NewNetwork
from stacks.naming import SLURMCTLD_PORT, SLURMD_PORT, SLURMDBD_PORT, SRUN_PORT_RANGE
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
    """The security groups every other stack attaches."""

    nodes: ec2.ISecurityGroup  # controllers + compute: Slurm ports between members only
    ssh: ec2.ISecurityGroup  # controllers: SSH (and rest_api.web_port) from the configured CIDRs only
    storage: ec2.ISecurityGroup  # EFS/FSx: NFS and Lustre from the nodes only


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
        **kwargs: Any,
    ) -> None:
        super().__init__(scope, construct_id, **kwargs)
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

    def _security_groups(self, cluster: Cluster) -> ClusterSecurityGroups:
        nodes = ec2.SecurityGroup(
            self, "Nodes", vpc=self.vpc, description=f"Slurm cluster {cluster.name}: controllers and compute nodes"
        )
        ports = [
            ("slurmctld", ec2.Port.tcp(SLURMCTLD_PORT)),
            ("slurmd", ec2.Port.tcp(SLURMD_PORT)),
            ("slurmdbd", ec2.Port.tcp(SLURMDBD_PORT)),
            ("srun", ec2.Port.tcp_range(*SRUN_PORT_RANGE)),
        ]
        # Members reach each other on every port and protocol: slurmctld/slurmd/srun, and the MPI, NCCL and EFA
        # traffic of multi-node jobs (EFA needs all traffic to and from the group itself).
        nodes.add_ingress_rule(nodes, ec2.Port.all_traffic(), "all traffic between cluster members (Slurm, MPI, EFA)")
        if any(pool_uses_efa(pool) for partition in cluster.partitions for pool in partition.pools):
            # EFA needs an outbound rule to the group itself even next to the all-outbound 0.0.0.0/0 rule (EFA's
            # OS-bypass traffic is matched by group, not by address): "Prepare an EFA-enabled security group",
            # https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/efa-start.html#efa-start-security and EKS's
            # "Outbound All Self (for EFA traffic)", https://docs.aws.amazon.com/eks/latest/userguide/sec-group-reqs.html
            # L1: with allow_all_outbound the L2 group drops every further egress rule.
            ec2.CfnSecurityGroupEgress(
                self,
                "NodesEfaEgress",
                group_id=nodes.security_group_id,
                ip_protocol="-1",
                destination_security_group_id=nodes.security_group_id,
                description="EFA: all traffic to the group itself",
            )
        for label, port in ports:
            for cidr in self.peer_cidrs:
                nodes.add_ingress_rule(ec2.Peer.ipv4(cidr), port, f"{label} from cluster members in peered {cidr}")
        for rule in self.onprem:  # on-prem clusters' hosts (stacks/onprem.py)
            nodes.add_ingress_rule(ec2.Peer.ipv4(rule.cidr), ec2.Port.tcp(rule.port), rule.description)
        ssh = ec2.SecurityGroup(self, "Ssh", vpc=self.vpc, description=f"Slurm cluster {cluster.name}: SSH access")
        for cidr in cluster.ssh_allowed_cidrs:
            ssh.add_ingress_rule(ec2.Peer.ipv4(cidr), ec2.Port.tcp(22), f"SSH from {cidr}")
        if cluster.rest_api.enabled:  # the web page and the REST API through it; slurmrestd itself is on 127.0.0.1
            for cidr in cluster.rest_api.allowed_cidrs:
                peer = ec2.Peer.ipv6(cidr) if ":" in cidr else ec2.Peer.ipv4(cidr)
                web = ec2.Port.tcp(cluster.rest_api.web_port)
                ssh.add_ingress_rule(peer, web, f"REST API web page from {cidr} (docs/rest-api.md)")
        storage = ec2.SecurityGroup(
            self, "Storage", vpc=self.vpc, description=f"Slurm cluster {cluster.name}: shared file systems"
        )
        storage.add_ingress_rule(nodes, ec2.Port.tcp(2049), "NFS (EFS, ONTAP, OpenZFS) from cluster members")
        storage.add_ingress_rule(nodes, ec2.Port.tcp(988), "Lustre from cluster members")
        storage.add_ingress_rule(nodes, ec2.Port.tcp_range(1018, 1023), "Lustre from cluster members")
        storage.add_ingress_rule(storage, ec2.Port.tcp(988), "Lustre between file servers")
        storage.add_ingress_rule(storage, ec2.Port.tcp_range(1018, 1023), "Lustre between file servers")
        for cidr in self.peer_cidrs:
            storage.add_ingress_rule(ec2.Peer.ipv4(cidr), ec2.Port.tcp(2049), f"NFS from cluster members in {cidr}")
        if cluster.storage.fsx_lustre:
            # Lustre clients accept 988 and 1018-1023 from the file system's group ("Lustre client VPC security group
            # rules", https://docs.aws.amazon.com/fsx/latest/LustreGuide/limit-access-security-groups.html); between
            # clients the members' all-traffic rule above covers them.
            nodes.add_ingress_rule(storage, ec2.Port.tcp(988), "Lustre from the FSx for Lustre file servers")
            nodes.add_ingress_rule(
                storage, ec2.Port.tcp_range(1018, 1023), "Lustre from the FSx for Lustre file servers"
            )
        if cluster.storage.fsx_ontap or cluster.storage.fsx_openzfs:
            # NFSv3 clients of ONTAP/OpenZFS also need the portmapper and mountd/nlm ports.
            for proto, port_range in [("tcp", ec2.Port.tcp), ("udp", ec2.Port.udp)]:
                storage.add_ingress_rule(nodes, port_range(111), f"NFS portmapper ({proto}) from cluster members")
            storage.add_ingress_rule(nodes, ec2.Port.tcp_range(20001, 20003), "NFS mountd/nlm from cluster members")
            storage.add_ingress_rule(nodes, ec2.Port.udp_range(20001, 20003), "NFS mountd/nlm from cluster members")
            storage.add_ingress_rule(nodes, ec2.Port.udp(2049), "NFS over UDP from cluster members")
        return ClusterSecurityGroups(nodes=nodes, ssh=ssh, storage=storage)
