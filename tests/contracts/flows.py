"""Network flows ↔ security-group rules, both sides derived from our own outputs (pure: no CDK, no AWS).

The flows come from what the cluster really runs: the ports in the slurm.conf the real render writes for each
cluster (SlurmctldPort, SlurmdPort, SrunPortRange, AccountingStoragePort; absent = Slurm's defaults), the storage
kinds and accounting of the config, the pools with EFA (cluster_config/efa.pool_uses_efa), remote regions and
federation peers. Each flow is (source role, destination role, protocol, port range).

The rules come from the synthesized templates: every security group with its inline and standalone rules, and which
groups each role's resources carry (launch templates by their role tag, EFS mount targets, FSx, RDS). Group ids are
resolved across stacks (`Fn::GetAtt`, `Ref`, `Fn::ImportValue` through the exporting stack's outputs).

A flow is allowed when a group of the destination has an ingress rule for it whose peer is a group of the source or
a CIDR containing the source's address ranges, and a group of the source has a matching egress rule (EFA: a rule to
a group of the destination itself — an address rule does not carry EFA traffic). `openings` lists what the rules
allow between roles on the ports the cluster listens on that no flow needs.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from cluster_config import Cluster, ElasticSlurmConfig
from cluster_config.deploy_checks import address_ranges
from cluster_config.efa import pool_uses_efa
from slurm_plugin.exporter import EXPORTER_PORT
from slurm_plugin.render.base import BaseSettings, render_base_conf
from stacks.accounting import DB_PORT
from stacks.naming import TAG_ROLE

# Slurm's own defaults when slurm.conf does not set the port (slurm.conf(5): SlurmctldPort, SlurmdPort,
# AccountingStoragePort)
SLURM_DEFAULT_PORTS = {"SlurmctldPort": 6817, "SlurmdPort": 6818, "AccountingStoragePort": 6819}
ALL = "-1"
ANYWHERE = "0.0.0.0/0"
CLIENT_KINDS = ("controller", "compute", "login")
CONTROLLER_STATE_EFS = "ControllerState"  # the construct id of the controllers' own EFS (stacks/storage.py)
# the roles that run user or daemon processes, i.e. that can open connections (`openings` looks from these and from
# external sources; the `efa` role is a subset of `compute`)
HOST_KINDS = ("controller", "compute", "login", "remote-compute")


@dataclass(frozen=True)
class Flow:
    """Traffic the cluster needs: `source` role → `destination` role on `protocol` ports `ports` (inclusive)."""

    source: str
    destination: str
    protocol: str  # "tcp", "udp" or "-1" (all)
    ports: tuple[int, int]
    label: str
    group_egress: bool = False  # the source's egress must name the destination's group (EFA)


@dataclass(frozen=True)
class Rule:
    """One security-group rule: on `group`, `direction` "in" or "out", to/from a group or a CIDR."""

    group: str
    direction: str
    protocol: str
    ports: tuple[int, int]
    peer_group: str | None = None
    cidr: str | None = None


@dataclass
class Role:
    """Who sends or receives: the groups its resources carry and the address ranges it sits in."""

    name: str
    groups: set[str] = field(default_factory=set)
    cidrs: tuple[str, ...] = ()
    external: bool = False  # outside our templates (its egress is not ours to check)


# ------------------------------------------------------------------ flows from the config and the rendered configs
def rendered_ports(config: ElasticSlurmConfig, cluster: Cluster) -> dict[str, tuple[int, int]]:
    """The Slurm ports of `cluster` as its real slurm.conf renders them."""
    hosts = tuple(f"{cluster.name}-ctl{index}" for index in range(cluster.controller.count))
    dbd_host = hosts[0] if config.accounting.mode != "none" else None
    settings = BaseSettings(controller_hosts=hosts, slurmdbd_host=dbd_host, state_save_location="/state")
    conf = dict(
        line.split("=", 1)
        for line in render_base_conf(config, cluster.name, settings).splitlines()
        if "=" in line and not line.startswith("#")
    )
    ports = {key: (int(conf.get(key, default)),) * 2 for key, default in SLURM_DEFAULT_PORTS.items()}
    low, high = conf["SrunPortRange"].split("-")
    return {
        "slurmctld": ports["SlurmctldPort"],
        "slurmd": ports["SlurmdPort"],
        "slurmdbd": ports["AccountingStoragePort"],
        "srun": (int(low), int(high)),
    }


def _storage_ports(cluster: Cluster) -> list[tuple[str, str, tuple[int, int], bool]]:
    """(label, protocol, ports, both ways) of the shared file systems the clients mount."""
    storage = cluster.storage
    ports: list[tuple[str, str, tuple[int, int], bool]] = []
    if storage.efs or storage.fsx_ontap or storage.fsx_openzfs:
        ports.append(("nfs", "tcp", (2049, 2049), False))
    if storage.fsx_ontap or storage.fsx_openzfs:  # NFSv3: portmapper, mountd/nlm, NFS over UDP
        ports += [("portmapper", proto, (111, 111), False) for proto in ("tcp", "udp")]
        ports += [("mountd", proto, (20001, 20003), False) for proto in ("tcp", "udp")]
        ports.append(("nfs-udp", "udp", (2049, 2049), False))
    if storage.fsx_lustre:  # clients ↔ file servers both ways (FSx for Lustre User Guide, client rules)
        ports += [("lustre", "tcp", (988, 988), True), ("lustre", "tcp", (1018, 1023), True)]
    return ports


def cluster_flows(config: ElasticSlurmConfig, cluster: Cluster, roles: Mapping[str, Role]) -> list[Flow]:
    """Every flow of `cluster` whose roles exist in `roles` (role names are `{cluster}/{kind}`)."""
    name = cluster.name
    ctl, cmp, login = f"{name}/controller", f"{name}/compute", f"{name}/login"
    port = rendered_ports(config, cluster)
    wanted: list[Flow] = [
        Flow(cmp, ctl, "tcp", port["slurmctld"], "slurmctld"),
        Flow(ctl, cmp, "tcp", port["slurmd"], "slurmd"),
        Flow(cmp, cmp, "tcp", port["slurmd"], "slurmd"),  # message fan-out between slurmd
        Flow(cmp, cmp, "tcp", port["srun"], "srun"),  # srun inside a batch job
        Flow(cmp, cmp, ALL, (0, 65535), "mpi"),  # MPI/NCCL between the nodes of a job: any port
        Flow(ctl, cmp, "tcp", port["srun"], "srun"),  # slurmctld's messages to an srun inside a batch job
        Flow(ctl, ctl, "tcp", port["slurmctld"], "slurmctld"),  # backup ↔ primary
        Flow(login, ctl, "tcp", port["slurmctld"], "slurmctld"),  # sackd and the client commands
        Flow(login, cmp, "tcp", port["slurmd"], "slurmd"),  # srun/salloc from the login node
        Flow(cmp, login, "tcp", port["srun"], "srun"),
        Flow(ctl, login, "tcp", port["srun"], "srun"),
        Flow(ctl, login, "tcp", port["slurmd"], "sackd"),  # slurmctld pushes new configs to sackd (sackd(8) --port)
    ]
    if cluster.directory is not None and cluster.directory.pam_slurm_adopt:  # users SSH into their jobs' nodes
        wanted.append(Flow(login, cmp, "tcp", (22, 22), "ssh"))
    if config.accounting.mode != "none":
        wanted.append(Flow(ctl, ctl, "tcp", port["slurmdbd"], "slurmdbd"))  # slurmctld → slurmdbd (controller 0)
        if name == config.accounting_host:  # sacct, sreport on login nodes (slurmdbd of the accounting host)
            wanted.append(Flow(login, ctl, "tcp", port["slurmdbd"], "slurmdbd"))
        wanted.append(Flow(ctl, f"{name}/database", "tcp", (DB_PORT, DB_PORT), "database"))
    # the controllers' own file system (Slurm's state, slurm_plugin/controller_state.py): the controllers only
    wanted.append(Flow(ctl, f"{name}/controller-state", "tcp", (2049, 2049), "nfs"))
    for label, proto, ports, both in _storage_ports(cluster):
        for kind in CLIENT_KINDS:
            wanted.append(Flow(f"{name}/{kind}", f"{name}/storage", proto, ports, label))
            if both:
                wanted.append(Flow(f"{name}/storage", f"{name}/{kind}", proto, ports, label))
    if any(pool_uses_efa(pool) for partition in cluster.partitions for pool in partition.pools):
        wanted.append(Flow(f"{name}/efa", f"{name}/efa", ALL, (0, 65535), "efa", group_egress=True))
    remote = f"{name}/remote-compute"
    wanted += [
        Flow(remote, ctl, "tcp", port["slurmctld"], "slurmctld"),
        Flow(ctl, remote, "tcp", port["slurmd"], "slurmd"),
        Flow(ctl, remote, "tcp", port["srun"], "srun"),
        Flow(login, remote, "tcp", port["slurmd"], "slurmd"),
        Flow(remote, login, "tcp", port["srun"], "srun"),
        Flow(remote, remote, ALL, (0, 65535), "mpi"),
        Flow(remote, f"{name}/storage", "tcp", (2049, 2049), "nfs"),
        # the operator's Prometheus/ADOT host carries the monitoring group (docs/observability.md)
        Flow(f"{name}/monitoring", ctl, "tcp", (EXPORTER_PORT, EXPORTER_PORT), "exporter"),
    ]
    for cidr in cluster.ssh_allowed_cidrs:
        wanted += [Flow(f"ssh:{cidr}", ctl, "tcp", (22, 22), "ssh"), Flow(f"ssh:{cidr}", login, "tcp", (22, 22), "ssh")]
    if cluster.rest_api.enabled:
        web = (cluster.rest_api.web_port, cluster.rest_api.web_port)
        wanted += [Flow(f"web:{cidr}", ctl, "tcp", web, "web") for cidr in cluster.rest_api.allowed_cidrs]
    return [f for f in wanted if f.source in roles and f.destination in roles]


def federation_flows(config: ElasticSlurmConfig, roles: Mapping[str, Role]) -> list[Flow]:
    """Between federation members: every slurmctld reaches every other, and the accounting host's slurmdbd."""
    if config.federation is None:
        return []
    members = list(config.federation.clusters)
    host = config.accounting.host_cluster or members[0]
    flows = []
    for source in members:
        for target in members:
            if source == target:
                continue
            port = rendered_ports(config, config.cluster(target))
            flows.append(Flow(f"{source}/controller", f"{target}/controller", "tcp", port["slurmctld"], "slurmctld"))
            if target == host and config.accounting.mode != "none":
                flows.append(Flow(f"{source}/controller", f"{target}/controller", "tcp", port["slurmdbd"], "slurmdbd"))
            # interactive jobs: srun/salloc on the source's login nodes runs steps on the target's compute nodes,
            # whose slurmstepd and slurmctld call the srun back (federation.shtml: every compute node reachable from
            # every submission host)
            back = rendered_ports(config, config.cluster(source))
            flows.append(Flow(f"{source}/login", f"{target}/compute", "tcp", port["slurmd"], "slurmd"))
            flows.append(Flow(f"{target}/controller", f"{source}/login", "tcp", back["srun"], "srun"))
            flows.append(Flow(f"{target}/compute", f"{source}/login", "tcp", back["srun"], "srun"))
    return [f for f in flows if f.source in roles and f.destination in roles]


