"""The CLI imports only the module of the command it runs (elastic_slurm/cli.py COMMANDS): the table matches what the
command modules register, and a command's run parses exactly as the whole tree does."""

from __future__ import annotations

import argparse
import importlib
import subprocess
import sys

import pytest

from elastic_slurm import cli


def _choices(parser: argparse.ArgumentParser) -> list[str]:
    (sub,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return list(sub.choices)


def registered_by(module: str) -> list[str]:
    """The command names `elastic_slurm.commands.<module>` registers."""
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers()
    importlib.import_module(f"elastic_slurm.commands.{module}").register(sub)
    return list(sub.choices)


def table_mismatches(commands: dict[str, str]) -> list[str]:
    """Where `commands` (name -> module) disagrees with what each module registers."""
    problems = []
    for module in dict.fromkeys(commands.values()):
        named = {n for n, m in commands.items() if m == module}
        registered = set(registered_by(module))
        problems += [f"{n}: {module} does not register it" for n in sorted(named - registered)]
        problems += [f"{n}: registered by {module}, not in the table" for n in sorted(registered - named)]
    return problems


def test_the_table_names_every_command_of_every_module_and_nothing_else() -> None:
    assert table_mismatches(cli.COMMANDS) == []
    assert _choices(cli.build_parser()) == list(cli.COMMANDS)  # --help lists them in the table's order


def test_a_table_that_forgets_a_command_or_names_a_foreign_one_is_caught() -> None:
    forgot = {k: v for k, v in cli.COMMANDS.items() if k != "schema"}
    assert table_mismatches(forgot) == ["schema: registered by config_cmds, not in the table"]
    foreign = cli.COMMANDS | {"render-sssd": "render_cmd"}
    assert "render-sssd: render_cmd does not register it" in table_mismatches(foreign)


@pytest.mark.parametrize(
    ("argv", "command"),
    [
        (["render", "x.yaml", "--out", "d"], "render"),
        (["-v", "render-slurmdbd", "--config", "c"], "render-slurmdbd"),
        (["--verbose", "-v", "instance-cache", "refresh", "c"], "instance-cache"),
        (["--version"], None),
        (["-h"], None),
        ([], None),
        (["bogus", "render"], None),  # an unknown word first: the whole tree says which commands exist
        (["x.yaml", "validate"], None),
    ],
)
def test_the_command_is_the_first_word_after_the_global_flags(argv: list[str], command: str | None) -> None:
    assert cli.command_of(argv) == command


@pytest.mark.parametrize(
    "argv",
    [
        ["render", "cluster.yaml", "--out", "d", "--cluster", "c"],
        ["-v", "instance-cache", "refresh", "c.yaml", "--out", "o.json"],
        ["cluster", "status", "c", "--output", "json"],
        ["cost", "--since", "2026-01-01"],
        ["validate", "a.yaml"],
    ],
)
def test_one_commands_parser_reads_its_arguments_as_the_whole_tree_does(argv: list[str]) -> None:
    whole = vars(cli.build_parser().parse_args(argv))
    alone = vars(cli.build_parser(cli.command_of(argv)).parse_args(argv))
    assert alone.keys() == whole.keys()
    assert {k: v for k, v in alone.items() if k != "func"} == {k: v for k, v in whole.items() if k != "func"}
    assert alone["func"].__qualname__ == whole["func"].__qualname__


def test_a_render_run_imports_no_other_command_module() -> None:
    script = (
        "import sys; from elastic_slurm import cli; cli.build_parser(cli.command_of(sys.argv[1:]))"
        ".parse_args(sys.argv[1:]); print(sorted(m for m in sys.modules if m.startswith('elastic_slurm.commands.')))"
    )
    argv = ["render", "c.yaml", "--out", "d"]
    out = subprocess.run([sys.executable, "-c", script, *argv], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "['elastic_slurm.commands.render_cmd']"
