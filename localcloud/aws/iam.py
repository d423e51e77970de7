"""IAM principals in the emulated AWS whose policies are the stacks' own statements.

`role_documents(...)` builds the policy documents from the same functions the CDK stacks use (no synth needed);
`create_principals(aws, documents)` creates one IAM user per role with that document as its inline policy and returns
its credentials; `EmulatedAws.enforce_iam(admin)` then turns moto's IAM enforcement on.

moto authorizes only the action: it checks every EC2/SSM request against resource `*` and evaluates no condition key
(`aws:RequestTag`, `aws:ResourceTag`, `ec2:Vpc`, `ec2:LaunchTemplate`, `ec2:InstanceType`, `ec2:Owner`,
`ec2:CreateAction`, `iam:PassedToService`). So the document installed in the emulator is the action projection of the
synthesized one (`action_projection`): same actions, per role, resource `*`, no conditions. Resource ARNs and
condition keys are evaluated by tests/aws/test_iam_conditions.py, tests/contracts/test_aws_call_permissions.py and
tests/security/test_iam_abuse.py.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from cluster_config.model import Directory
from stacks.iam_policies import ArnScope, RegionTarget, Statement, deconfigure_statements, document, fleet_statements
from stacks.node_policies import (
    LOG_FILES_BY_ROLE,
    ControllerResources,
    controller_statements,
    munge_secret_pattern,
    node_statements,
)

if TYPE_CHECKING:
    from localcloud.aws.emulated_aws import EmulatedAws

ACCOUNT = "123456789012"
ADMIN = "admin"
POLICY_NAME = "synthesized"


@dataclass(frozen=True)
class Credentials:
    """Long-term access key of an emulated IAM user."""

    access_key_id: str
    secret_access_key: str

    def env(self) -> dict[str, str]:
        """Environment for a process that calls AWS as this principal (AWS_SESSION_TOKEN must be unset)."""
        return {"AWS_ACCESS_KEY_ID": self.access_key_id, "AWS_SECRET_ACCESS_KEY": self.secret_access_key}


def role_documents(
    cluster: str,
    targets: list[RegionTarget],
    scope: ArnScope | None = None,
    controller: ControllerResources | None = None,
    munge_owner: str | None = None,
    action_objects: list[str] | None = None,
    directory: Directory | None = None,
) -> dict[str, dict[str, Any]]:
    """Policy documents per role, from the statement builders the stacks attach: controller (launch/terminate, every
    node's reads, the controller's own reads), compute, login and deconfigure."""
    arns = scope or ArnScope("aws", ACCOUNT, targets[0].region)
    regions = [t.region for t in targets]
    munge = munge_secret_pattern(arns, munge_owner or cluster)

    def node(role: str) -> list[Statement]:
        return node_statements(
            arns, cluster, regions, munge, action_objects=action_objects, directory=directory,
            log_files=LOG_FILES_BY_ROLE[role],
        )  # fmt: skip

    own = controller or ControllerResources(config_object_arn=f"arn:aws:s3:::elastic-slurm-{cluster}-assets/*")
    return {
        "controller": document(
            [*fleet_statements(arns, cluster, targets), *node("controller"), *controller_statements(own)]
        ),
        "compute": document(node("compute")),
        "login": document(node("login")),  # stacks/cluster.py: the login role holds the node statements too
        "deconfigure": document(deconfigure_statements(arns, cluster, regions)),
    }


def action_projection(policy: dict[str, Any]) -> dict[str, Any]:
    """The same Allow actions on resource `*` without conditions: what moto can enforce."""
    statements = [
        {"Sid": s["Sid"], "Effect": s["Effect"], "Action": s["Action"], "Resource": "*"} for s in policy["Statement"]
    ]
    return {"Version": policy["Version"], "Statement": statements}


def without_statement(policy: dict[str, Any], sid: str) -> dict[str, Any]:
    """`policy` less the statement `sid` (ValueError if it has none)."""
    kept = [s for s in policy["Statement"] if s.get("Sid") != sid]
    if len(kept) == len(policy["Statement"]):
        raise ValueError(f"policy has no statement with Sid {sid!r}")
    return {**policy, "Statement": kept}


def create_principals(
    aws: EmulatedAws, documents: dict[str, dict[str, Any]], prefix: str = "", admin: bool = True
) -> dict[str, Credentials]:
    """One IAM user per role (named `prefix` + role) holding the action projection of its document, plus `admin`
    (allows all, for the harness) unless `admin` is False; returns each user's credentials by role. Create the admin
    before `aws.enforce_iam(...)`; later principals are created through a handle signing as that admin."""
    iam = aws.client("iam")
    everything = {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "*", "Resource": "*"}]}
    wanted = {**({ADMIN: everything} if admin else {}), **{n: action_projection(d) for n, d in documents.items()}}
    created: dict[str, Credentials] = {}
    for name, policy in wanted.items():
        user = name if name == ADMIN else f"{prefix}{name}"
        iam.create_user(UserName=user)
        iam.put_user_policy(UserName=user, PolicyName=POLICY_NAME, PolicyDocument=json.dumps(policy))
        key = iam.create_access_key(UserName=user)["AccessKey"]
        created[name] = Credentials(key["AccessKeyId"], key["SecretAccessKey"])
    return created