def onprem_flows(config: ElasticSlurmConfig, roles: Mapping[str, Role]) -> list[Flow]:
    """From each address range of each on-prem site (`onprem:{site}:{cidr}`, its controller and submit hosts): the
    slurmctld of every cluster it bursts to, and slurmdbd on the accounting host's controllers
    (docs/onprem-burst.md)."""
    flows = []
    for site in config.onprem_clusters:
        for cidr in site.cidrs:
            source = f"onprem:{site.name}:{cidr}"
            for name in site.burst_to:
                port = rendered_ports(config, config.cluster(name))
                flows.append(Flow(source, f"{name}/controller", "tcp", port["slurmctld"], "slurmctld"))
            if config.accounting.mode != "none":
                host = config.accounting_host
                port = rendered_ports(config, config.cluster(host))
                flows.append(Flow(source, f"{host}/controller", "tcp", port["slurmdbd"], "slurmdbd"))
    return [f for f in flows if f.source in roles and f.destination in roles]


def listeners(config: ElasticSlurmConfig, cluster: Cluster) -> dict[str, dict[str, tuple[str, tuple[int, int]]]]:
    """Destination kind → label → (protocol, ports): the services each kind of host listens on (what `openings`
    looks at)."""
    port = rendered_ports(config, cluster)
    slurm = {label: ("tcp", port[label]) for label in ("slurmctld", "slurmd", "slurmdbd", "srun")}
    controller = {k: slurm[k] for k in ("slurmctld", "slurmdbd")}
    controller |= {"ssh": ("tcp", (22, 22)), "exporter": ("tcp", (EXPORTER_PORT, EXPORTER_PORT))}
    if cluster.rest_api.enabled:
        controller["web"] = ("tcp", (cluster.rest_api.web_port, cluster.rest_api.web_port))
    storage = {f"{label}/{proto}/{ports[0]}": (proto, ports) for label, proto, ports, _ in _storage_ports(cluster)}
    return {
        "controller": controller,
        "compute": {k: slurm[k] for k in ("slurmd", "srun")} | {"ssh": ("tcp", (22, 22))},
        "remote-compute": {k: slurm[k] for k in ("slurmd", "srun")},
        "login": {"ssh": ("tcp", (22, 22)), "srun": slurm["srun"], "sackd": slurm["slurmd"]},
        "database": {"database": ("tcp", (DB_PORT, DB_PORT))},
        "storage": storage,
        "controller-state": {"nfs": ("tcp", (2049, 2049))},
    }


