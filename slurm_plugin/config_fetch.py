"""A controller's AWS reads for one config apply, in one process: the config parameters from SSM, and the config
object the config parameter names from S3.

elastic-slurm-config-apply (assets/bootstrap) runs it at the controller's boot and every minute from
slurm-config-sync.timer, as root:

    python -m slurm_plugin.config_fetch --parameters NAME... --parameters-out FILE \\
        [--download-named NAME --download-out FILE]

The parameters file has get-parameters' answer shape (slurm_plugin/boot_fetch.py `parameters_document`), which the
script reads with jq. With `--download-named`, the object whose `s3://bucket/key` URL is the value of parameter NAME
in that same answer is written to the download file: the URL the apply records is the one its file came from. One
interpreter start and one botocore session instead of an AWS CLI run per call (each its own interpreter start: about
a second of a controller's boot, and of every minute's check). Credentials, region, endpoint and retry mode come from
the environment as for the AWS CLI. Errors (an AWS call, a parameter that is missing or not an s3:// URL, a file that
cannot be written): one line on stderr, exit 1; nothing is written to the download file then.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from slurm_plugin.boot_fetch import aws_error_line, parameters_document

PROGRAM = "config_fetch"


class FetchError(Exception):
    """A read that cannot go on (one line)."""


def s3_location(url: str) -> tuple[str, str]:
    """(bucket, key) of an `s3://bucket/key` URL; FetchError for anything else."""
    bucket, _, key = url.removeprefix("s3://").partition("/")
    if not url.startswith("s3://") or not bucket or not key:
        raise FetchError(f"'{url}' is not an s3://bucket/key URL")
    return bucket, key


def value_of(document: dict[str, Any], name: str) -> str:
    """The value of parameter `name` in a parameters document; FetchError when it is not there."""
    for parameter in document["Parameters"]:
        if parameter["Name"] == name:
            return str(parameter["Value"])
    raise FetchError(f"no parameter {name}")


def write_whole(path: Path, data: bytes) -> None:
    """Write `data` to `path` by a rename: a reader never sees half a file, a failed write leaves no file."""
    temporary = path.with_name(f".{path.name}.tmp")
    temporary.write_bytes(data)
    os.replace(temporary, path)


def fetch(session: Any, names: Sequence[str], out: Path, download_named: str | None, download_out: Path | None) -> None:
    """The reads; raises botocore's errors, FetchError and OSError."""
    document = parameters_document(session.client("ssm").get_parameters(Names=list(names)))
    if download_named is not None and download_out is not None:
        bucket, key = s3_location(value_of(document, download_named))
        body = session.client("s3").get_object(Bucket=bucket, Key=key)["Body"].read()
        write_whole(download_out, body)
    write_whole(out, (json.dumps(document, indent=1) + "\n").encode())


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog=PROGRAM, description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--parameters", nargs="+", required=True, help="SSM parameter names to read")
    parser.add_argument("--parameters-out", required=True, type=Path, help="where get-parameters' answer is written")
    parser.add_argument("--download-named", metavar="NAME", help="download the s3:// URL this parameter holds")
    parser.add_argument("--download-out", type=Path, metavar="FILE", help="where that object is written")
    args = parser.parse_args(argv)
    if (args.download_named is None) != (args.download_out is None):
        parser.error("--download-named and --download-out go together")
    if args.download_named is not None and args.download_named not in args.parameters:
        parser.error(f"--download-named: {args.download_named} is not one of --parameters")
    import boto3
    from botocore.exceptions import BotoCoreError, ClientError

    try:
        fetch(boto3.session.Session(), args.parameters, args.parameters_out, args.download_named, args.download_out)
    except FetchError as exc:
        print(f"{PROGRAM}: {exc}", file=sys.stderr)
        return 1
    except (ClientError, BotoCoreError, OSError) as exc:
        print(aws_error_line(PROGRAM, exc), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
