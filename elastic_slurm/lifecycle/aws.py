"""boto3 clients for the lifecycle commands, and AWS errors as one line.

Clients use boto3's usual chains: credentials (environment, profile, instance role) and endpoints — botocore honours
$AWS_ENDPOINT_URL, which is how the tests point these commands at the emulated AWS (tests/aws/).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from cluster_config.model import REGION_PATTERN
from elastic_slurm.errors import OperationFailed, UserError


def client(service: str, region: str, endpoint_url: str | None = None) -> Any:
    """A boto3 client of `service` in `region` (standard retries: the calls here are few); without `endpoint_url`
    boto3 still honours $AWS_ENDPOINT_URL."""
    import boto3
    from botocore.config import Config

    config = Config(retries={"mode": "standard", "max_attempts": 6}, connect_timeout=10, read_timeout=60)
    session = boto3.session.Session()
    return session.client(service, region_name=region, endpoint_url=endpoint_url, config=config)  # type: ignore[call-overload]


def error_code(exc: Exception) -> str:
    """The AWS error code of a ClientError ("" for anything else)."""
    response = getattr(exc, "response", None)
    return str(response.get("Error", {}).get("Code", "")) if isinstance(response, dict) else ""


@contextmanager
def aws_errors(what: str) -> Iterator[None]:
    """Turn botocore failures (no credentials, access denied, unreachable endpoint) into one OperationFailed line
    (exit 1)."""
    from botocore.exceptions import BotoCoreError, ClientError

    try:
        yield
    except (BotoCoreError, ClientError) as exc:
        raise OperationFailed(f"{what}: {' '.join(str(exc).split())}") from None


def caller_account(region: str) -> str:
    """The account of the credentials boto3 finds (STS GetCallerIdentity): the one cheap call that proves they work,
    made before anything slow (a synth) or anything that would name CDK's placeholder account."""
    with aws_errors(f"AWS credentials ({region}; `aws sts get-caller-identity` must work)"):
        return str(client("sts", region).get_caller_identity()["Account"])


def default_region(given: str | None) -> str:
    """--region, else the region boto3 is configured with (AWS_REGION, AWS_DEFAULT_REGION, the profile)."""
    import boto3

    region = given or boto3.session.Session().region_name
    if not region:
        raise UserError("--region: no region given and none configured (AWS_DEFAULT_REGION or the profile)")
    if not re.fullmatch(REGION_PATTERN, region):
        raise UserError(f"--region: {region!r} is not an AWS region (e.g. us-east-1)")
    return str(region)