# ------------------------------------------------------------------ rules and roles from the templates
def _exports(templates: Mapping[str, dict[str, Any]]) -> dict[str, tuple[str, Any]]:
    found = {}
    for stack, template in templates.items():
        for output in template.get("Outputs", {}).values():
            name = output.get("Export", {}).get("Name")
            if isinstance(name, str):
                found[name] = (stack, output["Value"])
    return found


def group_id(value: Any, stack: str, exports: Mapping[str, tuple[str, Any]]) -> str | None:
    """A security group reference as `stack/LogicalId` (or the literal `sg-...`); None when it is not one."""
    if isinstance(value, str):
        return value if value.startswith("sg-") else None
    if not isinstance(value, dict):
        return None
    if "Fn::GetAtt" in value and value["Fn::GetAtt"][1] == "GroupId":
        return f"{stack}/{value['Fn::GetAtt'][0]}"
    if "Ref" in value:
        return f"{stack}/{value['Ref']}"
    if "Fn::ImportValue" in value and value["Fn::ImportValue"] in exports:
        origin, inner = exports[value["Fn::ImportValue"]]
        return group_id(inner, origin, exports)
    return None


def _ports(raw: Mapping[str, Any]) -> tuple[str, tuple[int, int]]:
    proto = str(raw.get("IpProtocol", ALL)).lower()
    proto = {"6": "tcp", "17": "udp"}.get(proto, proto)
    if proto == ALL:
        return ALL, (0, 65535)
    return proto, (int(raw.get("FromPort", 0)), int(raw.get("ToPort", 65535)))


