"""`elastic-slurm cluster create|update|delete|status|list`: a deployed cluster's life cycle (like `pcluster`).

create FILE [--dryrun]            validate, refuse a cluster already deployed, `cdk deploy --all`; --dryrun: validate
                                  and synthesize offline, print the stacks that would be created
update FILE [--dryrun] [--against OLD.yaml]
                                  diff against the deployed config (or OLD.yaml), one line per change with its update
                                  policy (cluster_config/update_policy.py), refuse `not allowed`, then `cdk deploy --all`
delete FILE                       `cdk destroy --all --force` (the stacks are built from the file)
status FILE|NAME [--region R]     stacks, controllers and config URL of the cluster(s)
list [--region R]                 every cluster of a region, with its cluster stack's status

Every refusal (already deployed, not allowed, no file) happens before the CDK CLI starts. See
docs/cluster-lifecycle.md.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import tempfile
from pathlib import Path
from typing import Any

from cluster_config import ElasticSlurmConfig, load
from cluster_config.model import CLUSTER_NAME_PATTERN
from elastic_slurm.commands.synth_cmd import cdk_workdir, synth_command, synth_env
from elastic_slurm.errors import UserError
from elastic_slurm.lifecycle import cdk
from elastic_slurm.lifecycle.assembly import SynthesizedStack, stacks_of
from elastic_slurm.lifecycle.aws import default_region
from elastic_slurm.lifecycle.deployed import config_url
from elastic_slurm.lifecycle.status import ClusterStatus, cluster_status, list_clusters
from elastic_slurm.lifecycle.update_check import check_update
from slurm_plugin.naming import config_url_parameter


def register(sub: Any) -> None:
    """Add `cluster` and its actions."""
    cluster = sub.add_parser("cluster", help="create, update, delete and inspect deployed clusters")
    actions = cluster.add_subparsers(dest="action", required=True, parser_class=type(cluster))
    create = actions.add_parser("create", help="deploy a new cluster (cdk deploy --all)")
    create.add_argument("file", metavar="FILE", help="cluster YAML file")
    create.add_argument("--dryrun", action="store_true", help="validate and synthesize only (offline); list the stacks")
    create.add_argument("--out", metavar="DIR", help="with --dryrun: keep the cloud assembly in DIR")
    create.set_defaults(func=run_create)
    update = actions.add_parser("update", help="check an edited config against the deployed one, then deploy it")
    update.add_argument("file", metavar="FILE", help="the edited cluster YAML file")
    update.add_argument("--dryrun", action="store_true", help="print the changes and their policies; deploy nothing")
    update.add_argument("--against", metavar="OLD.yaml", help="diff against this file instead of the deployed config")
    update.add_argument(
        "--yes",
        action="store_true",
        help="deploy even when a change removes a pool or partition, replaces launch templates or controllers",
    )
    update.set_defaults(func=run_update)
    delete = actions.add_parser("delete", help="delete every stack of a cluster file (cdk destroy --all --force)")
    delete.add_argument("target", metavar="FILE", help="the cluster YAML file the cluster was deployed from")
    delete.set_defaults(func=run_delete)
    status = actions.add_parser("status", help="stacks, controllers and config URL of a deployed cluster")
    status.add_argument("target", metavar="FILE|NAME", help="cluster YAML file, or a cluster name (with --region)")
    status.add_argument("--region", metavar="R", help="region of a cluster NAME (default: the configured region)")
    status.set_defaults(func=run_status)
    listing = actions.add_parser("list", help="the clusters of a region")
    listing.add_argument("--region", metavar="R", help="region (default: the configured region)")
    listing.set_defaults(func=run_list)


def _load(file: str, argument: str = "FILE") -> tuple[Path, ElasticSlurmConfig]:
    path = Path(file)
    if not path.is_file():
        raise UserError(f"{argument}: {file}: no such file")
    return path, load(path)


def refuse_deployed(config: ElasticSlurmConfig, file: str) -> None:
    """UserError when a cluster of the file is deployed already (its config-url parameter exists)."""
    for cluster in config.clusters:
        url = config_url(cluster.name, cluster.region)
        if url is not None:
            raise UserError(
                f"cluster {cluster.name} is deployed already in {cluster.region} ({config_url_parameter(cluster.name)}"
                f" = {url}): change it with `elastic-slurm cluster update {file}`"
            )


def dryrun_lines(file: str, stacks: list[SynthesizedStack]) -> list[str]:
    """What `create --dryrun` prints: one line per stack `cdk deploy` would create, with its resource count."""
    width = max((len(s.name) for s in stacks), default=0)
    lines = [f"{file}: valid; `cluster create` would create {len(stacks)} stack(s):"]
    lines += [f"  {s.name:<{width}}  {s.region:<14} {s.resources:>4} resources" for s in stacks]
    lines.append(f"  {sum(s.resources for s in stacks)} resources in all")
    return lines


def _synth(path: Path, out: Path) -> int:
    try:
        command = synth_command(path, out)
        return subprocess.run(command, cwd=cdk_workdir(), env=synth_env(dict(os.environ)), check=False).returncode
    except OSError as exc:
        raise UserError(f"cannot run the CDK CLI: {exc.strerror}") from None


def run_create(args: argparse.Namespace) -> int:
    """Deploy a new cluster; --dryrun: synthesize and list the stacks (no AWS call)."""
    path, config = _load(args.file)
    if args.dryrun:
        with tempfile.TemporaryDirectory(prefix="es-create-") as scratch:
            out = Path(args.out) if args.out else Path(scratch)
            code = _synth(path, out)
            if code == 0:
                print("\n".join(dryrun_lines(args.file, stacks_of(out))))
            return code
    refuse_deployed(config, args.file)
    return cdk.run_cdk(cdk.deploy_command(path))


def run_update(args: argparse.Namespace) -> int:
    """Print the changes; refuse `not allowed` ones (exit 2); without --dryrun, deploy."""
    path, config = _load(args.file)
    against = _load(args.against, "--against")[0] if args.against else None
    plan = check_update(config, against)
    if args.dryrun:
        return 0
    disruptive = plan.disruptive()
    if disruptive and not args.yes:
        raise UserError(
            f"--yes: {len(disruptive)} change(s) act on running work (first: {disruptive[0].text()}); read the "
            "lines above (docs/updates.md), drain what they name, then run again with --yes"
        )
    return cdk.run_cdk(cdk.deploy_command(path))


def run_delete(args: argparse.Namespace) -> int:
    """Destroy every stack of the file (`cdk destroy` needs the file: it builds the stacks to delete from it)."""
    target = str(args.target)
    if not Path(target).is_file() and re.match(CLUSTER_NAME_PATTERN, target):
        raise UserError(
            f"FILE: '{target}' is not a file: `cdk destroy` builds the stacks from the YAML file the cluster was "
            f"deployed from (its deployed copy is the S3 object named by {config_url_parameter(target)})"
        )
    path, config = _load(target)
    print(f"deleting cluster(s) {', '.join(c.name for c in config.clusters)}: every stack of {target}")
    return cdk.run_cdk(cdk.destroy_command(path))


def status_lines(status: ClusterStatus) -> list[str]:
    """The block `cluster status` prints for one cluster."""
    if not status.found:
        return [f"cluster {status.name} ({status.region}): not deployed"]
    lines = [
        f"cluster {status.name} ({status.region})",
        f"  config: {status.config_url or '(no config-url parameter)'}",
    ]
    lines.append("  stacks:" if status.stacks else "  stacks: none")
    width = max((len(s.name) for s in status.stacks), default=0)
    for stack in status.stacks:
        reason = f"  {stack.reason}" if stack.reason and "FAILED" in stack.status else ""
        lines.append(f"    {stack.name:<{width}}  {stack.region:<14} {stack.status}{reason}")
    lines.append("  controllers:" if status.controllers else "  controllers: none")
    for c in status.controllers:
        lines.append(f"    {c.name or '-'}  {c.instance_id}  {c.state}  {c.instance_type}  {c.private_ip or '-'}")
    return lines


def run_status(args: argparse.Namespace) -> int:
    """Print the status of the file's clusters, or of cluster NAME in --region."""
    target = str(args.target)
    if Path(target).is_file():
        config = load(target)
        found = [cluster_status(c.name, c.region, tuple(r.region for r in c.remote_regions)) for c in config.clusters]
    else:
        if not re.match(CLUSTER_NAME_PATTERN, target):
            raise UserError(f"FILE|NAME: '{target}' is neither a file nor a cluster name")
        found = [cluster_status(target, default_region(args.region))]
    if not any(s.found for s in found):
        where = ", ".join(f"{s.name} ({s.region})" for s in found)
        raise UserError(f"not deployed: {where}: no es-NAME-* stack, controller or config-url parameter")
    for status in found:
        print("\n".join(status_lines(status)))
    return 0


def run_list(args: argparse.Namespace) -> int:
    """One line per cluster of the region: name, cluster stack status, config URL."""
    region = default_region(args.region)
    rows = list_clusters(region)
    if not rows:
        print(f"no clusters in {region}")
        return 0
    width = max(len(name) for name, _, _ in rows)
    for name, stack, url in rows:
        state = stack.status if stack is not None else "(no cluster stack)"
        print(f"{name:<{width}}  {state:<20}  {url or '(no config-url parameter)'}")
    return 0
