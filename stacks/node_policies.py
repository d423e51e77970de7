"""What the controller and compute instances read and write besides EC2 (munge key, parameters, logs, file systems,
the config object, the database secret, the events queue, the alert topic, the exporter's metrics), as IAM policy data.

The cluster stack attaches exactly these statements (with CDK tokens for the ARNs) in place of CDK's `grant*`
helpers, and the local cloud installs the same statements (with the emulated resources' ARNs) on the IAM principals
its controller and instances run as (localcloud/aws/iam.py): what the tests enforce is what the roles hold.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import PurePosixPath

from cluster_config.model import Cluster, Directory
from slurm_plugin.exporter.cloudwatch import NAMESPACE as METRICS_NAMESPACE
from slurm_plugin.log_shipping import SHIPPED_LOGS
from stacks.iam_policies import ArnScope, Statement, statement
from stacks.naming import log_group_name, munge_secret_name

# EFS client actions (Service Authorization Reference, Amazon Elastic File System: ClientMount = read,
# ClientWrite = write, ClientRootAccess = act as root; resource type file-system)
EFS_MOUNT_ACTIONS = ("elasticfilesystem:ClientMount", "elasticfilesystem:ClientWrite")
EFS_ROOT_ACTION = "elasticfilesystem:ClientRootAccess"


# The shipped log files (slurm_plugin/log_shipping.py) each role writes: its CloudWatch agent ships them to streams
# `<instance id>/<file name>`, and the role may create and write only streams ending in those names (issue 30: a
# compute node could write any stream of the group, e.g. forge a controller's slurmctld.log). No policy variable holds
# the bare instance id (`aws:userid` is `ROLEID:i-...`, and `:` is not allowed in a stream name), so a compute node can
# still write another compute node's slurmd.log stream; it cannot write a controller's.
LOG_FILES_BY_ROLE: dict[str, tuple[str, ...]] = {
    "controller": (
        "slurmctld.log",
        "slurmdbd.log",
        "plugin.log",
        "clustermgr.log",
        "prolog.log",
        "license-sync.log",
        "exporter.log",
    ),
    "compute": ("slurmd.log",),
    "login": (),  # sackd and the users' commands log nothing the agent ships
}
SHIPPED_LOG_FILES = tuple(PurePosixPath(p).name for p in SHIPPED_LOGS)


def log_statements(scope: ArnScope, cluster: str, log_files: Sequence[str]) -> list[Statement]:
    """CreateLogStream and PutLogEvents (both authorized on the log stream) on the streams `*/<file>` of the cluster's
    log group for each of `log_files`; none without files."""
    if not log_files:
        return []
    streams = [scope.arn(f"log-group:{log_group_name(cluster)}:log-stream:*/{name}", "logs") for name in log_files]
    return [
        statement("WriteClusterLogs", ["logs:PutLogEvents"], streams),
        statement("CreateClusterLogStreams", ["logs:CreateLogStream"], streams),
    ]


@dataclass(frozen=True)
class ControllerResources:
    """The resources only the controller uses (ARNs; None when the cluster has no such resource)."""

    config_object_arn: str
    database_secret_arn: str | None = None
    events_queue_arn: str | None = None
    alerts_topic_arn: str | None = None
    alerts_key_arn: str | None = None
    conf_server_parameter_arn: str | None = None


def munge_secret_pattern(scope: ArnScope, cluster: str) -> str:
    """The munge key secret by name (Secrets Manager appends `-` and six random characters to every secret ARN)."""
    return scope.arn(f"secret:{munge_secret_name(cluster)}-??????", "secretsmanager")


def custom_action_objects(scope: ArnScope, cluster: Cluster) -> list[str]:
    """ARNs of the S3 objects the cluster's custom actions run (controller, every pool, every login pool), each once."""
    every = [
        cluster.controller.custom_actions,
        *(p.custom_actions for part in cluster.partitions for p in part.pools),
        *(login.custom_actions for login in cluster.login_nodes),
    ]
    scripts = [a.script for actions in every for a in (*actions.on_node_start, *actions.on_node_configured)]
    return [
        f"arn:{scope.partition}:s3:::{s.removeprefix('s3://')}" for s in dict.fromkeys(scripts) if s.startswith("s3://")
    ]


def directory_statements(directory: Directory | None) -> list[Statement]:
    """What every node needs of the directory's bind password (clusters[].directory), if any: the secret — by the
    ARN given and by that ARN with the six characters Secrets Manager appends, so a partial ARN works too — and, with
    a customer managed key, decrypting with it."""
    if directory is None or directory.bind_password_secret_arn is None:
        return []
    arn = directory.bind_password_secret_arn
    result = [statement("ReadDirectoryBindPassword", ["secretsmanager:GetSecretValue"], [arn, f"{arn}-??????"])]
    if directory.bind_password_kms_key_arn:
        result.append(statement("DecryptDirectoryBindPassword", ["kms:Decrypt"], [directory.bind_password_kms_key_arn]))
    return result