def _rule(group: str, direction: str, raw: Mapping[str, Any], stack: str, exports: Any) -> Rule:
    proto, ports = _ports(raw)
    peer_key = "SourceSecurityGroupId" if direction == "in" else "DestinationSecurityGroupId"
    peer = group_id(raw.get(peer_key), stack, exports) if peer_key in raw else None
    cidr = raw.get("CidrIp") or raw.get("CidrIpv6")
    return Rule(group, direction, proto, ports, peer, cidr if isinstance(cidr, str) else None)


def rules(templates: Mapping[str, dict[str, Any]]) -> list[Rule]:
    """Every security-group rule of every template (inline and standalone)."""
    exports = _exports(templates)
    found = []
    for stack, template in templates.items():
        for logical, resource in template.get("Resources", {}).items():
            kind, props = resource["Type"], resource.get("Properties", {})
            if kind == "AWS::EC2::SecurityGroup":
                group = f"{stack}/{logical}"
                found += [_rule(group, "in", r, stack, exports) for r in props.get("SecurityGroupIngress", [])]
                found += [_rule(group, "out", r, stack, exports) for r in props.get("SecurityGroupEgress", [])]
            elif kind in ("AWS::EC2::SecurityGroupIngress", "AWS::EC2::SecurityGroupEgress"):
                target = group_id(props["GroupId"], stack, exports)
                if target is not None:
                    found.append(_rule(target, "in" if kind.endswith("Ingress") else "out", props, stack, exports))
    return found


