"""The update-policy table: what editing each field of a deployed cluster's YAML does, decided from what it feeds.

A field feeds the config object only (the controllers apply it in place: `reconfigure`), a pool's launch template
(`drain-and-replace a pool`), the controllers' launch template or user data (`replace controllers`), a resource
property CloudFormation updates in place (`none`), or one that replaces a network, file system or database, or a
whole stack (`not allowed`). Rules are path patterns (cluster_config/config_paths.py); the most specific match wins
(`instance_types[0]` over `instance_types[]`). There is no catch-all: tests/unit/test_update_policy.py walks the model
and fails for a field no rule names, so a new field needs a decision here. `python -m elastic_slurm.update_docs`
prints the table as docs/updates.md.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum

from pydantic import BaseModel

from cluster_config.config_paths import (
    Path,
    expand_braces,
    format_path,
    generalize,
    matches,
    model_paths,
    parse_pattern,
)
from cluster_config.model import ElasticSlurmConfig


class Policy(IntEnum):
    """How disruptive applying a change is, least first (the worst of a diff is its max)."""

    NONE = 0
    RECONFIGURE = 1
    DRAIN_AND_REPLACE = 2
    REPLACE_LOGIN_NODES = 3
    REPLACE_CONTROLLERS = 4
    NOT_ALLOWED = 5

    @property
    def label(self) -> str:
        """The name printed after each change."""
        return LABELS[self]

    @property
    def meaning(self) -> str:
        """One line: what a deploy with this change does."""
        return MEANINGS[self]


LABELS = {
    Policy.NONE: "none",
    Policy.RECONFIGURE: "reconfigure",
    Policy.DRAIN_AND_REPLACE: "drain-and-replace a pool",
    Policy.REPLACE_LOGIN_NODES: "replace login nodes",
    Policy.REPLACE_CONTROLLERS: "replace controllers",
    Policy.NOT_ALLOWED: "not allowed",
}
MEANINGS = {
    Policy.NONE: "CloudFormation updates a resource in place; nothing running restarts.",
    Policy.RECONFIGURE: "the controllers' config sync applies it in place within about a minute "
    "(render, `scontrol reconfigure`, accounting objects, cluster manager restart); running jobs keep running.",
    Policy.DRAIN_AND_REPLACE: "nodes booted from now on get it (a new launch template version, or what nodes read at "
    "boot); running nodes keep the old one until they power down: drain them to roll it out now.",
    Policy.REPLACE_LOGIN_NODES: "the login pool's Auto Scaling group replaces its login nodes one at a time: shells and "
    "processes on them end (tell users first); jobs submitted from them keep running.",
    Policy.REPLACE_CONTROLLERS: "CloudFormation replaces or adds controller instances; slurmctld restarts from the "
    "state on the controllers' own file system, running jobs survive; login nodes are rolled onto the new controllers: plan a "
    "quiet moment.",
    Policy.NOT_ALLOWED: "cannot be changed in place (a network, file system, database or whole stack would be "
    "replaced or left behind): `cluster update` refuses it; create a new cluster instead.",
}


@dataclass(frozen=True)
class Rule:
    """Policy of the fields a pattern names, and why. `grows_only`: a smaller number is `not allowed`."""

    pattern: str
    policy: Policy
    reason: str
    grows_only: bool = False


_C = "clusters[]"
_POOL = f"{_C}.partitions[].pools[]"
_NETWORK = "{mode,vpc_cidr,availability_zones[],compute_subnet_prefix,vpc_id,subnets[],subnets[].subnet_id,"
_NETWORK += "subnets[].availability_zone,subnets[].cidr}"
_ACTIONS = "{on_node_start[],on_node_start[].script,on_node_start[].args[],on_node_configured[],"
_ACTIONS += "on_node_configured[].script,on_node_configured[].args[]}"
_FSX = f"{_C}.storage.{{fsx_lustre,fsx_ontap,fsx_openzfs}}"
_NONE, _RECONF, _DRAIN = Policy.NONE, Policy.RECONFIGURE, Policy.DRAIN_AND_REPLACE
_LOGIN, _CONTROLLERS, _NO = Policy.REPLACE_LOGIN_NODES, Policy.REPLACE_CONTROLLERS, Policy.NOT_ALLOWED
_TAGS = "tags change in place, launch templates carry none (a pool's placement group is re-created: its own line)"
_GRES = "rendered into gres.conf, which slurmctld sends every slurmd at `scontrol reconfigure` (configless)"

RULES: tuple[Rule, ...] = (
    # ---- a cluster as a whole: its name, region and account are in every stack and resource
    Rule(
        f"{_C}",
        _NO,
        "a cluster added or removed is a set of stacks created or left behind (`cdk deploy` never deletes a stack): "
        "use `cluster create` / `cluster delete`",
    ),
    Rule(f"{_C}.{{name,region,account_id}}", _NO, "named in every stack, resource and the accounting database"),
    # ---- network: subnets, VPC CIDR and AZs are create-only properties (the VPC and all in it would be replaced)
    Rule(f"{_C}.network", _NO, "switching create/import replaces the VPC and everything in it"),
    Rule(
        f"{_C}.network.{_NETWORK}",
        _NO,
        "create-only properties of the VPC and subnets: CloudFormation would replace the network and everything in it",
    ),
    Rule(
        f"{_C}.network.interface_endpoints",
        _NONE,
        "VPC endpoints are added or removed in place (AWS calls then go through them or the NAT gateway)",
    ),
    Rule(
        f"{_C}.remote_regions[]",
        _NO,
        "a region added or removed is a network and a region stack created or left "
        "behind, with peering and cross-region references",
    ),
    Rule(f"{_C}.remote_regions[].{{region,network}}", _NO, "the region's VPC and peering would be replaced"),
    Rule(f"{_C}.remote_regions[].network.{_NETWORK}", _NO, "create-only properties of the region's VPC and subnets"),
    Rule(f"{_C}.remote_regions[].network.interface_endpoints", _NONE, "VPC endpoints are added or removed in place"),
    # ---- storage (the controllers' StateSaveLocation is on a file system of their own: slurm_plugin/controller_state.py)
    Rule(f"{_C}.storage.efs", _NO, "the shared file system holds home directories and the node-names directory"),
    Rule(f"{_C}.storage.efs.mount_point", _NO, "the node-names directory and every node's fstab use it"),
    Rule(
        f"{_C}.storage.efs.{{throughput_mode,lifecycle_days,backup}}",
        _NONE,
        "EFS settings and the backup plan change in place",
    ),
    Rule(_FSX, _NO, "a file system created or deleted (scratch Lustre data is lost) and nodes mount at boot only"),
    Rule(f"{_FSX}.mount_point", _NO, "every node's fstab (and maybe the node-names directory) uses it"),
    Rule(
        f"{_C}.storage.fsx_lustre.{{deployment_type,s3_import_path}}",
        _NO,
        "replaces the Lustre file system (DeploymentType and ImportPath need replacement in CloudFormation)",
    ),
    Rule(f"{_FSX}.storage_capacity_gib", _NONE, "FSx grows storage in place; it cannot shrink", grows_only=True),
    Rule(f"{_C}.storage.fsx_lustre.per_unit_storage_throughput", _NONE, "updated in place by FSx"),
    Rule(f"{_C}.storage.{{fsx_ontap,fsx_openzfs}}.throughput_mbps", _NONE, "updated in place by FSx"),
    Rule(
        f"{_C}.storage.extra_mounts[]",
        _DRAIN,
        "nodes mount the mounts parameter at boot: running nodes and the "
        "controllers keep their old mounts until replaced",
    ),
    Rule(
        f"{_C}.storage.extra_mounts[].{{source,mount_point,fs_type,options}}",
        _DRAIN,
        "nodes read the mounts parameter at boot: running nodes and the controllers keep their old mounts until replaced",
    ),
    # ---- images: the launch templates resolve the AMI parameter at launch, so a new image never replaces anything
    Rule(
        f"{_C}.images.{{base_os,slurm_version,slurm_source,slurm_source.url,slurm_source.sha256}}",
        _NO,
        "every image is rebuilt, but a running controller keeps its AMI (resolved at launch) while new nodes boot "
        "the new one: a newer slurmd than slurmctld, or mixed OSes",
    ),
    Rule(f"{_C}.images.rebuild_schedule", _NONE, "the Image Builder pipelines' schedule changes in place"),
    # ---- controllers: their launch template (instance type, user data) is a create-only property of the instance
    Rule(
        f"{_C}.controller.instance_type",
        _CONTROLLERS,
        "a new controller launch template version replaces the controller instances",
    ),
    Rule(
        f"{_C}.controller.count",
        _CONTROLLERS,
        "adds or removes the backup controller (the primary stays); "
        "the SlurmctldHost change needs `systemctl restart slurmctld`",
    ),
    Rule(
        f"{_C}.controller.custom_actions.{_ACTIONS}",
        _CONTROLLERS,
        "in the controllers' user data: a new launch template version replaces them",
    ),
    Rule(
        f"{_C}.controller.security_groups[]",
        _CONTROLLERS,
        "on the controllers' launch template: a new version replaces them",
    ),
    Rule(
        f"{_C}.controller.exporter_per_user_series",
        _CONTROLLERS,
        "in the controllers' user data (the exporter's ES_EXPORTER_PER_USER_SERIES): a new launch template version "
        "replaces them",
    ),
    Rule(
        f"{_C}.iam_policies.{{controller[],compute[],login[]}}",
        _NONE,
        "managed policies are attached to the roles in place",
    ),
    # ---- the site's directory: an SSM parameter every node reads at boot (stacks/cluster.py, elastic-slurm-directory)
    Rule(
        f"{_C}.directory",
        _CONTROLLERS,
        "added or removed: every node's user data names (or stops naming) the directory parameter (login nodes and "
        "pools too: their launch templates change)",
    ),
    Rule(
        f"{_C}.directory.{{ldap_uri[],search_base,ldap_schema,bind_dn,bind_password_secret_arn,"
        "bind_password_kms_key_arn,tls_reqcert,domain_settings.<key>,controller_login_groups[]}",
        _DRAIN,
        "the directory parameter changes in place; nodes read it at boot: on controllers and login nodes run "
        "/opt/elastic-slurm/bin/elastic-slurm-directory (re-reads it, restarts sssd), drain pools to roll it out",
    ),
    Rule(
        f"{_C}.directory.pam_slurm_adopt",
        _DRAIN,
        "PrologFlags=Contain at the reconfigure and the login nodes' SSH rule in place, but a compute node sets up "
        "sshd's PAM from the directory parameter at boot: running nodes keep the old setting until replaced",
    ),
    # ---- login nodes: one Auto Scaling group per login pool (stacks/login_nodes.py)
    Rule(
        f"{_C}.login_nodes[]",
        _LOGIN,
        "added: a new Auto Scaling group launches its login nodes; removed: CloudFormation deletes the group and "
        "terminates them",
    ),
    Rule(
        f"{_C}.login_nodes[].count",
        _NONE,
        "the Auto Scaling group's size changes in place (lowering it terminates login nodes: their shells end)",
    ),
    Rule(
        f"{_C}.login_nodes[].{{name,instance_type,security_groups[]}}",
        _LOGIN,
        "in the login pool's launch template (the name: its construct ids): a rolling update replaces the login nodes",
    ),
    Rule(
        f"{_C}.login_nodes[].custom_actions.{_ACTIONS}",
        _LOGIN,
        "in the login pool's launch template user data: a rolling update replaces the login nodes",
    ),
    Rule(f"{_C}.ssh_allowed_cidrs[]", _NONE, "security group rules change in place"),
    Rule(
        f"{_C}.ssh_allow_public_cidrs",
        _NONE,
        "checked by `validate` only: the security group rules follow ssh_allowed_cidrs, changed in place",
    ),
    Rule(f"{_C}.tags.<key>", _NONE, _TAGS),
    Rule(
        f"{_C}.{{budget,budget.monthly_limit_usd,budget.alert_emails[],budget.alert_at_percent[],budget.alert_on}}",
        _NONE,
        "the AWS Budgets budget in the cluster stack is created, updated or replaced (a new alert list: its name "
        "carries their digest), nothing running restarts",
    ),
    Rule("tags.<key>", _NONE, _TAGS),
    # ---- partitions and pools: the config object only, except what a pool's launch template holds
    Rule(
        f"{_C}.partitions[]",
        _RECONF,
        "added: at the reconfigure; removed: its nodes leave slurm.conf (drain them "
        "first; the manager terminates instances whose node is gone)",
    ),
    Rule(
        f"{_C}.partitions[].{{name,default,max_time,priority_tier,interactive,share_nodes_of[],slurm_settings.<key>}}",
        _RECONF,
        "rendered into slurm.conf",
    ),
    Rule(
        f"{_C}.partitions[].allocation",
        _RECONF,
        "rendered into the partition's line of slurm.conf: jobs started after the reconfigure get the new allocation; "
        "running jobs keep the nodes, cores and memory they were given",
    ),
    Rule(
        _POOL,
        _RECONF,
        "added: its launch template is created, nodes appear at the reconfigure; removed: drain its "
        "nodes first (the manager terminates instances whose node is gone)",
    ),
    Rule(
        f"{_POOL}.{{name,purchase_option,availability_zones[],min_nodes,spread_jobs_across_azs,features[],weight}}",
        _RECONF,
        "read by the plugin and rendered into slurm.conf at the reconfigure",
    ),
    Rule(f"{_POOL}.max_nodes", _RECONF, "node names at the reconfigure; when lowering, drain the nodes that go first"),
    Rule(f"{_POOL}.slurm_settings.<key>", _RECONF, "rendered into the pool's NodeName line"),
    Rule(f"{_POOL}.gres_settings.<key>", _RECONF, _GRES),
    Rule(
        f"{_POOL}.disable_hyperthreading",
        _DRAIN,
        "the pool's launch template user data (ES_SMT_OFF) and its CPUs in slurm.conf: running nodes keep their "
        "threads; turning it off while nodes run has them register fewer CPUs than slurm.conf then says, and Slurm "
        "drains them (drain the pool first)",
    ),
    Rule(
        f"{_POOL}.instance_types[]",
        _RECONF,
        "the plugin picks the type per launch; the node size (smallest type) is rendered into slurm.conf",
    ),
    Rule(
        f"{_POOL}.instance_types[0]",
        _DRAIN,
        "the pool's launch template holds the first type and its architecture's AMI parameter",
    ),
    Rule(
        f"{_POOL}.network_topology",
        _RECONF,
        "TopologyPlugin and topology.conf are rendered into /etc/slurm, the manager reads it from its manifest",
    ),
    Rule(
        f"{_POOL}.{{placement_group,gpu}}",
        _DRAIN,
        "the pool's launch template holds the placement group, the GPU image flavor and the root volume size",
    ),
    Rule(
        f"{_POOL}.efa",
        _DRAIN,
        "the pool's launch template holds its EFA network interfaces and the manifest tells the plugin to launch it "
        "with CreateFleet: running nodes keep the interfaces they booted with (docs/efa.md)",
    ),
    Rule(
        f"{_POOL}.{{ami_id,security_groups[]}}",
        _DRAIN,
        "the pool's launch template holds its AMI and security groups",
    ),
    Rule(
        f"{_POOL}.{{capacity_reservation,capacity_reservation.id,capacity_reservation.capacity_block}}",
        _RECONF,
        "read by the plugin at each launch (its manifest)",
    ),
    Rule(f"{_POOL}.custom_actions.{_ACTIONS}", _DRAIN, "in the pool's launch template user data"),
    Rule(f"{_POOL}.gpu.{{health_check,nccl_min_busbw_gbps}}", _RECONF, "read by the health checks from the config"),
    Rule(
        f"{_C}.{{preemption.type,preemption.mode,health_checks.interval}}",
        _RECONF,
        "rendered into slurm.conf",
    ),
    Rule(
        f"{_C}.preemption.grace_time",
        _RECONF,
        "rendered into slurm.conf (the partitions' GraceTime); with type qos: the preempted QOS's GraceTime, set by "
        "slurm-accounting-apply at the reconfigure",
    ),
    Rule(f"{_C}.health_checks.impaired_threshold", _RECONF, "read by the cluster manager, restarted by the apply"),
    Rule(
        f"{_C}.slurm.{{suspend_time,suspend_timeout,resume_timeout,capacity_cooldown,boot_failure_limit}}",
        _RECONF,
        "rendered into slurm.conf and the plugin's manifest",
    ),
    Rule(
        f"{_C}.slurm.early_start",
        _RECONF,
        "PrologSlurmctld in slurm.conf: jobs allocated after the reconfigure follow the new setting; a job already "
        "waiting in its prolog waits on (bounded by resume_timeout)",
    ),
    Rule(f"{_C}.slurm_settings.<key>", _RECONF, "rendered into slurm.conf"),
    Rule(
        f"{_C}.rest_api.enabled",
        _RECONF,
        "rendered into slurm.conf (AuthAltTypes) and /etc/slurm/rest-api.env: the config sync reconfigures and "
        "starts or stops slurmrestd and the web page; the security group rule changes in place",
    ),
    Rule(
        f"{_C}.rest_api.{{port,web_port}}",
        _RECONF,
        "rendered into /etc/slurm/rest-api.env: the config sync restarts slurmrestd and the web page (a new "
        "web_port also changes the security group rule in place)",
    ),
    Rule(f"{_C}.rest_api.allowed_cidrs[]", _NONE, "security group rules change in place"),
    Rule(
        f"{_C}.rest_api.max_token_lifespan",
        _RECONF,
        "rendered into slurm.conf (AuthAltParameters): tokens issued before keep their lifespan",
    ),
    Rule(f"{_C}.gres_settings.<key>", _RECONF, _GRES),
    Rule(
        f"{_C}.nss_slurm",
        _DRAIN,
        "slurm.conf's LaunchParameters change at the reconfigure, but a node writes its nsswitch.conf and "
        "nss_slurm.conf at boot: running nodes keep the old lookup until replaced",
    ),
    Rule(
        f"{_C}.cgroup_settings.<key>",
        _DRAIN,
        "cgroup.conf is read when slurmd starts: running nodes keep the old settings until replaced",
    ),
    # ---- shared by the clusters of the file
    Rule(
        "accounting.{mode,engine}",
        _NO,
        "creates or replaces the accounting database (its data stays in the old one's final snapshot)",
    ),
    Rule(
        "accounting.host_cluster",
        _NO,
        "moves the database and slurmdbd to another cluster (the default is the "
        "first cluster, so reordering clusters moves it too)",
    ),
    Rule(
        "accounting.{instance_class,deletion_protection}",
        _NONE,
        "RDS modifies the instance in place (a class "
        "change restarts it for minutes; slurmctld queues accounting records meanwhile)",
    ),
    Rule(
        "accounting.slurmdbd_settings.<key>",
        _RECONF,
        "the slurmdbd host's config sync re-renders slurmdbd.conf and restarts slurmdbd when it changed (slurmctld "
        "queues accounting records meanwhile; a slurmdbd that does not start again gets the previous file back)",
    ),
    Rule(
        "accounting.{endpoint,secret_arn}",
        _CONTROLLERS,
        "in the controllers' user data (slurmdbd.conf is "
        "rendered at boot): a new launch template version replaces them",
    ),
    Rule("licenses[]", _RECONF, "applied with sacctmgr and the license sync timer at the reconfigure"),
    Rule(
        "licenses[].{name,count,server_type,server,feature,sync_schedule,clusters.<key>}",
        _RECONF,
        "applied with sacctmgr and the license sync timer at the reconfigure",
    ),
    Rule(
        "federation", _NO, "creates or removes the peering stacks and the shared munge key (in every node's user data)"
    ),
    Rule("federation.{name,clusters[]}", _NO, "peering stacks, the munge key owner and slurmdbd's federation change"),
    Rule("federation.cluster_features.<key>[]", _RECONF, "applied with sacctmgr at the reconfigure"),
    Rule(
        "{accounts[],qos[]}",
        _RECONF,
        "applied with sacctmgr at the reconfigure (removed ones are left in the database)",
    ),
    Rule("accounts[].{name,description,organization,parent,users[]}", _RECONF, "applied with sacctmgr"),
    Rule("qos[].{name,description,priority,preempt[],preempt_mode}", _RECONF, "applied with sacctmgr"),
    Rule(
        "onprem_clusters[]{,.name,.burst_to[],.controller_cidrs[],.submit_cidrs[]}",
        _RECONF,
        "registered with sacctmgr at the reconfigure (a removed one is left in the database); the security-group "
        "rules change in place",
    ),
)


@dataclass(frozen=True)
class CompiledRule:
    """One expanded pattern of a rule."""

    pattern: Path
    rule: Rule

    @property
    def specificity(self) -> int:
        """Literal indexes beat `[]` (`instance_types[0]` over `instance_types[]`)."""
        return sum(isinstance(p, int) for p in self.pattern)


def compiled(rules: tuple[Rule, ...] = RULES) -> list[CompiledRule]:
    """Every rule's patterns, brace groups expanded."""
    return [CompiledRule(parse_pattern(text), rule) for rule in rules for text in expand_braces(rule.pattern)]


_COMPILED = compiled()
MISSING_RULE = Rule(
    "", Policy.NOT_ALLOWED, "no update policy is defined for this field (cluster_config/update_policy.py)"
)


def rule_for(path: Path) -> Rule:
    """The most specific rule naming a concrete path (or pattern); MISSING_RULE when none does."""
    found = [c for c in _COMPILED if c.pattern == path or matches(c.pattern, path)]
    if not found:
        return MISSING_RULE
    return max(found, key=lambda c: c.specificity).rule


def unpoliced(model: type[BaseModel] = ElasticSlurmConfig) -> list[str]:
    """The paths of `model` no rule names (each needs a decision in RULES)."""
    return [format_path(p) for p in model_paths(model) if rule_for(p) is MISSING_RULE]


def stale_patterns(model: type[BaseModel] = ElasticSlurmConfig) -> list[str]:
    """Rule patterns naming no path of `model` (a renamed or removed field)."""
    known = set(model_paths(model))
    return [format_path(c.pattern) for c in _COMPILED if generalize(c.pattern) not in known]
