"""IAM of one local cloud: its controller and its instances call the emulated AWS as principals holding the
statements the stacks attach to the controller, compute and login roles, with enforcement on.

`install(...)` runs after `local up` created what the stacks create (with the harness's unsigned requests) and before
the controller boots: it creates `<cluster>-controller`, `-compute` and `-login` (localcloud.aws.iam: the action
projection of stacks.iam_policies + stacks.node_policies), an `admin` for the harness (the first cluster of an
emulated AWS only), turns enforcement on and records the keys in the state dir (`state/iam-principals.json`), where
the instance runner (compute, login and admin keys) and later `LocalCloud.aws()` handles (admin) read them. The controller's
keys go into its env file and the ResumeProgram wrappers: what the instance profile gives on EC2.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from cluster_config.model import Cluster
from localcloud.aws.emulated_aws import EmulatedAws
from localcloud.aws.iam import ADMIN, Credentials, create_principals, role_documents, without_statement
from localcloud.layout import Layout
from slurm_plugin.manifest import DeployedInfra
from stacks.iam_policies import ArnScope, RegionTarget
from stacks.naming import conf_server_parameter
from stacks.node_policies import ControllerResources, custom_action_objects

ROLES = ("controller", "compute", "login")


@dataclass(frozen=True)
class CloudPrincipals:
    """The keys of one local cloud's principals."""

    admin: Credentials
    controller: Credentials
    compute: Credentials
    login: Credentials

    def to_json(self) -> dict[str, dict[str, str]]:
        return {name: getattr(self, name).__dict__ for name in (ADMIN, *ROLES)}


def principals_file(layout: Layout) -> Path:
    return layout.state / "iam-principals.json"


def load(layout: Layout) -> CloudPrincipals | None:
    """The principals `install` recorded in this state dir (None before, or for a cloud without enforcement)."""
    try:
        data = json.loads(principals_file(layout).read_text())
    except (OSError, ValueError):
        return None
    return CloudPrincipals(**{name: Credentials(**data[name]) for name in (ADMIN, *ROLES)})


def install(
    aws: EmulatedAws,
    layout: Layout,
    cluster: Cluster,
    infra: DeployedInfra,
    admin: Credentials | None = None,
    without: tuple[str, ...] = (),
) -> CloudPrincipals:
    """Create this cluster's principals (the controller's less the statements named in `without`, for tests), and
    with no `admin` given (the first cluster of this emulated AWS) the harness's admin, then enforce IAM."""
    scope = ArnScope("aws", "123456789012", cluster.region)
    regions = sorted({cluster.region, *(r.region for r in cluster.remote_regions)})
    targets = [
        RegionTarget(region, "vpc-local", list(infra.launch_templates.values()), scope.arn("role/compute", "iam", ""))
        for region in regions
    ]
    # what the cluster stack always creates for the controller: its config object, the events queue the manager
    # consumes, the alert topic and its key (here the queue a test creates; no topic), and on the accounting host the
    # database secret
    resources = ControllerResources(
        # its config objects (content-addressed, one per deploy; moto evaluates the action only, see localcloud/aws/iam.py)
        config_object_arn=f"arn:aws:s3:::elastic-slurm-{cluster.name}-assets/*.yaml",
        database_secret_arn=scope.arn(f"secret:elastic-slurm/{cluster.name}/database-??????", "secretsmanager"),
        events_queue_arn=scope.arn("*", "sqs"),
        alerts_topic_arn=scope.arn(f"{cluster.name}-alerts", "sns"),
        alerts_key_arn=scope.arn("key/*", "kms"),
        conf_server_parameter_arn=scope.arn(f"parameter{conf_server_parameter(cluster.name)}", "ssm"),
    )
    documents = role_documents(
        cluster.name,
        targets,
        scope,
        controller=resources,
        munge_owner=None,
        action_objects=custom_action_objects(scope, cluster),
        directory=cluster.directory,
    )
    documents = {role: documents[role] for role in ROLES}
    for sid in without:
        documents["controller"] = without_statement(documents["controller"], sid)
    created = create_principals(aws, documents, prefix=f"{cluster.name}-", admin=admin is None)
    principals = CloudPrincipals(
        admin=admin or created[ADMIN],
        controller=created["controller"],
        compute=created["compute"],
        login=created["login"],
    )
    principals_file(layout).write_text(json.dumps(principals.to_json(), indent=2) + "\n")
    principals_file(layout).chmod(0o600)
    if admin is None:
        aws.enforce_iam(principals.admin)
    return principals