def _tag(props: Mapping[str, Any], key: str) -> str | None:
    for spec in props.get("TagSpecifications", []):
        for tag in spec.get("Tags", []):
            if tag["Key"] == key:
                return str(tag["Value"])
    return None


def _role_tag(resource: Mapping[str, Any]) -> str | None:
    tags = resource.get("Properties", {}).get("Tags", [])
    return next((str(t["Value"]) for t in tags if t.get("Key") == TAG_ROLE), None)


def _member_groups(kind: str, props: Mapping[str, Any]) -> tuple[str | None, list[Any], list[Any]]:
    """(role kind, every group reference, groups on every EFA interface) of one resource."""
    if kind == "AWS::EC2::LaunchTemplate":
        data = props.get("LaunchTemplateData", {})
        interfaces = data.get("NetworkInterfaces", [])
        groups = list(data.get("SecurityGroupIds", [])) + [g for i in interfaces for g in i.get("Groups", [])]
        efa = [i.get("Groups", []) for i in interfaces if str(i.get("InterfaceType", "")).startswith("efa")]
        common = [g for g in efa[0] if all(g in other for other in efa)] if efa else []
        return _tag(props, TAG_ROLE), groups, common
    if kind == "AWS::EFS::MountTarget":  # the controllers' own file system is a kind of its own
        file_system = props.get("FileSystemId", {})
        own = isinstance(file_system, dict) and str(file_system.get("Ref", "")).startswith(CONTROLLER_STATE_EFS)
        return "controller-state" if own else "storage", list(props.get("SecurityGroups", [])), []
    if kind == "AWS::FSx::FileSystem":
        return "storage", list(props.get("SecurityGroupIds", [])), []
    if kind == "AWS::RDS::DBCluster":
        return "database", list(props.get("VpcSecurityGroupIds", [])), []
    if kind == "AWS::RDS::DBInstance":  # an Aurora instance takes its cluster's groups
        return "database", list(props.get("VPCSecurityGroups", [])), []
    return None, [], []


def roles(
    config: ElasticSlurmConfig, templates: Mapping[str, dict[str, Any]], stack_cluster: Mapping[str, str]
) -> dict[str, Role]:
    """`{cluster}/{kind}` → Role from the templates (`stack_cluster`: stack name → cluster name), plus the external
    sources the config names (SSH and web clients) and the whole Internet."""
    exports = _exports(templates)
    found: dict[str, Role] = {}
    for stack, template in templates.items():
        cluster = stack_cluster.get(stack)
        if cluster is None:
            continue
        remote = stack.startswith(f"es-{cluster}-region-")
        for logical, resource in template.get("Resources", {}).items():
            # the monitoring group: no host of ours carries it (the operator's scraper does; its egress is not ours)
            if (
                resource["Type"] == "AWS::EC2::SecurityGroup"
                and _role_tag(resource) == "monitoring"
                and stack == f"es-{cluster}-network"
            ):
                role = found.setdefault(f"{cluster}/monitoring", Role(f"{cluster}/monitoring", external=True))
                role.groups.add(f"{stack}/{logical}")
        home_cidrs = tuple(str(r) for r in address_ranges(config.cluster(cluster).network))
        for resource in template.get("Resources", {}).values():
            kind, groups, efa = _member_groups(resource["Type"], resource.get("Properties", {}))
            if kind is None:
                continue
            if remote and kind == "compute":
                kind = "remote-compute"
            cidrs = _remote_cidrs(config, cluster, stack) if remote else home_cidrs
            role = found.setdefault(f"{cluster}/{kind}", Role(f"{cluster}/{kind}", cidrs=cidrs))
            role.groups |= {g for g in (group_id(v, stack, exports) for v in groups) if g}
            if efa:
                efa_role = found.setdefault(f"{cluster}/efa", Role(f"{cluster}/efa", cidrs=cidrs))
                efa_role.groups |= {g for g in (group_id(v, stack, exports) for v in efa) if g}
    for member in config.clusters:
        for cidr in member.ssh_allowed_cidrs:
            found[f"ssh:{cidr}"] = Role(f"ssh:{cidr}", cidrs=(cidr,), external=True)
        for cidr in member.rest_api.allowed_cidrs if member.rest_api.enabled else []:
            found[f"web:{cidr}"] = Role(f"web:{cidr}", cidrs=(cidr,), external=True)
    for site in config.onprem_clusters:
        for cidr in site.cidrs:
            found[f"onprem:{site.name}:{cidr}"] = Role(f"onprem:{site.name}:{cidr}", cidrs=(cidr,), external=True)
    found["internet"] = Role("internet", cidrs=(ANYWHERE,), external=True)
    return found


