"""`elastic-slurm render-slurmdbd`: write slurmdbd.conf (mode 0600) from the accounting database's secret JSON and,
with `--config`, the config's `accounting.slurmdbd_settings` (the controller passes the config it applied,
/etc/elastic-slurm/cluster.yaml: at boot, stacks/user_data.py, and at each config sync,
assets/bootstrap/elastic-slurm-config-apply)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from cluster_config import load
from elastic_slurm.errors import UserError
from elastic_slurm.private_file import write_private
from slurm_plugin.render import overrides as render_overrides
from slurm_plugin.render import rest_api
from slurm_plugin.render.dbd import DbdConfigError, DbdPaths, render_slurmdbd_conf
from slurm_plugin.render.manifest import RenderError


def register(sub: Any) -> None:
    """Add the `render-slurmdbd` subcommand."""
    cmd = sub.add_parser("render-slurmdbd", help="write slurmdbd.conf from the accounting secret (JSON)")
    cmd.add_argument("--secret-json", required=True, metavar="FILE", help="the secret's SecretString (RDS JSON)")
    cmd.add_argument("--dbd-host", required=True, help="host name slurmdbd runs on (DbdHost)")
    cmd.add_argument("--config", metavar="FILE", help="cluster YAML whose accounting.slurmdbd_settings are merged in")
    cmd.add_argument("--out", required=True, metavar="FILE", help="where to write slurmdbd.conf")
    cmd.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Render and write the file atomically with mode 0600."""
    try:
        secret = json.loads(Path(args.secret_json).read_text(encoding="utf-8"))
    except OSError as exc:
        raise UserError(f"--secret-json: cannot read {args.secret_json}: {exc.strerror}") from None
    except json.JSONDecodeError as exc:
        raise UserError(f"--secret-json: not JSON: {exc.msg}") from None
    if not isinstance(secret, dict):
        raise UserError("--secret-json: expected a JSON object")
    config = load(args.config) if args.config else None
    settings = config.accounting.slurmdbd_settings if config is not None else {}
    try:
        overrides = render_overrides.load()
        paths = render_overrides.apply(DbdPaths(), overrides["dbd"], "dbd")
        jwt_key = rest_api.dbd_jwt_key(config, overrides["base"]) if config is not None else None
        text = render_slurmdbd_conf(secret, args.dbd_host, paths=paths, settings=settings, jwt_key=jwt_key)
    except (DbdConfigError, RenderError) as exc:
        raise UserError(str(exc)) from None
    out = Path(args.out)
    write_private(out, text)
    print(f"wrote {out}")
    return 0