# What the SSM agent needs on a node (Session Manager for `elastic-slurm connect`, Run Command for the deconfigure
# Lambda): AWS's AmazonSSMManagedInstanceCore (v2) less its ssm:GetParameter and ssm:GetParameters on `*`, which would
# let root on any node read every parameter of the account (issue 30); nodes read their cluster's parameters through
# ReadClusterParameters. None of these actions has resource-level permissions in the agent's use.
# https://docs.aws.amazon.com/aws-managed-policy/latest/reference/AmazonSSMManagedInstanceCore.html
SSM_AGENT_ACTIONS = (
    "ssm:DescribeAssociation",
    "ssm:GetDeployablePatchSnapshotForInstance",
    "ssm:GetDocument",
    "ssm:DescribeDocument",
    "ssm:GetManifest",
    "ssm:ListAssociations",
    "ssm:ListInstanceAssociations",
    "ssm:PutInventory",
    "ssm:PutComplianceItems",
    "ssm:PutConfigurePackageResult",
    "ssm:UpdateAssociationStatus",
    "ssm:UpdateInstanceAssociationStatus",
    "ssm:UpdateInstanceInformation",
    "ssmmessages:CreateControlChannel",
    "ssmmessages:CreateDataChannel",
    "ssmmessages:OpenControlChannel",
    "ssmmessages:OpenDataChannel",
    "ec2messages:AcknowledgeMessage",
    "ec2messages:DeleteMessage",
    "ec2messages:FailMessage",
    "ec2messages:GetEndpoint",
    "ec2messages:GetMessages",
    "ec2messages:SendReply",
)


def node_statements(
    scope: ArnScope,
    cluster: str,
    regions: list[str],
    munge_secret_arn: str,
    file_system_arns: list[str] | None = None,
    action_objects: list[str] | None = None,
    directory: Directory | None = None,
    file_system_root_access: bool = True,
    log_files: Sequence[str] = SHIPPED_LOG_FILES,
) -> list[Statement]:
    """Every node of `cluster` (controller and compute): the SSM agent (`SSM_AGENT_ACTIONS`), its munge key, the cluster's parameters in every region it
    launches in (a launch template's `resolve:ssm:` AMI is read in the launch region), its log group, its file
    systems (`file_system_statements`; root access on the share unless `file_system_root_access` is False: every node
    role has it, see `file_system_statements`), the S3 scripts of its
    custom actions (`custom_action_objects`), the directory's bind password (`directory_statements`), the log streams
    of `log_files` (`log_statements`: pass the role's `LOG_FILES_BY_ROLE` entry; the default, every shipped file,
    still keeps a node off streams of any other name)."""
    result = [
        statement("SsmAgent", list(SSM_AGENT_ACTIONS), ["*"]),
        statement("ReadMungeKey", ["secretsmanager:GetSecretValue"], [munge_secret_arn]),
        statement(
            "ReadClusterParameters",
            ["ssm:GetParameter", "ssm:GetParameters"],
            [scope.arn(f"parameter/elastic-slurm/{cluster}/*", "ssm", region=r) for r in regions],
        ),
        *log_statements(scope, cluster, log_files),
    ]
    if action_objects:
        result.append(statement("ReadCustomActionScripts", ["s3:GetObject"], list(action_objects)))
    result += directory_statements(directory)
    result += file_system_statements(file_system_arns or [], root_access=file_system_root_access)
    return result


def file_system_statements(file_system_arns: list[str], *, root_access: bool) -> list[Statement]:
    """What a node needs to mount the cluster's EFS file systems with IAM authorization (mount option `iam`): the
    file system policy (stacks/storage.py) allows no client anything, so these statements are the whole grant —
    `ClientMount` (read) and `ClientWrite`, and `ClientRootAccess` (`root_access`) on every node role: the
    controller's boot creates and chowns the node-names directory on the share (and Slurm's state directories on the
    controllers' own file system, whose ARN only the controller role's list holds)
    (assets/bootstrap/elastic-slurm-config-apply), and sites' prologs, health checks and custom actions commonly write
    it as root on compute and login nodes; without it EFS maps root to nobody. Squashing root there would protect
    little: NFS trusts the client's uids, so root on a node can act as any user anyway. An Allow in either the
    identity or the file system policy suffices
    (https://docs.aws.amazon.com/efs/latest/ug/iam-access-control-nfs-efs.html)."""
    if not file_system_arns:
        return []
    result = [statement("MountSharedFileSystems", list(EFS_MOUNT_ACTIONS), list(file_system_arns))]
    if root_access:
        result.append(statement("RootOnSharedFileSystems", [EFS_ROOT_ACTION], list(file_system_arns)))
    return result


def controller_statements(resources: ControllerResources) -> list[Statement]:
    """What only the controller reads and writes: its config object, the database secret (accounting host), the events
    queue (cluster manager), the alert topic with its key, the conf-server parameter it publishes its address in, and
    the exporter's CloudWatch metrics (PutMetricData has no resource type: `*`, limited to our namespace)."""
    result = [
        statement("ReadClusterConfig", ["s3:GetObject"], [resources.config_object_arn]),
        statement(
            "PutClusterMetrics",
            ["cloudwatch:PutMetricData"],
            ["*"],
            {"StringEquals": {"cloudwatch:namespace": METRICS_NAMESPACE}},
        ),
    ]
    if resources.database_secret_arn:
        result.append(
            statement("ReadDatabaseSecret", ["secretsmanager:GetSecretValue"], [resources.database_secret_arn])
        )
    if resources.events_queue_arn:
        result.append(
            statement(
                "ConsumeClusterEvents",
                ["sqs:ReceiveMessage", "sqs:DeleteMessage", "sqs:ChangeMessageVisibility", "sqs:GetQueueAttributes"],
                [resources.events_queue_arn],
            )
        )
    if resources.alerts_topic_arn:
        result.append(statement("PublishAlerts", ["sns:Publish"], [resources.alerts_topic_arn]))
    if resources.alerts_key_arn:
        result.append(statement("EncryptAlerts", ["kms:GenerateDataKey", "kms:Decrypt"], [resources.alerts_key_arn]))
    if resources.conf_server_parameter_arn:
        result.append(statement("PublishConfServer", ["ssm:PutParameter"], [resources.conf_server_parameter_arn]))
    return result
