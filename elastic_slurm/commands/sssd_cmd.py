"""`elastic-slurm render-sssd`: write sssd.conf (mode 0600) from the config's `clusters[].directory` section (the
JSON of the cluster's directory parameter) and the bind password read from Secrets Manager, both fetched by
assets/bootstrap/elastic-slurm-directory (slurm_plugin/render/sssd.py)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from elastic_slurm.errors import UserError
from elastic_slurm.private_file import write_private
from slurm_plugin.render.sssd import SssdConfigError, load_section, render_sssd_conf


def register(sub: Any) -> None:
    """Add the `render-sssd` subcommand."""
    cmd = sub.add_parser("render-sssd", help="write sssd.conf from the directory section and the bind password")
    cmd.add_argument("--directory-json", required=True, metavar="FILE", help="the directory parameter's value")
    cmd.add_argument("--password-file", metavar="FILE", help="the bind password secret's value (empty: anonymous)")
    cmd.add_argument("--out", required=True, metavar="FILE", help="where to write sssd.conf")
    cmd.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Render and write the file atomically with mode 0600 (owner root, as sssd requires)."""
    try:
        section = Path(args.directory_json).read_text(encoding="utf-8")
    except OSError as exc:
        raise UserError(f"--directory-json: cannot read {args.directory_json}: {exc.strerror}") from None
    password = None
    if args.password_file:
        try:
            password = Path(args.password_file).read_text(encoding="utf-8") or None
        except OSError as exc:
            raise UserError(f"--password-file: cannot read {args.password_file}: {exc.strerror}") from None
    try:
        text = render_sssd_conf(load_section(section), password)
    except SssdConfigError as exc:
        raise UserError(f"--directory-json: {exc}" if str(exc).startswith("not a") else str(exc)) from None
    out = Path(args.out)
    write_private(out, text)
    print(f"wrote {out}")
    return 0
