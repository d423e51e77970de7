"""Contract: every network flow the cluster uses is allowed by the security groups we synthesize, EFA pools carry
their interfaces, and what the groups open beyond the flows is an explicit, documented list.

Both sides come from our own outputs (tests/contracts/flows.py): the flows from the real slurm.conf render, the
config's storage, accounting, EFA pools, remote regions and federation; the rules and role memberships from the
templates of every synthesized example and test config. Negative cases, each caught: a real template without the
rules carrying slurmd and slurmctld, without the EFA self egress, with MySQL opened to 0.0.0.0/0, with the database
admitting the compute group, and with 2eb80bf's members' rule (compute nodes admitted on every controller port).
"""

from __future__ import annotations

import copy
from typing import Any

import aws_cdk as cdk
import pytest
from aws_cdk.assertions import Template

from cluster_config import ElasticSlurmConfig
from cluster_config.loader import load
from slurm_plugin.exporter import EXPORTER_PORT
from stacks.network import NetworkStack
from tests.cdk.conftest import Assembly
from tests.contracts import flows as nf
from tests.unit.test_render import small_config

# Openings the rules allow on a listening port that no flow of the product needs: (source kind, destination kind,
# listener). Each kind of host has a group of its own, so within a VPC every port admits only the kinds whose flows
# need it: slurmdbd and the database the controllers only, the exporter the monitoring group only, all traffic only
# between compute nodes. What is left crosses a VPC peering between regions, where a rule cannot name the other
# region's groups and admits the peer's address ranges instead (the peer's compute and controllers share subnets):
KNOWN_OPENINGS = {
    # remote regions: slurmctld and srun on the home side reach the remote compute nodes through the home VPC's CIDR
    ("compute", "remote-compute", "slurmd"),
    ("compute", "remote-compute", "srun"),
    ("login", "remote-compute", "srun"),
    # federation: a member's slurmctld reaches the other members' slurmctld and the host's slurmdbd through the
    # peer VPC's CIDR, which also holds the member's compute nodes; slurmdbd is opened on every member's controllers
    # (the network stack does not know the accounting host) but listens on the host's controller 0 only
    ("compute", "controller", "slurmctld"),
    ("compute", "controller", "slurmdbd"),
    ("controller", "controller", "slurmdbd"),
    # federation: a member's login nodes run interactive jobs on the others' compute nodes (slurmd), through the peer
    # VPC's CIDR, which also holds the member's controllers and compute nodes
    ("compute", "compute", "slurmd"),
    ("controller", "compute", "slurmd"),
}
# What the members' all-traffic group of 2eb80bf opened within a VPC (issue 30 #9) — each now a failure of the check
# (login → slurmdbd is a flow now, on the accounting host: sacct and sreport on login nodes)
CLOSED = {
    ("compute", "controller", "exporter"),
    ("compute", "controller", "ssh"),
    ("compute", "controller", "web"),
    ("compute", "database", "database"),
    ("login", "controller", "exporter"),
    ("login", "database", "database"),
    ("login", "login", "srun"),
    ("login", "compute", "srun"),
    ("controller", "controller", "exporter"),
    ("remote-compute", "controller", "slurmdbd"),
    ("remote-compute", "compute", "slurmd"),
}


def _templates(assembly: Assembly) -> dict[str, dict[str, Any]]:
    return {stack: assembly.template_json(stack) for stack in assembly.templates}


def _stack_clusters(config: ElasticSlurmConfig, stacks: list[str]) -> dict[str, str]:
    """Stack name → the cluster it belongs to (`es-{cluster}-...`, longest cluster name first)."""
    names = sorted((c.name for c in config.clusters), key=len, reverse=True)
    return {
        s: next(n for n in names if s.startswith(f"es-{n}-"))
        for s in stacks
        if any(s.startswith(f"es-{n}-") for n in names)
    }


