"""The boot's AWS reads in one process: the munge key from Secrets Manager and the boot parameters from SSM.

Every node's user data (stacks/user_data.py) runs it once, as root, before munged and the mounts:

    python -m slurm_plugin.boot_fetch --munge-secret ID --munge-key /etc/munge/munge.key \\
        --parameters NAME... --parameters-out FILE

One interpreter start and one botocore session instead of two AWS CLI runs (each its own interpreter start: about a
second of every cold start). The munge key is what `aws secretsmanager get-secret-value --query SecretString --output
text | sha512sum | cut -d' ' -f1` wrote before: the hex SHA-512 of the secret string plus the newline the CLI
prints, then a newline. The parameters file has get-parameters' answer shape ({"Parameters": [...],
"InvalidParameters": [...]}), which the boot reads with jq. Credentials, region, endpoint and retry mode come from the
environment as for the AWS CLI (instance profile, AWS_DEFAULT_REGION, AWS_ENDPOINT_URL in the local cloud,
AWS_RETRY_MODE). Errors: one line on stderr naming the call, exit 1.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any


def munge_key_bytes(secret: str) -> bytes:
    """The munge key file's content for a secret string (see the module docstring)."""
    return (hashlib.sha512((secret + "\n").encode()).hexdigest() + "\n").encode()


def write_private_bytes(path: Path, data: bytes) -> None:
    """Write `data` to `path` with mode 0400 from its creation (a key is never readable by others)."""
    temporary = path.with_name(f".{path.name}.tmp")
    temporary.unlink(missing_ok=True)
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o400)
    with os.fdopen(fd, "wb") as handle:
        handle.write(data)
    os.replace(temporary, path)


def parameters_document(answer: dict[str, Any]) -> dict[str, Any]:
    """get-parameters' answer as `aws ssm get-parameters --output json` prints it (the fields the boot reads)."""
    return {
        "Parameters": [
            {"Name": p["Name"], "Type": p.get("Type"), "Value": p["Value"], "Version": p.get("Version")}
            for p in answer.get("Parameters", [])
        ],
        "InvalidParameters": list(answer.get("InvalidParameters", [])),
    }


def aws_error_line(program: str, exc: Exception) -> str:
    """One line for a failed AWS call: `program: Operation: Code: message` (botocore's ClientError), else its text."""
    from botocore.exceptions import ClientError

    if isinstance(exc, ClientError):
        error = exc.response.get("Error", {})
        return f"{program}: {exc.operation_name}: {error.get('Code', '?')}: {error.get('Message', exc)}"
    return f"{program}: {' '.join(str(exc).split())}"


def fetch(session: Any, secret_id: str, key_path: Path, names: Sequence[str], out: Path) -> None:
    """Both reads; raises on any AWS error."""
    secret = session.client("secretsmanager").get_secret_value(SecretId=secret_id)["SecretString"]
    answer = session.client("ssm").get_parameters(Names=list(names)) if names else {"Parameters": []}
    write_private_bytes(key_path, munge_key_bytes(secret))
    out.write_text(json.dumps(parameters_document(answer), indent=1) + "\n")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="boot_fetch", description=__doc__.split("\n")[0])
    parser.add_argument("--munge-secret", required=True, help="Secrets Manager id of the munge secret")
    parser.add_argument("--munge-key", required=True, type=Path, help="where the munge key is written (mode 0400)")
    parser.add_argument("--parameters", nargs="*", default=[], help="SSM parameter names to read")
    parser.add_argument("--parameters-out", required=True, type=Path, help="where get-parameters' answer is written")
    args = parser.parse_args(argv)
    import boto3
    from botocore.exceptions import BotoCoreError, ClientError

    try:
        fetch(boto3.session.Session(), args.munge_secret, args.munge_key, args.parameters, args.parameters_out)
    except (ClientError, BotoCoreError, OSError) as exc:
        print(aws_error_line("boot_fetch", exc), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
