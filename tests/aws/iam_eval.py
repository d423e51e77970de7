"""Adapter to the IAM policy evaluator (@cloud-copilot/iam-simulate, pinned in package.json) for the IAM tests."""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from localcloud.aws.iam_requests import AuthzRequest

SCRIPT = Path(__file__).with_name("iam_simulate.mjs")


ANONYMOUS = "anonymous"  # `principal` of a request that carries no IAM identity (e.g. an NFS mount without `iam`)


def evaluate(
    policies: Mapping[str, Any],
    requests: Sequence[AuthzRequest],
    account: str,
    *,
    resource_policy: Mapping[str, Any] | None = None,
    principal: str | None = None,
) -> list[str]:
    """`Allowed`, `ImplicitlyDenied`, `ExplicitlyDenied` or `Error: ...` per request, in order: the identity
    `policies` of `principal` (an ARN, `ANONYMOUS`, or by default a role of `account`), and the resource's own
    `resource_policy` if given (same account: an Allow in either suffices, a Deny in either wins)."""
    node = shutil.which("node")
    if node is None:
        raise RuntimeError("node is not installed: run scripts/setup.sh")
    payload = {
        "account": account,
        "policies": dict(policies),
        "requests": [{"action": r.action, "resource": r.resource, "context": r.context} for r in requests],
    }
    if resource_policy is not None:
        payload["resourcePolicy"] = dict(resource_policy)
    if principal is not None:
        payload["principal"] = principal
    done = subprocess.run(
        [node, str(SCRIPT)], input=json.dumps(payload), capture_output=True, text=True, check=False, timeout=300
    )
    if done.returncode != 0:
        raise RuntimeError(f"iam_simulate.mjs failed: {done.stderr.strip()[-2000:]}")
    return [r["result"] if r["result"] != "Error" else f"Error: {r['detail']}" for r in json.loads(done.stdout)]
