"""Entry point of `elastic-slurm`: builds the argparse tree from the command modules and turns errors into one line.

Each subcommand lives in `elastic_slurm.commands.<module>` and exposes `register(subparsers)`; the handler it sets
with `set_defaults(func=...)` returns the exit code. Known failures (UserError, ConfigInvalid) print one line per
problem on stderr and exit 2 — never a traceback.
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence

from cluster_config import ConfigInvalid
from elastic_slurm.commands import (
    cache_cmd,
    cluster_cmd,
    config_cmds,
    configure_cmd,
    connect_cmd,
    cost_cmd,
    fleet_cmd,
    local_cmd,
    logs_cmd,
    onprem_cmd,
    render_cmd,
    slurmdbd_cmd,
    sssd_cmd,
    status_cmd,
    synth_cmd,
)
from elastic_slurm.errors import UserError

COMMAND_MODULES = [
    config_cmds,
    configure_cmd,
    render_cmd,
    slurmdbd_cmd,
    sssd_cmd,
    cache_cmd,
    synth_cmd,
    local_cmd,
    status_cmd,
    logs_cmd,
    connect_cmd,
    cluster_cmd,
    fleet_cmd,
    cost_cmd,
    onprem_cmd,
]


class _Parser(argparse.ArgumentParser):
    """argparse, but usage errors exit 2 with one line (argparse prints usage + error; keep the error only)."""

    def error(self, message: str) -> None:  # type: ignore[override]
        print(f"{self.prog}: error: {message}", file=sys.stderr)
        raise SystemExit(2)


def build_parser() -> argparse.ArgumentParser:
    """The full argument parser (also used by the docs and tests)."""
    parser = _Parser(prog="elastic-slurm", description="Elastic, federated Slurm clusters on AWS.")
    parser.add_argument("-v", "--verbose", action="store_true", help="log debug details to stderr")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    for module in COMMAND_MODULES:
        module.register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; returns (and exits with) the command's exit code."""
    args = build_parser().parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO, format="%(levelname)s %(message)s", stream=sys.stderr
    )
    try:
        code = int(args.func(args))
    except ConfigInvalid as exc:
        for error in exc.errors:
            print(f"{exc.source}: {error}", file=sys.stderr)
        code = 2
    except UserError as exc:
        print(f"elastic-slurm {args.command}: {exc}", file=sys.stderr)
        code = 2
    except KeyboardInterrupt:
        code = 130
    if __name__ == "__main__" or argv is None:
        sys.exit(code)
    return code


if __name__ == "__main__":
    main()
