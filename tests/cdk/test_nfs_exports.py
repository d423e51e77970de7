"""Who may mount FSx for OpenZFS and ONTAP as root (issue 30: the OpenZFS root volume was exported `no_root_squash`
to the whole VPC CIDR).

OpenZFS exports its root volume to the nodes' subnets only (an imported network's subnets; a created VPC's compute
subnets, never the VPC CIDR, which holds the public subnets too). ONTAP's export policy cannot be set through
CloudFormation, so the `Storage` security group is what admits NFS clients: the cluster's node group only (and the
peer CIDRs of remote regions, which mount EFS across the peering). Both read from synthesized templates; ONTAP's
`no_root_squash` question is the SVM's `default` export policy, outside CloudFormation (docs/security.md).
"""

from __future__ import annotations

import ipaddress
from typing import Any

import aws_cdk as cdk
import yaml
from aws_cdk import assertions

from cluster_config import load
from stacks.network import NetworkStack
from stacks.storage import StorageStack
from tests.cdk.conftest import REPO_ROOT, Assembly

NFS_PORTS = {2049, 111}
HOST_GROUPS = ("Nodes", "Controllers", "Compute", "Login")


def _resources(template: dict[str, Any], kind: str) -> dict[str, dict[str, Any]]:
    return {k: r for k, r in template.get("Resources", {}).items() if r["Type"] == kind}


def openzfs_clients(template: dict[str, Any]) -> list[tuple[Any, list[str]]]:
    """(clients, options) of every NFS export client configuration of the OpenZFS file systems in `template`."""
    result = []
    for fs in _resources(template, "AWS::FSx::FileSystem").values():
        root = fs["Properties"].get("OpenZFSConfiguration", {}).get("RootVolumeConfiguration", {})
        for export in root.get("NfsExports", []):
            result += [(c["Clients"], c["Options"]) for c in export["ClientConfigurations"]]
    return result


def too_broad(clients: list[tuple[Any, list[str]]], vpc_cidr: str) -> list[Any]:
    """Client entries that admit more than the nodes' subnets: `*`, any address, or the whole VPC."""
    bad = []
    for client, _ in clients:
        if not isinstance(client, str):
            continue  # a subnet's CIDR by reference (a created VPC): checked by its value elsewhere
        whole = client in ("*", "0.0.0.0/0") or client == vpc_cidr
        if whole or ipaddress.ip_network(client).prefixlen <= ipaddress.ip_network(vpc_cidr).prefixlen:
            bad.append(client)
    return bad


def _storage_template(assembly: Assembly) -> dict[str, Any]:
    stacks = [s for s in assembly.templates if s.endswith("-storage")]
    assert len(stacks) == 1, list(assembly.templates)
    return assembly.template_json(stacks[0])


def test_openzfs_exports_to_the_imported_subnets_only(assemblies: dict[str, Assembly]) -> None:
    clients = openzfs_clients(_storage_template(assemblies["imported-network-all-storage"]))
    assert sorted(c for c, _ in clients) == ["100.64.0.0/20", "100.64.16.0/20"]
    assert too_broad(clients, "100.64.0.0/16") == []


def test_the_check_catches_an_export_to_the_whole_vpc() -> None:
    clients: list[tuple[Any, list[str]]] = [("100.64.0.0/20", ["rw"]), ("100.64.0.0/16", ["rw", "no_root_squash"])]
    assert too_broad(clients, "100.64.0.0/16") == ["100.64.0.0/16"]
    assert too_broad([("*", ["rw"])], "100.64.0.0/16") == ["*"]


def test_openzfs_in_a_created_vpc_exports_to_the_compute_subnets_not_the_vpc(tmp_path: Any) -> None:
    raw = yaml.safe_load((REPO_ROOT / "cluster_config" / "examples" / "minimal.yaml").read_text())
    raw["clusters"][0]["storage"]["fsx_openzfs"] = {"mount_point": "/tools"}
    path = tmp_path / "zfs.yaml"
    path.write_text(yaml.safe_dump(raw))
    cluster = load(path).clusters[0]
    app = cdk.App()
    env = cdk.Environment(account="111122223333", region=cluster.region)
    network = NetworkStack(app, "zfs-network", cluster=cluster, env=env)
    storage = StorageStack(
        app,
        "zfs-storage",
        cluster=cluster,
        vpc=network.vpc,
        subnets=network.compute_subnets,
        security_groups=network.security_groups,
        env=env,
    )
    template = assertions.Template.from_stack(storage).to_json()
    clients = openzfs_clients(template)
    expected = sorted(s.ipv4_cidr_block for s in network.compute_subnets)
    assert len(expected) == 2 and all(not cdk.Token.is_unresolved(c) for c in expected)
    assert sorted(c for c, _ in clients) == expected
    assert too_broad(clients, cluster.network.vpc_cidr) == []  # type: ignore[union-attr]


def _nfs_sources(template: dict[str, Any], storage_group: str) -> list[Any]:
    """The sources of every ingress rule of the `Storage` security group that opens an NFS port."""
    sources = []
    rules = [
        r["Properties"]
        for r in _resources(template, "AWS::EC2::SecurityGroupIngress").values()
        if r["Properties"].get("GroupId", {}).get("Fn::GetAtt", [None])[0] == storage_group
    ]
    group = template["Resources"][storage_group]["Properties"]
    rules += group.get("SecurityGroupIngress", [])
    for rule in rules:
        if any(rule["FromPort"] <= port <= rule["ToPort"] for port in NFS_PORTS):
            sources.append(rule.get("SourceSecurityGroupId") or rule.get("CidrIp") or rule.get("CidrIpv6"))
    return sources


def test_only_the_node_group_reaches_ontap_and_openzfs_over_nfs(assemblies: dict[str, Assembly]) -> None:
    assembly = assemblies["imported-network-all-storage"]
    network = next(s for s in assembly.templates if s.endswith("-network"))
    template = assembly.template_json(network)
    groups = _resources(template, "AWS::EC2::SecurityGroup")
    storage = next(k for k in groups if k.startswith("Storage"))
    # the cluster's hosts: one node group, or one group per role (controllers, compute, login)
    hosts = [k for k in groups if k.startswith(HOST_GROUPS)]
    assert hosts
    sources = _nfs_sources(template, storage)
    assert sources and all(s in [{"Fn::GetAtt": [h, "GroupId"]} for h in hosts] for s in sources), sources
