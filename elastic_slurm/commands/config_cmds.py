"""`elastic-slurm validate FILE... [--cache CACHE.json]` (checks + idle cost estimate) and `elastic-slurm schema`: check configs and export the JSON Schema."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from cluster_config import ConfigInvalid, ElasticSlurmConfig, load
from cluster_config.idle_cost import PriceLookup, cost_lines, idle_cost
from elastic_slurm.errors import UserError
from slurm_plugin.instance_cache import CacheError, load_cache


def register(sub: Any) -> None:
    """Add the `validate` and `schema` subcommands."""
    validate = sub.add_parser("validate", help="validate cluster YAML files and print a summary")
    validate.add_argument("files", nargs="+", metavar="FILE", help="cluster YAML file(s)")
    validate.add_argument(
        "--cache",
        metavar="CACHE.json",
        help="instance cache (`elastic-slurm instance-cache refresh`) pricing the EC2 part of the idle cost estimate",
    )
    validate.set_defaults(func=run_validate)
    schema = sub.add_parser("schema", help="write the JSON Schema of the cluster YAML (for editor autocompletion)")
    schema.add_argument("--out", metavar="FILE", help="write to FILE instead of stdout")
    schema.set_defaults(func=run_schema)


def summary(config: ElasticSlurmConfig) -> list[str]:
    """One line per cluster: partitions, pools and node counts."""
    lines = []
    for cluster in config.clusters:
        pools = [p for part in cluster.partitions for p in part.pools]
        always_on, most = sum(p.min_nodes for p in pools), sum(p.max_nodes for p in pools)
        lines.append(
            f"  cluster {cluster.name} ({cluster.region}): {len(cluster.partitions)} partition(s), "
            f"{len(pools)} pool(s), {always_on} always-on / {most} max nodes"
            + (f", {sum(p.count for p in cluster.login_nodes)} login node(s)" if cluster.login_nodes else "")
        )
    extras = [f"accounting={config.accounting.mode}"]
    if config.licenses:
        extras.append(f"licenses={','.join(lic.name for lic in config.licenses)}")
    if config.federation:
        extras.append(f"federation={config.federation.name}")
    lines.append("  " + " ".join(extras))
    for site in config.onprem_clusters:
        lines.append(f"  on-prem cluster {site.name} bursts to {', '.join(site.burst_to)} (sbatch -M)")
    return lines


def price_lookup(cache_path: str | None) -> PriceLookup:
    """On-demand USD/hour by (region, instance type) from the instance cache; without a cache nothing is priced."""
    if cache_path is None:
        return lambda _region, _itype: None
    try:
        cache = load_cache(cache_path)
    except CacheError as exc:
        raise UserError(f"--cache: {exc}") from None

    def lookup(region: str, instance_type: str) -> float | None:
        info = cache.regions.get(region, {}).get(instance_type)
        return info.prices.on_demand if info is not None else None

    return lookup


def run_validate(args: argparse.Namespace) -> int:
    """Validate every file; print all problems of all files; exit 2 if any file is invalid."""
    failed = False
    lookup = price_lookup(args.cache)
    for path in args.files:
        try:
            config = load(path)
        except ConfigInvalid as exc:
            failed = True
            for error in exc.errors:
                print(f"{exc.source}: {error}", file=sys.stderr)
            continue
        print(f"{path}: valid")
        for line in summary(config) + cost_lines(idle_cost(config, lookup)):
            print(line)
    return 2 if failed else 0


def json_schema() -> dict[str, Any]:
    """The JSON Schema of the cluster YAML."""
    schema = ElasticSlurmConfig.model_json_schema()
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "Elastic Slurm cluster configuration"
    return schema


def run_schema(args: argparse.Namespace) -> int:
    """Print or write the JSON Schema."""
    text = json.dumps(json_schema(), indent=2) + "\n"
    if args.out:
        try:
            Path(args.out).write_text(text, encoding="utf-8")
        except OSError as exc:
            raise UserError(f"--out {args.out}: cannot write: {exc.strerror or exc}") from None
    else:
        sys.stdout.write(text)
    return 0
