"""The attacker's view of two grants around the nodes (issue 30), evaluated with the real IAM evaluator on the
synthesized `minimal` example:

- the alert topic's KMS key lets CloudWatch use it only for this account's alarms in the cluster's region
  (`aws:SourceAccount`, `aws:SourceArn`): another account's alarm naming the topic cannot (confused deputy);
- a node writes only log streams of its cluster's group named after a file its role ships
  (stacks/node_policies.py `LOG_FILES_BY_ROLE`): no other group, no other stream name, and a compute node no
  controller stream.

Each case has its allowed counterpart; the negative controls show the checks fail on the grants they replaced.
"""

from __future__ import annotations

from typing import Any

import pytest

from localcloud.aws.iam_requests import AuthzRequest
from stacks.iam_policies import ArnScope, document
from stacks.node_policies import LOG_FILES_BY_ROLE, SHIPPED_LOG_FILES, node_statements
from tests.aws.iam_eval import evaluate
from tests.cdk.conftest import Assembly
from tests.contracts.test_aws_call_permissions import Context, _contexts

FOREIGN_ACCOUNT = "999999999999"
CLOUDWATCH = "cloudwatch.amazonaws.com"


@pytest.fixture(scope="module")
def roles(assemblies: dict[str, Assembly]) -> dict[str, Context]:
    contexts = {c.use.kind: c for c in _contexts(assemblies["minimal"]) if c.use.kind in ("controller", "compute")}
    assert set(contexts) == {"controller", "compute"}
    return contexts


# ------------------------------------------------------------------------------------------------ the alerts key


@pytest.fixture(scope="module")
def alerts_key(roles: dict[str, Context]) -> tuple[str, dict[str, Any], str, str]:
    """(key ARN, key policy, account, region) of the synthesized alerts key, resolved."""
    ctx = roles["controller"]
    stack = ctx.controller_stack
    keys = {k: r for k, r in ctx.resolver.resources(stack, "AWS::KMS::Key").items() if "AlertsKey" in k}
    assert len(keys) == 1, list(keys)
    logical_id, key = next(iter(keys.items()))
    arn = str(ctx.resolver.resolve(stack, {"Fn::GetAtt": [logical_id, "Arn"]}))
    policy = ctx.resolver.resolve(stack, key["Properties"]["KeyPolicy"])
    return arn, policy, ctx.use.account, ctx.use.region


def _key_requests(arn: str, account: str, region: str) -> list[AuthzRequest]:
    """CloudWatch encrypting a notification for: our alarm; another account's alarm; our account's alarm of another
    region; a request without the source keys."""
    alarm = f"arn:aws:cloudwatch:{region}:{account}:alarm:es-minimal-cluster-EventsBacklog"
    foreign = f"arn:aws:cloudwatch:{region}:{FOREIGN_ACCOUNT}:alarm:x"
    elsewhere = f"arn:aws:cloudwatch:ap-south-1:{account}:alarm:x"
    return [
        AuthzRequest("kms:GenerateDataKey", arn, {"aws:SourceAccount": account, "aws:SourceArn": alarm}, "ours"),
        AuthzRequest(
            "kms:GenerateDataKey", arn, {"aws:SourceAccount": FOREIGN_ACCOUNT, "aws:SourceArn": foreign}, "foreign"
        ),
        AuthzRequest("kms:Decrypt", arn, {"aws:SourceAccount": account, "aws:SourceArn": elsewhere}, "other region"),
        AuthzRequest("kms:GenerateDataKey", arn, {}, "no source"),
    ]


def test_cloudwatch_uses_the_alerts_key_only_for_this_accounts_alarms(
    alerts_key: tuple[str, dict[str, Any], str, str],
) -> None:
    arn, policy, account, region = alerts_key
    results = evaluate({}, _key_requests(arn, account, region), account, resource_policy=policy, principal=CLOUDWATCH)
    assert results == ["Allowed", "ImplicitlyDenied", "ImplicitlyDenied", "ImplicitlyDenied"]


