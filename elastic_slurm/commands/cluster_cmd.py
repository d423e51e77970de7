"""`elastic-slurm cluster create|update|diff|delete|status|list`: a deployed cluster's life cycle (like `pcluster`).

create FILE [--dryrun] [--yes]    validate, check the credentials, refuse a cluster already deployed, `cdk deploy
                                  --all`; --dryrun: validate and synthesize offline, print the stacks it would create
update FILE [--dryrun] [--against OLD.yaml] [--yes] [--output json]
                                  diff against the deployed config (or OLD.yaml), one line per change with its update
                                  policy (cluster_config/update_policy.py), refuse `not allowed`, ask for --yes where
                                  lifecycle/update_check.py says, then `cdk deploy --all`
diff FILE                         `cdk diff --all`: the template, IAM and security group changes a deploy would make
delete NAME... --region R | FILE  cluster_delete.py: from the deployed config, after a confirmation (or --yes)
status FILE|NAME, list            cluster_show.py (text or --output json)

Deploys keep CDK's approval of broadening changes (IAM, security groups: `--require-approval broadening`) unless
`--yes`. Every refusal (already deployed, not allowed, no file, no credentials) happens before the CDK CLI starts.
See docs/cluster-lifecycle.md.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from cluster_config import ElasticSlurmConfig, load
from elastic_slurm.commands import cluster_delete, cluster_show
from elastic_slurm.commands.arg_checks import PATH_ECHO_LIMIT, is_file, shown
from elastic_slurm.commands.synth_cmd import cdk_workdir, check_toolchain, synth_command, synth_env
from elastic_slurm.errors import OperationFailed, UserError
from elastic_slurm.lifecycle import cdk
from elastic_slurm.lifecycle.assembly import SynthesizedStack, stacks_of
from elastic_slurm.lifecycle.aws import caller_account
from elastic_slurm.lifecycle.deployed import config_url
from elastic_slurm.lifecycle.update_check import plan_update, refuse_not_allowed, require_yes
from slurm_plugin.naming import config_url_parameter

YES_HELP = (
    "approve up front: broadening IAM/security-group changes (else CDK asks), and changes that act on running work"
)


def register(sub: Any) -> None:
    """Add `cluster` and its actions."""
    cluster = sub.add_parser("cluster", help="create, update, delete and inspect deployed clusters")
    actions = cluster.add_subparsers(dest="action", required=True, parser_class=type(cluster))
    create = actions.add_parser("create", help="deploy a new cluster (cdk deploy --all)")
    create.add_argument("file", metavar="FILE", help="cluster YAML file")
    create.add_argument("--dryrun", action="store_true", help="validate and synthesize only (offline); list the stacks")
    create.add_argument("--out", metavar="DIR", help="with --dryrun: keep the cloud assembly in DIR")
    create.add_argument("--yes", action="store_true", help=YES_HELP)
    create.set_defaults(func=run_create)
    update = actions.add_parser("update", help="check an edited config against the deployed one, then deploy it")
    update.add_argument("file", metavar="FILE", help="the edited cluster YAML file")
    update.add_argument("--dryrun", action="store_true", help="print the changes and their policies; deploy nothing")
    update.add_argument("--against", metavar="OLD.yaml", help="diff against this file instead of the deployed config")
    update.add_argument("--yes", action="store_true", help=YES_HELP)
    cluster_show.add_output(update)
    update.set_defaults(func=run_update)
    diff = actions.add_parser("diff", help="what a deploy of FILE would change in the deployed stacks (cdk diff)")
    diff.add_argument("file", metavar="FILE", help="cluster YAML file")
    diff.set_defaults(func=run_diff)
    delete = actions.add_parser("delete", help="delete a deployed cluster, after naming every stack and confirming")
    delete.add_argument(
        "target", metavar="NAME", nargs="+", help="cluster name(s), every cluster of its deployed config; or one FILE"
    )
    delete.add_argument("--region", metavar="R", help="the clusters' home region (default: the configured one)")
    delete.add_argument("--yes", action="store_true", help="do not ask: delete what the listing names")
    delete.set_defaults(func=cluster_delete.run_delete)
    status = actions.add_parser("status", help="stacks, controllers and config URL of a deployed cluster")
    status.add_argument("target", metavar="FILE|NAME", help="cluster YAML file, or a cluster name (with --region)")
    status.add_argument("--region", metavar="R", help="region of a cluster NAME (default: the configured region)")
    cluster_show.add_output(status)
    status.set_defaults(func=cluster_show.run_status)
    listing = actions.add_parser("list", help="the clusters of a region")
    listing.add_argument("--region", metavar="R", help="region (default: the configured region)")
    cluster_show.add_output(listing)
    listing.set_defaults(func=cluster_show.run_list)


def _load(file: str, argument: str = "FILE") -> tuple[Path, ElasticSlurmConfig]:
    path = Path(file)
    if not is_file(file):
        raise UserError(
            f"{argument}: {file if file.isprintable() and len(file) <= PATH_ECHO_LIMIT else shown(file)}: no such file"
        )
    return path, load(path)


def check_credentials(config: ElasticSlurmConfig) -> None:
    """Step one of every command that deploys: credentials that work in each home region (one line when not)."""
    for region in sorted({c.region for c in config.clusters}):
        caller_account(region)


def refuse_deployed(config: ElasticSlurmConfig, file: str) -> None:
    """OperationFailed when a cluster of the file is deployed already (its config-url parameter exists)."""
    for cluster in config.clusters:
        url = config_url(cluster.name, cluster.region)
        if url is not None:
            raise OperationFailed(
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
    command = synth_command(path, out)
    env = synth_env(dict(os.environ))
    check_toolchain(env)
    try:
        return subprocess.run(command, cwd=cdk_workdir(), env=env, check=False).returncode
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
    check_credentials(config)
    refuse_deployed(config, args.file)
    return cdk.run_cdk(cdk.deploy_command(path, yes=args.yes))


def run_update(args: argparse.Namespace) -> int:
    """Print the changes; refuse `not allowed` ones (exit 2) and those needing --yes without it; else deploy."""
    path, config = _load(args.file)
    against = _load(args.against, "--against")[0] if args.against else None
    if not args.dryrun:
        check_credentials(config)
    plan = plan_update(config, against)
    if args.output == "json":
        print(json.dumps(plan.as_json(), indent=2))
    else:
        print("\n".join(plan.lines()))
    refuse_not_allowed(plan)
    if args.dryrun:
        if args.output == "text" and plan.disruptive():
            print("\n".join(require_yes(plan, yes=True)))
            print("a deploy of these needs --yes")
        return 0
    for warning in require_yes(plan, args.yes):
        print(warning, file=sys.stderr)
    return cdk.run_cdk(cdk.deploy_command(path, yes=args.yes))


def run_diff(args: argparse.Namespace) -> int:
    """`cdk diff --all` of the file (CDK's output streams through; its exit code)."""
    path, config = _load(args.file)
    check_credentials(config)
    return cdk.run_cdk(cdk.diff_command(path))
