"""`elastic-slurm configure [--out FILE] [--force]`: ask a few questions, write a cluster YAML that validates.

The questions are `elastic_slurm.configure_wizard.QUESTIONS`. Answers are read line by line with `input()`, so the
wizard works at a terminal and with answers piped in (one line per question; an empty line takes the default). A bad
answer is asked again with a one-line reason. The config is validated with `cluster_config.parse` (the rules of
`elastic-slurm validate`) before anything is written; an existing file is only overwritten with --force.
"""

from __future__ import annotations

import argparse
import shlex
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from cluster_config import ConfigInvalid, parse
from elastic_slurm import exit_codes
from elastic_slurm.commands.config_cmds import summary
from elastic_slurm.configure_wizard import QUESTIONS, Answers, Question, asked, build_config
from elastic_slurm.errors import UserError

Reader = Callable[[str], str]
# Says whether a parsed answer is usable beyond the question's own rules; returns the reason when it is not.
ExtraCheck = Callable[[str, Any], str | None]


def register(sub: Any) -> None:
    """Add the `configure` subcommand."""
    parser = sub.add_parser("configure", help="answer a few questions and get a cluster YAML that validates")
    parser.add_argument("--out", metavar="FILE", help="where to write the YAML (default: CLUSTER_NAME.yaml here)")
    parser.add_argument("--force", action="store_true", help="overwrite the --out file if it exists")
    parser.set_defaults(func=run_configure)


def prompt_of(question: Question, default: str) -> str:
    """`Region [us-east-1]: ` — the default in brackets (Enter takes it)."""
    return f"{question.prompt} [{default or question.default_label or ''}]: "


def ask_all(read: Reader, echo: bool, extra_check: ExtraCheck | None = None) -> Answers:
    """Ask every question that applies, re-asking bad answers with their reason on stderr.

    `read(prompt)` returns one line (raises EOFError at end of input); with `echo` the answer is printed after the
    prompt (piped input is not echoed by a terminal, so the transcript shows what was answered).
    """
    answers: Answers = {}
    for question in QUESTIONS:
        if not asked(question, answers):
            continue
        default = question.default_for(answers)
        while True:
            try:
                text = read(prompt_of(question, default)).strip()
            except EOFError:
                print(file=sys.stdout)
                raise UserError("input ended before all questions were answered") from None
            if echo:
                print(text)
            try:
                value = question.parse(text or default, answers)
            except ValueError as exc:
                _reason(question, str(exc))
                continue
            problem = extra_check(question.key, value) if extra_check else None
            if problem is None:
                break
            _reason(question, problem)
        answers[question.key] = value
    return answers


def _reason(question: Question, reason: str) -> None:
    """Why an answer was refused, on stderr, after what stdout holds so far (the two interleave in a transcript)."""
    sys.stdout.flush()
    print(f"  {question.key}: {reason}", file=sys.stderr, flush=True)


class _Dumper(yaml.SafeDumper):
    """Lists of plain values on one line (`[us-east-1a, us-east-1b]`), everything else in block style."""


def _represent_list(dumper: yaml.SafeDumper, items: list[Any]) -> yaml.Node:
    flow = all(isinstance(item, str | int | float | bool) for item in items)
    return dumper.represent_sequence("tag:yaml.org,2002:seq", items, flow_style=flow)


_Dumper.add_representer(list, _represent_list)


def render_yaml(config: dict[str, Any], path: str) -> str:
    """The file: a comment header (what wrote it, what to run next), then the config."""
    out = shlex.quote(path)
    header = [
        f"# {Path(path).name}: written by `elastic-slurm configure`. Every key: docs/configuration.md.",
        "# Keys not written take their defaults. Next:",
        f"#   elastic-slurm validate {out}                  # check it, see the idle cost estimate",
        f"#   elastic-slurm cluster create {out} --dryrun   # what deploying would create",
        f"#   elastic-slurm cluster create {out}            # deploy it",
    ]
    body = yaml.dump(config, Dumper=_Dumper, sort_keys=False, default_flow_style=False)
    return "\n".join(header) + "\n" + body


def _write(out: Path, text: str, force: bool) -> None:
    try:
        with out.open("w" if force else "x", encoding="utf-8") as handle:
            handle.write(text)
    except FileExistsError:
        raise UserError(f"--out {out}: exists; pass --force to overwrite it") from None
    except OSError as exc:
        raise UserError(f"--out {out}: cannot write: {exc.strerror or exc}") from None


def run_configure(args: argparse.Namespace) -> int:
    """Ask, build, validate, write; exit 3 (invalid config) without writing when the answers do not make a valid
    config."""
    if args.out is not None and Path(args.out).exists() and not args.force:
        raise UserError(f"--out {args.out}: exists; pass --force to overwrite it")
    if args.out is not None and not Path(args.out).parent.is_dir():
        raise UserError(f"--out {args.out}: no such directory {Path(args.out).parent}")

    def default_out_free(key: str, value: Any) -> str | None:
        if key == "cluster_name" and args.out is None and not args.force and Path(f"{value}.yaml").exists():
            return f"{value}.yaml already exists here: choose another name (or pass --out FILE or --force)"
        return None

    print("Answer each question, or press Enter to take the default in brackets.")
    answers = ask_all(input, echo=not sys.stdin.isatty(), extra_check=default_out_free)
    out = args.out if args.out is not None else f"{answers['cluster_name']}.yaml"
    config = build_config(answers)
    try:
        parsed = parse(config, source=out)
    except ConfigInvalid as exc:
        print(f"configure: the answers do not make a valid config, {out} not written:", file=sys.stderr)
        for error in exc.errors:
            print(f"{exc.source}: {error}", file=sys.stderr)
        return exit_codes.INVALID_CONFIG
    _write(Path(out), render_yaml(config, out), args.force)
    print(f"\nWrote {out}:")
    for line in summary(parsed):
        print(line)
    print(f"Next: elastic-slurm validate {out}, then deploy with `elastic-slurm cluster create {out}`.")
    return 0
