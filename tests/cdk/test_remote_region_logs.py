"""Remote-region nodes ship their logs to the home region's log group, with a permission for exactly that group.

Both sides from the synthesized remote-region config: each remote launch template's boot environment (ES_REGION,
ES_LOG_GROUP) and the agent-config line of its user data (slurm_plugin/log_shipping.py: `agent.region`), the stack that
creates that group in that region, and the remote compute role's statements (stacks/node_policies.py with the home
ArnScope). Negative case: a node shipping to its own region's group (the agent's default) finds no group and no
permission there.
"""

from __future__ import annotations

import fnmatch
from typing import Any

import pytest

from tests.cdk.conftest import Assembly
from tests.contracts.test_stack_dependencies import boot_env, stacks_of, user_data_text, writers

pytestmark = pytest.mark.cdk
ACCOUNT = "123456789012"  # stacks/naming.py PLACEHOLDER_ACCOUNT: the synth's account
AGENT_LINE = '-m slurm_plugin.log_shipping --region "$ES_REGION" "$ES_LOG_GROUP"'


def _allows(statements: list[dict[str, Any]], action: str, arn: str) -> bool:
    """An Allow statement naming `action` on a resource pattern that matches `arn` (IAM's * and ? wildcards)."""
    for statement in statements:
        actions = statement["Action"] if isinstance(statement["Action"], list) else [statement["Action"]]
        resources = statement["Resource"] if isinstance(statement["Resource"], list) else [statement["Resource"]]
        matches = any(isinstance(r, str) and fnmatch.fnmatchcase(arn, r) for r in resources)
        if statement["Effect"] == "Allow" and action in actions and matches:
            return True
    return False


def _shipping(assembly: Assembly) -> list[tuple[str, str, str, list[dict[str, Any]]]]:
    """(stack, region the agent sends to, log group, the stack's role statements) of every remote launch template."""
    stacks = stacks_of(assembly)
    found = []
    for stack in stacks.values():
        if "-region-" not in stack.name:
            continue
        statements = [
            s for _, policy in stack.resources("AWS::IAM::Policy") for s in policy["PolicyDocument"]["Statement"]
        ]
        for _, template in stack.resources("AWS::EC2::LaunchTemplate"):
            assert AGENT_LINE in user_data_text(template["LaunchTemplateData"]["UserData"])
            env = boot_env(template)
            found.append((stack.name, env["ES_REGION"], env["ES_LOG_GROUP"], statements))
    return found


def test_remote_nodes_ship_to_the_home_log_group_they_may_write(assemblies: dict[str, Assembly]) -> None:
    assembly = assemblies["remote-region"]
    made = writers(stacks_of(assembly))
    shipping = _shipping(assembly)
    assert len(shipping) == 2  # the two pools with AZs in us-west-2
    for stack, region, group, statements in shipping:
        assert region == "us-east-1", stack  # the home region, not the stack's us-west-2
        assert made[(region, group)] == "es-burst-cluster"  # the group exists there
        stream = f"arn:aws:logs:{region}:{ACCOUNT}:log-group:{group}:log-stream:i-0abc/slurmd.log"
        assert _allows(statements, "logs:PutLogEvents", stream), stack
        assert _allows(statements, "logs:CreateLogStream", stream), stack


def test_shipping_to_the_nodes_own_region_is_caught(assemblies: dict[str, Assembly]) -> None:
    """Negative case: the agent's default region (the instance's, us-west-2) has no such group and no permission."""
    assembly = assemblies["remote-region"]
    made = writers(stacks_of(assembly))
    for stack, _, group, statements in _shipping(assembly):
        assert ("us-west-2", group) not in made
        stream = f"arn:aws:logs:us-west-2:{ACCOUNT}:log-group:{group}:log-stream:i-0abc/slurmd.log"
        assert not _allows(statements, "logs:PutLogEvents", stream), stack
