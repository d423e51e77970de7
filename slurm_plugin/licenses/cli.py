"""`slurm-license-sync`: one sync run (a systemd timer runs it on the controller at the configured schedule).

Exit codes: 0 when the run completed — even if some license servers failed (they are logged, counted in the state
file, and their licenses keep their last good numbers); 1 when nothing could be done (bad config, sacctmgr or
slurmdbd unreachable); 2 for bad arguments.

On a cluster with two controllers the timer fires on both: only the controller that reports for the cluster
(slurm_plugin/primary.py: the acting one, or the primary while no slurmctld answers) syncs; the other logs that it
stands by and exits 0.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Sequence
from pathlib import Path

from pydantic import ValidationError

from cluster_config import ConfigInvalid, load
from slurm_plugin import logs, primary
from slurm_plugin.accounting.sacctmgr import SacctmgrError
from slurm_plugin.licenses.adapters import LicenseServerTools, SlurmCommands, load_state, save_state
from slurm_plugin.licenses.sync import SyncConfig, run_sync, sync_config_from
from slurm_plugin.manifest import Manifest, ManifestError, load_manifest
from slurm_plugin.powersave.state import LOCAL_STATE_DIR

STATE_FILE = "license-sync.json"
STATE_SUBDIR = "license-sync"  # the sync's state dir under the plugin's state dir (the manifest's state_dir)
DEFAULT_STATE_DIR = Path(LOCAL_STATE_DIR) / STATE_SUBDIR  # without --manifest: one controller's


def state_dir_of(manifest: Manifest) -> Path:
    """Where the sync keeps its state and the exporter reads it: license-sync/ in the plugin's state dir — on the
    controllers' own file system with two controllers, so the backup's exporter and a failover see the same runs."""
    return Path(manifest.state_dir) / STATE_SUBDIR


class _Usage(Exception):
    """A bad argument or config file (one line)."""


def _load_config(args: argparse.Namespace) -> SyncConfig:
    if args.config:
        try:
            return SyncConfig.model_validate_json(Path(args.config).read_text(encoding="utf-8"))
        except OSError as exc:
            raise _Usage(f"--config {args.config}: cannot read: {exc.strerror}") from None
        except ValidationError as exc:
            first = exc.errors()[0]
            raise _Usage(f"--config {args.config}: {'.'.join(map(str, first['loc']))}: {first['msg']}") from None
    if not args.cluster:
        raise _Usage("--cluster-config needs --cluster (the cluster this sync runs on)")
    try:
        config = load(args.cluster_config)
    except ConfigInvalid as exc:
        raise _Usage(f"--cluster-config {args.cluster_config}: {exc.errors[0]}") from None
    if args.cluster not in {c.name for c in config.clusters}:
        raise _Usage(f"--cluster: no cluster '{args.cluster}' in {args.cluster_config}")
    return sync_config_from(config, args.cluster)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="slurm-license-sync", description=__doc__.splitlines()[0])
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--config", help="sync config JSON (rendered from the cluster config)")
    source.add_argument("--cluster-config", help="the cluster YAML instead of --config (needs --cluster)")
    parser.add_argument("--cluster", help="with --cluster-config: the cluster this sync runs on")
    state = parser.add_mutually_exclusive_group()
    state.add_argument("--manifest", help="the runtime manifest: the state goes to license-sync/ in its state_dir "
                       "(what slurm-license-sync.service passes; the exporter reads it there)")  # fmt: skip
    state.add_argument("--state-dir", help=f"where the state file lives (default: {DEFAULT_STATE_DIR})")
    parser.add_argument("--log-file", default=None, help="also log to this file")
    parser.add_argument("--dry-run", action="store_true", help="decide and log, change nothing")
    parser.add_argument("--host", default=None, help="this controller's Slurm name (default: hostname)")
    return parser


def main(argv: Sequence[str] | None = None, gate: primary.Gate | None = None) -> int:
    """Run one sync; see the module docstring for exit codes. `gate`: who reports for the cluster (default: this
    host's `scontrol ping`)."""
    args = build_parser().parse_args(argv)
    log = logs.setup(args.log_file, "slurm-license-sync")
    try:
        config = _load_config(args)
        state_dir = (
            state_dir_of(load_manifest(args.manifest)) if args.manifest else Path(args.state_dir or DEFAULT_STATE_DIR)
        )
        state_path = state_dir / STATE_FILE
    except (_Usage, ManifestError) as exc:
        log.error("%s", exc)
        return 2
    gate = gate or primary.Gate.for_slurm(None, None, args.host)
    if not gate.speaks():
        log.info("%s is not the acting controller: standing by", gate.host)
        return 0
    servers = LicenseServerTools(config.lmutil, config.rlmutil, config.timeout_seconds)
    slurm = SlurmCommands(config.local_cluster, timeout=config.timeout_seconds)
    try:
        result = run_sync(config, servers, slurm, load_state(state_path), time.time(), dry_run=args.dry_run)
    except SacctmgrError as exc:
        log.error("%s", exc)
        return 1
    if not args.dry_run:
        try:
            save_state(result.state, state_path)
        except OSError as exc:
            log.error("cannot write %s: %s", state_path, exc.strerror)
            return 1
    log.info("%d license(s) updated, %d problem(s)", len(result.updates), len(result.failures))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