def test_the_key_check_catches_a_grant_without_source_conditions(
    alerts_key: tuple[str, dict[str, Any], str, str],
) -> None:
    """What `key.grant_encrypt_decrypt(ServicePrincipal("cloudwatch.amazonaws.com"))` wrote before (2eb80bf)."""
    arn, _, account, region = alerts_key
    old = {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Effect": "Allow",
                "Principal": {"Service": CLOUDWATCH},
                "Action": ["kms:Decrypt", "kms:Encrypt", "kms:ReEncrypt*", "kms:GenerateDataKey*"],
                "Resource": "*",
            }
        ],
    }
    results = evaluate({}, _key_requests(arn, account, region), account, resource_policy=old, principal=CLOUDWATCH)
    assert results == ["Allowed"] * 4


# ------------------------------------------------------------------------------------------------ log streams


def _stream(account: str, group: str, stream: str, region: str = "us-east-1") -> str:
    return f"arn:aws:logs:{region}:{account}:log-group:{group}:log-stream:{stream}"


def _log_requests(account: str, streams: list[str]) -> list[AuthzRequest]:
    return [
        AuthzRequest(action, _stream(account, *s.split("|")), {}, "logs")
        for s in streams
        for action in ("logs:CreateLogStream", "logs:PutLogEvents")
    ]


@pytest.mark.parametrize("kind", ["controller", "compute"])
def test_a_node_writes_only_shipped_streams_of_its_clusters_log_group(roles: dict[str, Context], kind: str) -> None:
    ctx = roles[kind]
    account = ctx.use.account
    own = LOG_FILES_BY_ROLE[kind][0]
    streams = [
        f"/elastic-slurm/minimal|i-0123456789abcdef0/{own}",
        f"/elastic-slurm/other|i-0123456789abcdef0/{own}",  # another cluster's group
        "/elastic-slurm/minimal|i-0123456789abcdef0/forged.log",  # a name no node ships
        f"/aws/lambda/x|i-0123456789abcdef0/{own}",
    ]
    results = evaluate(ctx.use.policies, _log_requests(account, streams), account)
    assert results == ["Allowed"] * 2 + ["ImplicitlyDenied"] * 6


def _compute_writes_controller_stream(policies: dict[str, Any], account: str) -> list[str]:
    streams = [
        "/elastic-slurm/minimal|i-0123456789abcdef0/slurmd.log",
        "/elastic-slurm/minimal|i-0fedcba9876543210/slurmctld.log",
        "/elastic-slurm/minimal|i-0fedcba9876543210/plugin.log",
    ]
    return evaluate(policies, _log_requests(account, streams), account)


def test_the_compute_statements_write_no_controller_stream() -> None:
    """node_statements with the compute role's files, as the stacks pass them (the real function, evaluated)."""
    account = "111122223333"
    scope = ArnScope("aws", account, "us-east-1")
    statements = node_statements(scope, "minimal", ["us-east-1"], "arn:munge", log_files=LOG_FILES_BY_ROLE["compute"])
    results = _compute_writes_controller_stream({"compute": document(statements)}, account)
    assert results == ["Allowed"] * 2 + ["ImplicitlyDenied"] * 4


def test_the_synthesized_compute_role_writes_no_controller_stream(roles: dict[str, Context]) -> None:
    ctx = roles["compute"]
    results = _compute_writes_controller_stream(ctx.use.policies, ctx.use.account)
    assert results == ["Allowed"] * 2 + ["ImplicitlyDenied"] * 4


def test_the_log_check_catches_the_whole_group_grant() -> None:
    """The grant before (2eb80bf): every stream of the group (`log-group:NAME:*`)."""
    account = "111122223333"
    group = f"arn:aws:logs:us-east-1:{account}:log-group:/elastic-slurm/minimal:*"
    old = {
        "Version": "2012-10-17",
        "Statement": [{"Effect": "Allow", "Action": ["logs:PutLogEvents", "logs:CreateLogStream"], "Resource": group}],
    }
    assert _compute_writes_controller_stream({"old": old}, account) == ["Allowed"] * 6


def test_every_shipped_file_belongs_to_exactly_one_role() -> None:
    owned = [name for files in LOG_FILES_BY_ROLE.values() for name in files]
    assert sorted(owned) == sorted(SHIPPED_LOG_FILES) and len(set(owned)) == len(owned)
