"""`elastic-slurm cluster delete NAME... [--region R] [--yes]` (or `cluster delete FILE`): delete a deployed cluster.

In this order, each step one line on failure, and nothing slow before the first three:
1. credentials: one STS GetCallerIdentity per region (no synth, no CDK placeholder account in an error);
2. existence: each cluster's config-url parameter and `es-NAME-*` stacks (home and remote regions);
3. the config to destroy from: given NAMEs, the deployed one (the S3 object the parameter names), so no YAML is
   needed; every cluster of that config is deleted together (their stacks depend on each other), so each must be
   named on the command line: a multi-cluster config never goes without naming every cluster;
4. confirmation: the clusters, regions and every existing stack are listed, and the operator types the cluster
   name(s) — or passes `--yes`; without a terminal and without `--yes` nothing is deleted;
5. `cdk destroy --all --force -c config=...` through the pinned CDK CLI (lifecycle/cdk.py).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from cluster_config import ElasticSlurmConfig, load
from elastic_slurm.commands.arg_checks import is_cluster_name, is_file, shown
from elastic_slurm.errors import OperationFailed, UserError
from elastic_slurm.lifecycle import cdk
from elastic_slurm.lifecycle.aws import caller_account, default_region
from elastic_slurm.lifecycle.deployed import config_url, parse_deployed, read_object
from elastic_slurm.lifecycle.status import StackStatus, cluster_stacks
from slurm_plugin.naming import config_url_parameter


@dataclass(frozen=True)
class Deletion:
    """What `cluster delete` would delete: the config's clusters and the stacks of theirs that exist."""

    config: ElasticSlurmConfig
    source: str  # the file, or the deployed object's URL
    accounts: dict[str, str]  # region → account of the credentials
    stacks: list[StackStatus]
    deployed_text: str | None = None  # the deployed config's YAML (None: deleting from the file `source`)

    def lines(self) -> list[str]:
        """The confirmation text: exactly what goes."""
        clusters = ", ".join(f"{c.name} ({c.region})" for c in self.config.clusters)
        accounts = ", ".join(f"{account} in {region}" for region, account in sorted(self.accounts.items()))
        out = [f"cluster delete: cluster(s) {clusters}, account {accounts}, from {self.source}"]
        out.append(f"  {len(self.stacks)} stack(s), every resource in them, controllers and compute instances:")
        out += [f"    {s.name}  {s.region}  {s.status}" for s in self.stacks]
        out.append("  kept: EFS file systems, the database's final snapshot, backups (docs/deploy.md, Teardown)")
        return out


def _regions(config: ElasticSlurmConfig) -> list[str]:
    return sorted({c.region for c in config.clusters} | {r.region for c in config.clusters for r in c.remote_regions})


def _stacks(config: ElasticSlurmConfig) -> list[StackStatus]:
    return [
        s
        for c in config.clusters
        for region in dict.fromkeys((c.region, *(r.region for r in c.remote_regions)))
        for s in cluster_stacks(c.name, region)
    ]


def _deployed(names: list[str], region: str) -> tuple[ElasticSlurmConfig, str, str]:
    """The deployed config the first named cluster runs (every cluster of it goes: each must be named)."""
    first = names[0]
    url = config_url(first, region)
    if url is None:
        stacks = [s.name for s in cluster_stacks(first, region)]
        if stacks:
            raise OperationFailed(
                f"NAME: {first} has stacks in {region} ({', '.join(stacks)}) but no {config_url_parameter(first)} "
                "parameter: delete it from the file it was deployed from: elastic-slurm cluster delete FILE"
            )
        raise OperationFailed(
            f"NAME: no cluster '{first}' is deployed in {region} (no es-{first}-* stack, no parameter)"
        )
    text = read_object(url, region)
    config = parse_deployed(text, url)
    held = [c.name for c in config.clusters]
    strangers = [n for n in names if n not in held]
    if strangers:
        raise UserError(
            f"NAME: {strangers[0]} is not a cluster of {first}'s deployed config ({url}: {', '.join(held)})"
        )
    others = [n for n in held if n not in names]
    if others:
        raise UserError(
            f"NAME: {first} was deployed from one config with {', '.join(others)}; they are deleted together "
            f"(their stacks depend on each other): name them all: elastic-slurm cluster delete {' '.join(held)} "
            f"--region {region}"
        )
    return config, url, text


def plan_deletion(targets: list[str], region: str | None) -> Deletion:
    """Steps 1-3 of the module docstring; UserError/OperationFailed on the first problem."""
    if len(targets) == 1 and is_file(targets[0]):
        config, source = load(targets[0]), targets[0]
        accounts = {r: caller_account(r) for r in _regions(config)}
        stacks = _stacks(config)
        if not stacks and all(config_url(c.name, c.region) is None for c in config.clusters):
            where = ", ".join(f"{c.name} ({c.region})" for c in config.clusters)
            raise OperationFailed(f"FILE: nothing of {where} is deployed (no es-NAME-* stack, no parameter)")
        return Deletion(config, source, accounts, stacks)
    bad = [t for t in targets if not is_cluster_name(t)]
    if bad:
        raise UserError(f"NAME: {shown(bad[0])} is neither a file nor a cluster name")
    home = default_region(region)
    accounts = {home: caller_account(home)}
    config, url, text = _deployed(list(dict.fromkeys(targets)), home)
    accounts |= {r: caller_account(r) for r in _regions(config) if r not in accounts}
    return Deletion(config, url, accounts, _stacks(config), text)


def confirmed(deletion: Deletion, yes: bool) -> bool:
    """Step 4: `--yes`, or the operator typed the cluster names; UserError without a terminal to ask on."""
    if yes:
        return True
    if not sys.stdin.isatty():
        raise UserError("--yes: nothing deleted: no terminal to confirm on; read the lines above, then add --yes")
    names = " ".join(c.name for c in deletion.config.clusters)
    try:
        answer = input(f"type '{names}' to delete: ")
    except EOFError:  # Ctrl-D: no answer
        return False
    return answer.split() == names.split()


def run_delete(args: argparse.Namespace) -> int:
    """Plan, list, confirm, then `cdk destroy` the deployed config (NAMEs) or the file."""
    deletion = plan_deletion(list(args.target), args.region)
    print("\n".join(deletion.lines()))
    if not confirmed(deletion, args.yes):
        raise OperationFailed("not confirmed: nothing deleted")
    if deletion.deployed_text is None:
        return cdk.run_cdk(cdk.destroy_command(Path(deletion.source)))
    with tempfile.TemporaryDirectory(prefix="es-delete-") as scratch:
        copy = Path(scratch) / "deployed.yaml"
        copy.write_text(deletion.deployed_text, encoding="utf-8")
        return cdk.run_cdk(cdk.destroy_command(copy))
