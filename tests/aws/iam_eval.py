"""Adapter to the IAM policy evaluator (@cloud-copilot/iam-simulate, pinned in package.json) for the IAM tests."""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from localcloud.iam_requests import AuthzRequest

SCRIPT = Path(__file__).with_name("iam_simulate.mjs")


def evaluate(policies: Mapping[str, Any], requests: Sequence[AuthzRequest], account: str) -> list[str]:
    """`Allowed`, `ImplicitlyDenied`, `ExplicitlyDenied` or `Error: ...` per request, in order."""
    node = shutil.which("node")
    if node is None:
        raise RuntimeError("node is not installed: run scripts/setup.sh")
    payload = {
        "account": account,
        "policies": dict(policies),
        "requests": [{"action": r.action, "resource": r.resource, "context": r.context} for r in requests],
    }
    done = subprocess.run(
        [node, str(SCRIPT)], input=json.dumps(payload), capture_output=True, text=True, check=False, timeout=300
    )
    if done.returncode != 0:
        raise RuntimeError(f"iam_simulate.mjs failed: {done.stderr.strip()[-2000:]}")
    return [r["result"] if r["result"] != "Error" else f"Error: {r['detail']}" for r in json.loads(done.stdout)]
