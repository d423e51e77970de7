"""The attacker's view of the node roles: root on any node (or anyone reaching its instance metadata) holds the
node's role, which reads only its own cluster's parameters and secrets (issue 30: AmazonSSMManagedInstanceCore gave
ssm:GetParameter(s) on every parameter of the account; the roles now carry the SSM agent's actions without them).

Evaluated with the real IAM evaluator against the synthesized policies of the `minimal` example's controller and
compute roles (templates resolved by tests/contracts/cfn_resolve.py); each case has its allowed counterpart.
"""

from __future__ import annotations

from typing import Any

import pytest

from localcloud.aws.iam_requests import AuthzRequest
from tests.aws.iam_eval import evaluate
from tests.cdk.conftest import Assembly
from tests.contracts.test_aws_call_permissions import Context, _contexts

REGION = "us-east-1"


@pytest.fixture(scope="module")
def roles(assemblies: dict[str, Assembly]) -> dict[str, Context]:
    contexts = {c.use.kind: c for c in _contexts(assemblies["minimal"]) if c.use.kind in ("controller", "compute")}
    assert set(contexts) == {"controller", "compute"}
    return contexts


def _parameter(account: str, name: str) -> str:
    return f"arn:aws:ssm:{REGION}:{account}:parameter{name}"


def _secret(account: str, name: str) -> str:
    return f"arn:aws:secretsmanager:{REGION}:{account}:secret:{name}-AbCdEf"


@pytest.mark.parametrize("kind", ["controller", "compute"])
def test_a_node_reads_its_clusters_parameters_and_no_other(roles: dict[str, Context], kind: str) -> None:
    ctx = roles[kind]
    account = ctx.use.account
    requests = [
        AuthzRequest(action, _parameter(account, name), {}, "abuse")
        for action in ("ssm:GetParameter", "ssm:GetParameters")
        for name in ("/elastic-slurm/minimal/mounts", "/prod/database/password", "/elastic-slurm/other/mounts")
    ]
    results = evaluate(ctx.use.policies, requests, account)
    assert results == ["Allowed", "ImplicitlyDenied", "ImplicitlyDenied"] * 2


def _munge_key(policies: dict[str, Any]) -> str:
    """The munge key's ARN as the synthesized (resolved) ReadMungeKey statement names it."""
    statements = [s for doc in policies.values() for s in doc["Statement"] if s.get("Sid") == "ReadMungeKey"]
    resources = [r for s in statements for r in ([s["Resource"]] if isinstance(s["Resource"], str) else s["Resource"])]
    assert len(set(resources)) == 1, resources
    return str(resources[0])


@pytest.mark.parametrize("kind", ["controller", "compute"])
def test_a_node_reads_its_munge_key_and_no_other_secret(roles: dict[str, Context], kind: str) -> None:
    ctx = roles[kind]
    account = ctx.use.account
    arns = [_munge_key(ctx.use.policies), _secret(account, "prod/api-token"), _secret(account, "elastic-slurm/other/x")]
    requests = [AuthzRequest("secretsmanager:GetSecretValue", arn, {}, "abuse") for arn in arns]
    assert evaluate(ctx.use.policies, requests, account) == ["Allowed", "ImplicitlyDenied", "ImplicitlyDenied"]


@pytest.mark.parametrize("kind", ["controller", "compute"])
def test_the_ssm_agent_still_works_session_manager_and_run_command(roles: dict[str, Context], kind: str) -> None:
    ctx = roles[kind]
    actions = ["ssm:UpdateInstanceInformation", "ssmmessages:OpenDataChannel", "ec2messages:GetMessages"]
    requests = [AuthzRequest(a, "*", {}, "agent") for a in actions]
    assert evaluate(ctx.use.policies, requests, ctx.use.account) == ["Allowed"] * len(actions)


def test_no_node_role_holds_an_aws_managed_policy(assemblies: dict[str, Assembly]) -> None:
    roles = 0
    for name in ("minimal", "remote-region", "federation"):
        assembly = assemblies[name]
        for stack in assembly.templates:
            resources = assembly.template_json(stack).get("Resources", {})
            for logical, resource in resources.items():
                if resource["Type"] == "AWS::IAM::Role" and logical.startswith(("ControllerRole", "ComputeRole")):
                    roles += 1
                    assert not resource["Properties"].get("ManagedPolicyArns"), f"{name}/{stack}/{logical}"
    assert roles >= 6  # controller + compute of minimal, remote-region (+ its region), federation's members
