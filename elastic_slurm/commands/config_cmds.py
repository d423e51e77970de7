"""`elastic-slurm validate FILE... [--cache CACHE.json] [--output json] [--ignore-warning CODE]` (checks, warnings and
the idle cost estimate) and `elastic-slurm schema`: check configs and export the JSON Schema.

Exit codes (elastic_slurm/exit_codes.py, docs/validate.md): 0 every file valid (warnings may be printed), 3 a file is
invalid, 2 a usage error (unknown warning code, unusable --cache). `--output json` prints one JSON object per file on
stdout: `{"file", "valid", "errors": [{"path", "message"}], "warnings": [{"path", "code", "message"}]}`.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from cluster_config import ConfigInvalid, ElasticSlurmConfig, load
from cluster_config.idle_cost import PriceLookup, cost_lines, idle_cost
from cluster_config.instance_checks import TypeFacts, TypeInfo
from cluster_config.warning_checks import WARNINGS, ConfigWarning, config_warnings
from elastic_slurm import exit_codes
from elastic_slurm.errors import UserError
from slurm_plugin.instance_cache import CacheError, InstanceCache, load_cache


def register(sub: Any) -> None:
    """Add the `validate` and `schema` subcommands."""
    validate = sub.add_parser("validate", help="validate cluster YAML files and print a summary")
    validate.add_argument("files", nargs="+", metavar="FILE", help="cluster YAML file(s)")
    validate.add_argument(
        "--cache",
        metavar="CACHE.json",
        help="instance cache (`elastic-slurm instance-cache refresh`): checks offerings per region and GPU facts, "
        "and prices the EC2 part of the idle cost estimate",
    )
    validate.add_argument(
        "--output", choices=("text", "json"), default="text", help="json: one JSON object per file on stdout"
    )
    validate.add_argument(
        "--ignore-warning",
        action="append",
        default=[],
        metavar="CODE",
        help=f"do not print this warning (repeatable): {', '.join(WARNINGS)}",
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


def read_cache(cache_path: str | None) -> InstanceCache | None:
    """The instance cache of `--cache`, or None; UserError (one line) when it cannot be used."""
    if cache_path is None:
        return None
    try:
        return load_cache(cache_path)
    except CacheError as exc:
        raise UserError(f"--cache: {exc}") from None


def price_lookup(cache: InstanceCache | None) -> PriceLookup:
    """On-demand USD/hour by (region, instance type) from the instance cache; without a cache nothing is priced."""
    if cache is None:
        return lambda _region, _itype: None

    def lookup(region: str, instance_type: str) -> float | None:
        info = cache.regions.get(region, {}).get(instance_type)
        return info.prices.on_demand if info is not None else None

    return lookup


def type_facts(cache: InstanceCache | None, source: str | None) -> TypeFacts | None:
    """The facts the validator reads from an instance cache (None without one)."""
    if cache is None:
        return None
    regions = {
        region: {
            itype: TypeInfo(
                gpu_count=info.gpus.count if info.gpus else 0,
                gpu_maker=info.gpus.manufacturer if info.gpus else "",
                architecture=info.architecture,
                vcpus=info.vcpus,
                cores=info.cores,
                memory_mib=info.memory_mib,
                azs=tuple(info.availability_zones) if info.availability_zones is not None else None,
            )
            for itype, info in types.items()
        }
        for region, types in cache.regions.items()
    }
    return TypeFacts(source=str(source), regions=regions)


def run_validate(args: argparse.Namespace) -> int:
    """Validate every file; print all problems and warnings of all files; exit 3 if any file is invalid."""
    unknown = [code for code in args.ignore_warning if code not in WARNINGS]
    if unknown:
        raise UserError(f"--ignore-warning {unknown[0]}: no such warning (codes: {', '.join(WARNINGS)})")
    cache = read_cache(args.cache)
    facts, lookup = type_facts(cache, args.cache), price_lookup(cache)
    failed = False
    for path in args.files:
        try:
            config = load(path, facts)
        except ConfigInvalid as exc:
            failed = True
            if args.output == "json":
                _print_json(path, exc.errors, [])
            else:
                for error in exc.errors:
                    print(f"{exc.source}: {error}", file=sys.stderr)
            continue
        warnings = [w for w in config_warnings(config, facts) if w.code not in args.ignore_warning]
        if args.output == "json":
            _print_json(path, [], warnings)
            continue
        print(f"{path}: valid")
        for line in summary(config) + cost_lines(idle_cost(config, lookup)):
            print(line)
        for warning in warnings:  # part of the report (stdout): the file is valid, stderr is for what is not
            print(f"{path}: {warning}")
    return exit_codes.INVALID_CONFIG if failed else exit_codes.OK


def _print_json(path: str, errors: list[Any], warnings: list[ConfigWarning]) -> None:
    report = {
        "file": path,
        "valid": not errors,
        "errors": [{"path": e.path, "message": e.message} for e in errors],
        "warnings": [{"path": w.path, "code": w.code, "message": w.message} for w in warnings],
    }
    print(json.dumps(report))


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