def _analyse(
    config: ElasticSlurmConfig, templates: dict[str, dict[str, Any]]
) -> tuple[list[nf.Rule], dict[str, nf.Role], list[nf.Flow]]:
    roles = nf.roles(config, templates, _stack_clusters(config, list(templates)))
    flows = [f for cluster in config.clusters for f in nf.cluster_flows(config, cluster, roles)]
    flows += nf.federation_flows(config, roles) + nf.onprem_flows(config, roles)
    return nf.rules(templates), roles, flows


def _openings(config: ElasticSlurmConfig, templates: dict[str, dict[str, Any]]) -> set[tuple[str, str, str]]:
    rules, roles, flows = _analyse(config, templates)
    ports = {cluster.name: nf.listeners(config, cluster) for cluster in config.clusters}
    return nf.openings(rules, roles, flows, ports)


def _assembly(assemblies: dict[str, Assembly], stem: str) -> Assembly:
    if stem not in assemblies:
        pytest.skip(f"{stem} not synthesized (ES_SYNTH_ONLY)")
    assert assemblies[stem].returncode == 0, assemblies[stem].output[-2000:]
    return assemblies[stem]


def test_every_flow_of_every_config_is_allowed_by_its_security_groups(assemblies: dict[str, Assembly]) -> None:
    checked = 0
    for stem, assembly in assemblies.items():
        assert assembly.returncode == 0, f"{stem}: {assembly.output[-2000:]}"
        config = load(assembly.config)
        rules, roles, flows = _analyse(config, _templates(assembly))
        assert {f"{c.name}/controller" for c in config.clusters} <= set(roles), f"{stem}: controllers not found"
        assert nf.denied_flows(rules, roles, flows) == [], stem
        labels = {f.label for f in flows}
        assert {"slurmctld", "slurmd", "srun"} <= labels, stem  # the core Slurm flows were derived
        checked += 1
    assert checked == len(assemblies)


def test_openings_no_flow_needs_are_the_documented_known_ones(assemblies: dict[str, Assembly]) -> None:
    found: dict[tuple[str, str, str], str] = {}
    for stem, assembly in assemblies.items():
        config = load(assembly.config)
        found |= dict.fromkeys(_openings(config, _templates(assembly)) - found.keys(), stem)
    unexpected = {opening: stem for opening, stem in found.items() if opening not in KNOWN_OPENINGS}
    assert unexpected == {}
    assert not CLOSED & KNOWN_OPENINGS
    assert ("compute", "controller", "slurmdbd") in found  # the federation's peer CIDR: the check sees it


def test_within_one_vpc_job_hosts_reach_no_slurmdbd_database_exporter_or_web_page(
    assemblies: dict[str, Assembly],
) -> None:
    """The single-VPC configs (no peering): compute and login nodes, where job users run, reach neither slurmdbd,
    the database, the exporter nor the web page; only the monitoring group reaches the exporter."""
    checked = 0
    for stem in ("minimal", "multi-az-gpu", "imported-network-all-storage"):
        assembly = _assembly(assemblies, stem)
        config = load(assembly.config)
        templates = _templates(assembly)
        assert _openings(config, templates) == set(), stem
        rules, roles, _ = _analyse(config, templates)
        (cluster,) = config.clusters
        ctl, dbd = roles[f"{cluster.name}/controller"], nf.rendered_ports(config, cluster)["slurmdbd"]
        for kind in ("compute", "login"):
            if f"{cluster.name}/{kind}" in roles:
                assert not nf.allowed(rules, roles[f"{cluster.name}/{kind}"], ctl, "tcp", dbd), (stem, kind)
        monitoring = roles[f"{cluster.name}/monitoring"]
        assert nf.allowed(rules, monitoring, ctl, "tcp", (EXPORTER_PORT, EXPORTER_PORT)), stem
        assert not nf.allowed(rules, roles[f"{cluster.name}/compute"], ctl, "tcp", (EXPORTER_PORT,) * 2), stem
        checked += 1
    assert checked == 3


