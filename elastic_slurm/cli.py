"""Entry point of `elastic-slurm`: builds the argparse tree from the command modules and turns errors into one line.

Each subcommand lives in `elastic_slurm.commands.<module>` and exposes `register(subparsers)`; the handler it sets
with `set_defaults(func=...)` returns the exit code. Known failures print one line per problem on stderr — never a
traceback — and exit with elastic_slurm/exit_codes.py's code: 3 ConfigInvalid, 1 OperationFailed (AWS, a declined
confirmation), 2 UserError (the command line). A reader that closes the pipe (`elastic-slurm validate F | head -1`)
ends the command quietly with the shell's SIGPIPE status (141).
"""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import sys
from collections.abc import Sequence

from cluster_config import ConfigInvalid
from elastic_slurm import exit_codes
from elastic_slurm.errors import OperationFailed, UserError

# Command name -> the module of elastic_slurm.commands that registers it, in the order `--help` lists them. A run
# imports only its command's module (the others pull in boto3, the CDK helpers, the cost ledger...: `render` at a
# controller's boot starts in ~0.6 s instead of ~1 s); no command name, or an unknown one, builds the whole tree.
# tests/unit/test_cli_lazy.py checks this table against what the modules register.
COMMANDS = {
    "validate": "config_cmds",
    "schema": "config_cmds",
    "configure": "configure_cmd",
    "render": "render_cmd",
    "render-slurmdbd": "slurmdbd_cmd",
    "render-sssd": "sssd_cmd",
    "instance-cache": "cache_cmd",
    "synth": "synth_cmd",
    "local": "local_cmd",
    "status": "status_cmd",
    "logs": "logs_cmd",
    "connect": "connect_cmd",
    "cluster": "cluster_cmd",
    "fleet": "fleet_cmd",
    "cost": "cost_cmd",
    "onprem-kit": "onprem_cmd",
}
GLOBAL_FLAGS = ("-v", "--verbose")  # the only top-level options a command name may follow


class _Parser(argparse.ArgumentParser):
    """argparse, but usage errors exit 2 with one line (argparse prints usage + error; keep the error only)."""

    def error(self, message: str) -> None:  # type: ignore[override]
        print(f"{self.prog}: error: {message}", file=sys.stderr)
        raise SystemExit(2)


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The argument parser: the full tree (the docs and tests use it), or with `command` (a key of COMMANDS) that
    command's module alone."""
    parser = _Parser(prog="elastic-slurm", description="Elastic, federated Slurm clusters on AWS.")
    parser.add_argument("-v", "--verbose", action="store_true", help="log debug details to stderr")
    parser.add_argument("--version", action="version", version=f"%(prog)s {version()}")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    names = [COMMANDS[command]] if command else list(dict.fromkeys(COMMANDS.values()))
    for name in names:
        importlib.import_module(f"elastic_slurm.commands.{name}").register(sub)
    return parser


def command_of(argv: Sequence[str]) -> str | None:
    """The command an argument list names when it is known and follows only global flags, else None (then the whole
    tree parses it: `--help`, `--version`, a mistyped command all read as before)."""
    for arg in argv:
        if arg in GLOBAL_FLAGS:
            continue
        return arg if arg in COMMANDS else None
    return None


def version() -> str:
    """This installation's version (its package metadata; a checkout without an install says so)."""
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as package_version

    try:
        return package_version("elastic-slurm")
    except PackageNotFoundError:
        return "(not installed: a source checkout)"


BROKEN_PIPE = 128 + 13  # what a shell reports for a process ended by SIGPIPE


def _quiet_broken_pipe() -> int:
    """The reader of stdout went away: stop writing without a traceback (also at interpreter exit, when Python
    flushes stdout once more), and exit as a SIGPIPE'd command does."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):  # stdout is not a file descriptor (a test's capture): nothing left to flush
        pass
    return BROKEN_PIPE


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; returns (and exits with) the command's exit code."""
    try:
        code = _run(argv)
    except BrokenPipeError:
        code = _quiet_broken_pipe()
    if __name__ == "__main__" or argv is None:
        sys.exit(code)
    return code


def _run(argv: Sequence[str] | None) -> int:
    words = list(sys.argv[1:] if argv is None else argv)
    args = build_parser(command_of(words)).parse_args(words)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO, format="%(levelname)s %(message)s", stream=sys.stderr
    )
    try:
        code = int(args.func(args))
    except ConfigInvalid as exc:
        for error in exc.errors:
            print(f"{exc.source}: {error}", file=sys.stderr)
        code = exit_codes.INVALID_CONFIG
    except OperationFailed as exc:
        print(f"elastic-slurm {args.command}: {exc}", file=sys.stderr)
        code = exit_codes.FAILED
    except UserError as exc:
        print(f"elastic-slurm {args.command}: {exc}", file=sys.stderr)
        code = exit_codes.USAGE
    except KeyboardInterrupt:
        code = exit_codes.INTERRUPTED
    sys.stdout.flush()  # a closed pipe shows here, inside main's BrokenPipeError handler, not at interpreter exit
    return code


if __name__ == "__main__":
    main()