def _remote_cidrs(config: ElasticSlurmConfig, cluster: str, stack: str) -> tuple[str, ...]:
    for remote in config.cluster(cluster).remote_regions:
        if stack == f"es-{cluster}-region-{remote.region}":
            return tuple(str(r) for r in address_ranges(remote.network))
    return ()


# ------------------------------------------------------------------ the check
def _covers(rule: Rule, protocol: str, ports: tuple[int, int]) -> bool:
    if rule.protocol != ALL and rule.protocol != protocol:
        return False
    return rule.ports[0] <= ports[0] and ports[1] <= rule.ports[1]


def _cidr_holds(rule_cidr: str, cidrs: Iterable[str]) -> bool:
    outer = ipaddress.ip_network(rule_cidr)
    inner = [ipaddress.ip_network(c) for c in cidrs]
    return bool(inner) and all(c.version == outer.version and c.subnet_of(outer) for c in inner)  # type: ignore[arg-type]


def _admits(rule: Rule, peer: Role, by_group_only: bool = False) -> bool:
    if rule.peer_group is not None and rule.peer_group in peer.groups:
        return True
    return not by_group_only and rule.cidr is not None and _cidr_holds(rule.cidr, peer.cidrs)


def allowed(
    all_rules: list[Rule], src: Role, dst: Role, protocol: str, ports: tuple[int, int], group_egress: bool = False
) -> bool:
    """Whether the rules let `src` reach `dst` on `protocol` `ports` (ingress at dst, egress at src)."""
    ingress = any(
        r.direction == "in" and r.group in dst.groups and _covers(r, protocol, ports) and _admits(r, src)
        for r in all_rules
    )
    if src.external:
        return ingress
    egress = any(
        r.direction == "out"
        and r.group in src.groups
        and _covers(r, protocol, ports)
        and _admits(r, dst, by_group_only=group_egress)
        for r in all_rules
    )
    return ingress and egress


def denied_flows(all_rules: list[Rule], found_roles: Mapping[str, Role], flows: Iterable[Flow]) -> list[Flow]:
    """The flows the rules do not allow."""
    return [
        f
        for f in flows
        if not allowed(
            all_rules, found_roles[f.source], found_roles[f.destination], f.protocol, f.ports, f.group_egress
        )
    ]


def kind_of(role: str) -> str:
    """A role's name without its cluster (`east/compute` → `compute`; external roles keep their name's head)."""
    return re.sub(r"^[^/:]+/", "", role).split(":")[0]


def openings(
    all_rules: list[Rule],
    found_roles: Mapping[str, Role],
    flows: Iterable[Flow],
    ports: Mapping[str, Mapping[str, Mapping[str, tuple[str, tuple[int, int]]]]],
) -> set[tuple[str, str, str]]:
    """(source kind, destination kind, listener label) the rules allow on a listener's ports that no flow needs;
    `ports`: cluster → `listeners` of that cluster."""
    needed = {(f.source, f.destination, f.protocol, f.ports) for f in flows}
    needed_all = {(f.source, f.destination) for f in flows if f.protocol == ALL}
    found = set()
    sources = [r for r in found_roles.values() if r.external or kind_of(r.name) in HOST_KINDS]
    for src in sources:
        for dst in found_roles.values():
            if dst.external or (src.name, dst.name) in needed_all:
                continue
            cluster = dst.name.split("/")[0]
            for label, (proto, span) in ports.get(cluster, {}).get(kind_of(dst.name), {}).items():
                if (src.name, dst.name, proto, span) in needed:
                    continue
                if allowed(all_rules, src, dst, proto, span):
                    found.add((kind_of(src.name), kind_of(dst.name), label))
    return found