def _ingress(group: str, peer: str, proto: str = "-1", ports: tuple[int, int] | None = None) -> dict[str, Any]:
    rule: dict[str, Any] = {"GroupId": {"Fn::GetAtt": [group, "GroupId"]}, "IpProtocol": proto,
                            "SourceSecurityGroupId": {"Fn::GetAtt": [peer, "GroupId"]}}  # fmt: skip
    if ports is not None:
        rule |= {"FromPort": ports[0], "ToPort": ports[1]}
    return {"Type": "AWS::EC2::SecurityGroupIngress", "Properties": rule}


def _group(resources: dict[str, Any], prefix: str) -> str:
    (found,) = [k for k, r in resources.items() if r["Type"] == "AWS::EC2::SecurityGroup" and k.startswith(prefix)]
    return found


def test_the_members_all_traffic_rule_of_2eb80bf_is_caught_as_unexpected_openings(
    assemblies: dict[str, Assembly],
) -> None:
    """Negative case: the old design (compute and login hosts admitted on every port of the controllers) opens
    slurmdbd, the exporter, SSH and the web page to job users; the check reports each."""
    assembly = _assembly(assemblies, "minimal")
    config = load(assembly.config)
    broken = copy.deepcopy(_templates(assembly))
    resources = broken["es-minimal-network"]["Resources"]
    resources["OldMembersRule"] = _ingress(_group(resources, "Controllers"), _group(resources, "Compute"))
    assert {("compute", "controller", "slurmdbd"), ("compute", "controller", "exporter")} <= _openings(config, broken)


def test_the_onprem_site_reaches_slurmctld_and_slurmdbd_of_its_burst_cluster_only(
    assemblies: dict[str, Assembly],
) -> None:
    """federation.yaml's campus site bursts to east, the accounting host: its hosts reach east's slurmctld and
    slurmdbd, nothing on west and no compute node (the site's rules name its address ranges only)."""
    assembly = _assembly(assemblies, "federation")
    config = load(assembly.config)
    rules, roles, flows = _analyse(config, _templates(assembly))
    site = [(f.source, f.destination, f.label) for f in flows if f.source.startswith("onprem:campus:")]
    assert sorted(site) == [
        (f"onprem:campus:{cidr}", "east/controller", label)
        for cidr in ("198.51.100.5/32", "203.0.113.0/24")
        for label in ("slurmctld", "slurmdbd")
    ]
    assert nf.denied_flows(rules, roles, flows) == []
    assert not {o for o in _openings(config, _templates(assembly)) if o[0] == "onprem"}


def test_lustre_file_servers_reach_their_clients(assemblies: dict[str, Assembly]) -> None:
    assembly = _assembly(assemblies, "multi-az-gpu")
    config = load(assembly.config)
    rules, roles, flows = _analyse(config, _templates(assembly))
    back = [f for f in flows if f.label == "lustre" and f.source == "gpu/storage"]
    assert {(f.destination, f.ports) for f in back} == {
        (f"gpu/{kind}", ports) for kind in ("controller", "compute") for ports in ((988, 988), (1018, 1023))
    }
    assert nf.denied_flows(rules, roles, back) == []


