"""`elastic-slurm cost --since WHEN`: what each job cost, on the controller (where sacct works).

Jobs come from one sacct call, which instance ran each node from the plugin's event log, prices from the instance
cache (slurm_plugin/cost/, rules in docs/cost.md); beside the jobs, the idle cost of the always-on parts from the
cluster YAML (cluster_config/idle_cost.py). `elastic-slurm local cost` runs this same command on a local cloud's
controller (`run_on_cloud`).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any

from cluster_config.idle_cost import HOURS_PER_MONTH, CostEstimate, cost_lines, idle_cost
from elastic_slurm.errors import UserError
from slurm_plugin.cost import when
from slurm_plugin.cost.ledger import build_ledger
from slurm_plugin.cost.render import report_json, table_lines, usd
from slurm_plugin.cost.report import GROUPINGS, CostReport, build_report
from slurm_plugin.cost.sacct import SacctError, parse_sacct, run_sacct
from slurm_plugin.instance_cache import CacheError, InstanceCache, load_cache
from slurm_plugin.manifest import Manifest, ManifestError, load_manifest
from slurm_plugin.powersave.background import DEFAULT_MANIFEST, manifest_path
from slurm_plugin.telemetry import events

DEFAULT_CONFIG = "/etc/elastic-slurm/cluster.yaml"  # where the controller keeps the cluster YAML
ELASTIC_SLURM_IN_IMAGE = "/opt/elastic-slurm/bin/elastic-slurm"
clock = time.time  # "now" (tests fix it)


def add_cost_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of `cost` (shared with `local cost`)."""
    parser.add_argument(
        "--since", required=True, metavar="WHEN", help="start of the window, as sacct takes it: 2026-11-01, "
        "2026-11-01T10:00, now-7days, today, midnight ...",
    )  # fmt: skip
    parser.add_argument("--until", metavar="WHEN", help="end of the window (default: now)")
    parser.add_argument("--by", choices=GROUPINGS, default="job", help="one line per job (default), user, ...")
    parser.add_argument("--format", choices=("table", "json"), default="table", help="table (default) or json")
    parser.add_argument(
        "--manifest", metavar="PATH", help=f"runtime manifest (default: $ELASTIC_SLURM_MANIFEST or {DEFAULT_MANIFEST})"
    )
    parser.add_argument("--cache", metavar="PATH", help="instance cache (default: the manifest's)")
    parser.add_argument(
        "--config",
        metavar="PATH",
        help=f"cluster YAML for the idle cost (default: {DEFAULT_CONFIG}; skipped if absent)",
    )


def register(sub: Any) -> None:
    """Add `cost`."""
    cost = sub.add_parser(
        "cost", help="run on a controller: what each job cost (sacct x event log x instance cache prices)"
    )
    add_cost_arguments(cost)
    cost.set_defaults(func=run_cost)


def read_sacct(manifest: Manifest, since: float, until: float) -> str:
    """The sacct adapter: the window's allocations as sacct prints them (tests replace this function)."""
    return run_sacct(since, until, manifest.slurm_bin_dir, manifest.slurm_conf)


def run_cost(args: argparse.Namespace) -> int:
    """Print the report; UserError (exit 2, one line) for bad arguments or a missing manifest, cache or sacct."""
    now = clock()
    since = _when("--since", args.since, now)
    until = _when("--until", args.until, now) if args.until else now
    if until <= since:
        raise UserError(f"--until: {when.iso(until)} is not after --since {when.iso(since)}")
    try:
        manifest = load_manifest(args.manifest or manifest_path())
    except ManifestError as exc:
        raise UserError(f"--manifest: {exc}") from None
    try:
        cache = load_cache(args.cache or manifest.instance_cache_path)
    except CacheError as exc:
        raise UserError(f"--cache: {exc}") from None
    try:
        runs = parse_sacct(read_sacct(manifest, since, until))
    except SacctError as exc:
        raise UserError(f"sacct: {exc}") from None
    ledger = build_ledger(events.read_all(manifest.state_dir))
    report = build_report(manifest, cache, ledger, runs, since, until, args.by)
    idle, note = idle_estimate(args.config or DEFAULT_CONFIG, manifest.cluster, cache)
    if args.format == "json":
        data = report_json(report)
        data["idle"] = _idle_json(idle, report) if idle is not None else None
        data["idle_note"] = note
        print(json.dumps(data, indent=2))
        return 0
    print("\n".join(table_lines(report)))
    print()
    if idle is None:
        print(note)
    else:
        print("\n".join(cost_lines(idle)))
        print(f"  idle cost over this {report.hours:.2f} h window: ${usd(_window_usd(idle, report))}")
    return 0


def _when(option: str, text: str, now: float) -> float:
    try:
        return when.resolve(text, now)
    except when.WhenError as exc:
        raise UserError(f"{option}: {exc}") from None


def idle_estimate(config_path: str, cluster: str, cache: InstanceCache) -> tuple[CostEstimate | None, str]:
    """The idle monthly cost of `cluster` (and the accounting database) from its YAML, or None and a one-line note
    saying why it is skipped."""
    from cluster_config import ConfigInvalid, load

    try:
        config = load(config_path)
    except ConfigInvalid as exc:
        first = str(exc.errors[0]) if exc.errors else "invalid"
        return None, f"idle cost: skipped ({config_path}: {first}; see --config)"
    mine = [c for c in config.clusters if c.name == cluster]
    if not mine:
        return None, f"idle cost: skipped ({config_path} has no cluster {cluster}; see --config)"

    def on_demand(region: str, instance_type: str) -> float | None:
        info = cache.regions.get(region, {}).get(instance_type)
        return info.prices.on_demand if info is not None else None

    return idle_cost(config.model_copy(update={"clusters": mine}), on_demand), ""


def _window_usd(idle: CostEstimate, report: CostReport) -> float:
    """The monthly idle cost spread over the report's window."""
    return idle.total * report.hours / HOURS_PER_MONTH


def _idle_json(idle: CostEstimate, report: CostReport) -> dict[str, Any]:
    return {
        "monthly_usd": idle.total,
        "window_usd": _window_usd(idle, report),
        "items": [{"what": what, "monthly_usd": value} for what, value in idle.items],
        "unpriced": list(idle.unpriced),
    }


def run_on_cloud(cloud: Any, args: argparse.Namespace) -> int:
    """`local cost`: run `elastic-slurm cost` on the local cloud's controller (its manifest, cache, YAML and sacct at
    the paths a real controller has them); its output and exit code are this command's."""
    argv = [ELASTIC_SLURM_IN_IMAGE, "cost", "--since", args.since, "--by", args.by, "--format", args.format]
    for option in ("until", "manifest", "cache", "config"):
        if getattr(args, option):
            argv += [f"--{option}", getattr(args, option)]
    result = cloud.on_controller(argv, timeout=300)
    sys.stdout.write(result.stdout)
    sys.stderr.write(result.stderr)
    return int(result.returncode)
