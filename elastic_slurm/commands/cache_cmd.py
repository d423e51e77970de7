"""`elastic-slurm instance-cache refresh FILE --out CACHE.json`: build the instance cache for a cluster config."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from cluster_config import load
from elastic_slurm.errors import UserError
from slurm_plugin.instance_cache import CacheError, write_cache
from slurm_plugin.instance_cache_aws import build_cache, client_factory, types_by_region


def register(sub: Any) -> None:
    """Add `instance-cache refresh`."""
    cache = sub.add_parser("instance-cache", help="build the instance type cache render and the plugin read")
    actions = cache.add_subparsers(dest="action", required=True, parser_class=type(cache))
    refresh = actions.add_parser("refresh", help="query EC2 for the instance types of a config and write the cache")
    refresh.add_argument("file", metavar="FILE", help="cluster YAML file")
    refresh.add_argument("--out", required=True, metavar="CACHE.json", help="where to write the cache")
    refresh.add_argument("--endpoint-url", metavar="URL", help="AWS endpoint (the local cloud's moto server)")
    refresh.add_argument(
        "--no-on-demand-prices", action="store_true", help="skip the Price List API (on-demand prices stay null)"
    )
    refresh.set_defaults(func=run_refresh)


def run_refresh(args: argparse.Namespace) -> int:
    """Query every region the config uses once and write the cache."""
    config = load(args.file)
    out = Path(args.out)
    if not out.parent.is_dir():
        raise UserError(f"--out: directory {out.parent} does not exist")
    wanted = types_by_region(config)
    try:
        cache = build_cache(wanted, client_factory(args.endpoint_url), with_on_demand=not args.no_on_demand_prices)
    except CacheError as exc:
        raise UserError(str(exc)) from None
    write_cache(cache, out)
    count = sum(len(types) for types in cache.regions.values())
    print(f"{out}: {count} instance type(s) in {len(cache.regions)} region(s)")
    return 0