def test_p5_pool_attaches_efa_on_all_32_network_cards_with_its_groups_on_the_interfaces(
    assemblies: dict[str, Assembly],
) -> None:
    template = _assembly(assemblies, "multi-az-gpu").template_json("es-gpu-cluster")
    (data,) = [
        r["Properties"]["LaunchTemplateData"]
        for r in template["Resources"].values()
        if r["Type"] == "AWS::EC2::LaunchTemplate" and r["Properties"].get("LaunchTemplateName") == "gpu-gpu-p5"
    ]
    assert "SecurityGroupIds" not in data  # groups go on the interfaces once a template has interfaces
    layout = [(i["NetworkCardIndex"], i["DeviceIndex"], i["InterfaceType"]) for i in data["NetworkInterfaces"]]
    assert layout == [(0, 0, "interface"), (0, 1, "efa-only")] + [(card, 0, "efa-only") for card in range(1, 32)]
    assert all(i["Groups"] and "SubnetId" not in i for i in data["NetworkInterfaces"])
    others = [
        r["Properties"]["LaunchTemplateData"]
        for r in template["Resources"].values()
        if r["Type"] == "AWS::EC2::LaunchTemplate" and r["Properties"].get("LaunchTemplateName") != "gpu-gpu-p5"
    ]
    assert len(others) == 5 and all("NetworkInterfaces" not in d for d in others)  # 3 pools + 2 controllers


def test_efa_traffic_needs_the_groups_self_egress_rule(assemblies: dict[str, Assembly]) -> None:
    assembly = _assembly(assemblies, "multi-az-gpu")
    config = load(assembly.config)
    templates = _templates(assembly)
    rules, roles, flows = _analyse(config, templates)
    efa = [f for f in flows if f.label == "efa"]
    assert len(efa) == 1 and nf.denied_flows(rules, roles, efa) == []
    broken = copy.deepcopy(templates)
    resources = broken["es-gpu-network"]["Resources"]
    (egress,) = [k for k, r in resources.items() if r["Type"] == "AWS::EC2::SecurityGroupEgress"]
    del resources[egress]  # the 0.0.0.0/0 egress stays: it does not carry EFA traffic
    rules, roles, flows = _analyse(config, broken)
    assert nf.denied_flows(rules, roles, [f for f in flows if f.label == "efa"]) == efa


def test_a_template_without_the_rules_carrying_slurmd_and_slurmctld_is_caught(assemblies: dict[str, Assembly]) -> None:
    assembly = _assembly(assemblies, "minimal")
    config = load(assembly.config)
    broken = copy.deepcopy(_templates(assembly))
    resources = broken["es-minimal-network"]["Resources"]
    compute, controllers = _group(resources, "Compute"), _group(resources, "Controllers")
    carrying = [
        k
        for k, r in resources.items()
        if r["Type"] == "AWS::EC2::SecurityGroupIngress"
        and (r["Properties"]["GroupId"], r["Properties"].get("FromPort"))
        in (({"Fn::GetAtt": [compute, "GroupId"]}, 6818), ({"Fn::GetAtt": [controllers, "GroupId"]}, 6817))
    ]
    assert len(carrying) == 5  # slurmd from controllers and login nodes; slurmctld from controllers, compute, login
    for key in carrying:
        del resources[key]
    rules, roles, flows = _analyse(config, broken)
    denied = {(f.source, f.destination, f.label) for f in nf.denied_flows(rules, roles, flows)}
    assert ("minimal/controller", "minimal/compute", "slurmd") in denied
    assert ("minimal/compute", "minimal/controller", "slurmctld") in denied


def test_the_database_admitting_compute_nodes_is_an_unexpected_opening(assemblies: dict[str, Assembly]) -> None:
    """Negative case: the database's group admitting the compute group (as it admitted the members' group before)."""
    assembly = _assembly(assemblies, "minimal")
    config = load(assembly.config)
    broken = copy.deepcopy(_templates(assembly))
    network, accounting = broken["es-minimal-network"], broken["es-minimal-accounting"]["Resources"]
    compute = _group(network["Resources"], "Compute")
    (export,) = [
        o["Export"]["Name"] for o in network["Outputs"].values() if o["Value"] == {"Fn::GetAtt": [compute, "GroupId"]}
    ]
    rule = _ingress(_group(accounting, "Database"), compute, "tcp", (3306, 3306))
    rule["Properties"]["SourceSecurityGroupId"] = {"Fn::ImportValue": export}
    assert ("compute", "database", "database") not in _openings(config, broken)
    accounting["ComputeToDatabase"] = rule
    assert ("compute", "database", "database") in _openings(config, broken) - KNOWN_OPENINGS


