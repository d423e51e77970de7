"""`elastic-slurm onprem-kit CONFIG --site NAME [--slurmdbd-host H] [--slurmdbd-port P] [--munge-key-out FILE]`:
what an on-prem cluster's admin adds so the site bursts into the deployment (elastic_slurm/onprem_kit.py).

Prints the slurm.conf lines for the site. slurmdbd's host is `--slurmdbd-host`, else the private IP of the accounting
host cluster's controller 0 (its Name tag `<cluster>-controller-0`, running). `--munge-key-out` writes the munge key
the site must use (mode 0400), read from Secrets Manager exactly as a node's boot does (slurm_plugin/boot_fetch.py).
AWS calls honour `--endpoint-url` / $AWS_ENDPOINT_URL like every AWS call of the CLI.
"""

from __future__ import annotations

import argparse
import logging
from pathlib import Path
from typing import Any

from cluster_config import ElasticSlurmConfig, load
from elastic_slurm import onprem_kit
from elastic_slurm.errors import UserError
from slurm_plugin.naming import SLURMDBD_PORT


def register(sub: Any) -> None:
    """Add `onprem-kit`."""
    cmd = sub.add_parser("onprem-kit", help="slurm.conf lines and munge key for an on-prem cluster that bursts in")
    cmd.add_argument("config", metavar="CONFIG", help="the deployment's cluster YAML")
    cmd.add_argument("--site", required=True, metavar="NAME", help="the on-prem cluster (onprem_clusters[].name)")
    cmd.add_argument("--slurmdbd-host", metavar="H", help="slurmdbd's address (default: looked up in EC2)")
    cmd.add_argument("--slurmdbd-port", type=int, default=SLURMDBD_PORT, metavar="P", help="slurmdbd's port")
    cmd.add_argument("--munge-key-out", type=Path, metavar="FILE", help="write the munge key the site must use here")
    cmd.add_argument("--endpoint-url", metavar="URL", help="AWS endpoint (default: $AWS_ENDPOINT_URL, else AWS)")
    cmd.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Print the site's slurm.conf lines; write the munge key when asked."""
    from botocore.exceptions import BotoCoreError, ClientError

    from elastic_slurm.cluster_instances import aws_failure

    config = load(args.config)
    try:
        site = onprem_kit.site(config, args.site)
    except KeyError:
        known = ", ".join(o.name for o in config.onprem_clusters) or "none"
        raise UserError(
            f"--site: no on-prem cluster '{args.site}' in {args.config} (onprem_clusters: {known})"
        ) from None
    if not 1 <= args.slurmdbd_port <= 65535:
        raise UserError(f"--slurmdbd-port: {args.slurmdbd_port} is not a TCP port")
    logging.getLogger("botocore").setLevel(logging.WARNING)
    try:
        host = args.slurmdbd_host or _slurmdbd_address(config, args.endpoint_url)
        if args.munge_key_out is not None:
            _write_munge_key(onprem_kit.munge_source(config), args.munge_key_out, args.endpoint_url)
    except (ClientError, BotoCoreError) as exc:
        raise aws_failure(exc) from None
    print(onprem_kit.slurm_conf_lines(config, site, host, args.slurmdbd_port), end="")
    return 0


def _slurmdbd_address(config: ElasticSlurmConfig, endpoint_url: str | None) -> str:
    """The private IP of the running controller 0 of the accounting host cluster."""
    from elastic_slurm import cluster_instances

    cluster = config.accounting_host
    ec2 = cluster_instances.ec2_client(config.cluster(cluster).region, endpoint_url)
    found = cluster_instances.controllers(ec2, cluster, 0, cluster_instances.RUNNING)
    if not found or not found[0].private_ip:
        raise UserError(f"--slurmdbd-host: no running {cluster}-controller-0 to look up: give the address")
    return found[0].private_ip


def _write_munge_key(source: onprem_kit.MungeSource, out: Path, endpoint_url: str | None) -> None:
    from elastic_slurm.lifecycle.aws import client
    from slurm_plugin.boot_fetch import munge_key_bytes, write_private_bytes

    secret = client("secretsmanager", source.region, endpoint_url).get_secret_value(SecretId=source.secret_id)
    try:
        write_private_bytes(out, munge_key_bytes(secret["SecretString"]))
    except OSError as exc:
        raise UserError(f"--munge-key-out: cannot write {out}: {exc.strerror}") from None