def test_mysql_opened_to_the_internet_is_an_unexpected_opening(assemblies: dict[str, Assembly]) -> None:
    assembly = _assembly(assemblies, "minimal")
    config = load(assembly.config)
    templates = _templates(assembly)
    assert not {o for o in _openings(config, templates) if o[0] == "internet"}
    broken = copy.deepcopy(templates)
    (group,) = [
        r for r in broken["es-minimal-accounting"]["Resources"].values() if r["Type"] == "AWS::EC2::SecurityGroup"
    ]
    rule = {"IpProtocol": "tcp", "FromPort": 3306, "ToPort": 3306, "CidrIp": "0.0.0.0/0"}
    group["Properties"].setdefault("SecurityGroupIngress", []).append(rule)
    unexpected = _openings(config, broken) - KNOWN_OPENINGS
    # the Internet, and the compute nodes (their addresses are in 0.0.0.0/0 too)
    assert unexpected == {("internet", "database", "database"), ("compute", "database", "database")}


def _network_template(**cluster: Any) -> dict[str, Any]:
    config = small_config(**cluster)
    app = cdk.App()
    stack = NetworkStack(app, "net", cluster=config.clusters[0], env=cdk.Environment(account="123456789012",
                                                                                     region="us-east-1"))  # fmt: skip
    return Template.from_stack(stack).to_json()  # type: ignore[no-any-return]


def _kind(template: dict[str, Any], prefix: str) -> nf.Role:
    return nf.Role(prefix, groups={f"net/{_group(template['Resources'], prefix)}"}, cidrs=("127.16.0.0/16",))


@pytest.mark.parametrize("adopt", [True, False])
def test_login_nodes_reach_a_compute_nodes_sshd_only_with_pam_slurm_adopt(adopt: bool) -> None:
    """With `directory.pam_slurm_adopt` a user SSHes from a login node into a node running their job (the PAM module
    admits no one else); without it no host of the cluster reaches a compute node's sshd."""
    directory = {"ldap_uri": ["ldaps://ldap.example.com"], "search_base": "dc=example,dc=com", "pam_slurm_adopt": adopt}
    template = _network_template(directory=directory)
    rules = nf.rules({"net": template})
    login, compute, controllers = (_kind(template, k) for k in ("Login", "Compute", "Controllers"))
    assert nf.allowed(rules, login, compute, "tcp", (22, 22)) is adopt
    assert not nf.allowed(rules, controllers, compute, "tcp", (22, 22))
    assert nf.allowed(rules, login, compute, "tcp", (6818, 6818))  # slurmd from srun on login nodes, either way


def test_only_the_controllers_reach_their_own_file_system(assemblies: dict[str, Assembly]) -> None:
    """Slurm's state is on an EFS of the controllers (slurm_plugin/controller_state.py): its mount targets admit NFS
    from the controllers' group alone. Negative case: the same group admitting the compute nodes is reported."""
    assembly = _assembly(assemblies, "minimal")
    config = load(assembly.config)
    templates = _templates(assembly)
    _rules, roles, flows = _analyse(config, templates)
    assert roles["minimal/controller-state"].groups, "no mount target of the controllers' file system was found"
    assert nf.denied_flows(_rules, roles, [f for f in flows if f.destination == "minimal/controller-state"]) == []
    assert not {o for o in _openings(config, templates) if o[1] == "controller-state"}
    broken = copy.deepcopy(templates)
    network = broken["es-minimal-network"]["Resources"]
    compute, own = _group(network, "Compute"), _group(network, "ControllerState")
    network["ComputeToControllerState"] = _ingress(own, compute, "tcp", (2049, 2049))
    assert ("compute", "controller-state", "nfs") in _openings(config, broken) - KNOWN_OPENINGS
