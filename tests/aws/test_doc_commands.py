"""Every `elastic-slurm ...` command shown in README.md and docs/*.md (code blocks; README's inline code too, read as
synopses) stays true to the CLI: each one parses with the real argument parser (a synopsis such as `cluster create FILE [--dryrun]`:
its subcommands and each `--option` exist), and each concrete command that can run here runs — against the emulated
AWS (the session's `aws` fixture) with a deployed stand-in cluster for the names and files the docs use. What cannot
run here is allow-listed per subcommand with the reason and the test that covers it instead; an allow-list entry no
doc uses any more fails too."""

from __future__ import annotations

import argparse
import re
import shlex
import uuid
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from cluster_config import load
from elastic_slurm import cli
from localcloud.aws.emulated_aws import EmulatedAws
from localcloud.instances.controller_boot import assets_bucket, deploy_config

REPO = Path(__file__).resolve().parents[2]
REGION = "us-east-1"
PREFIXES = ("sudo /opt/elastic-slurm/bin/", "/opt/elastic-slurm/bin/", ".venv/bin/", "~/es/bin/")
# subcommand → why it does not run here, and what runs it instead
NOT_RUN = {
    "cluster delete": "asks on a terminal, then deletes: tests/aws/test_cluster_delete_and_json.py (CDK CLI replaced)",
    "cluster create": "deploys, or with --dryrun synthesizes (~1 min): tests/cdk/test_cluster_create_dryrun.py",
    "synth": "synthesizes (~1 min per config): tests/cdk, tests/unit/test_cdk_cli.py",
    "configure": "asks questions on a terminal: tests/unit/test_configure.py",
    "cost": "runs on a controller (sacct, its manifest): tests/unit/test_cost_report.py, tests/e2e/test_cost_e2e.py",
    "local": "starts the local cloud (root, real daemons): tests/e2e",
    "connect": "execs the Session Manager plugin into a running instance: tests/aws/test_connect.py",
    "logs export": "reads a deployed cluster's CloudWatch log groups: tests/aws/test_logs_export.py",
    "onprem-kit": "reads the deployed munge key secret: tests/unit/test_onprem_config.py, tests/e2e",
    "status": "runs on a controller (its manifest, scontrol): tests/aws/test_manager_status_calls.py",
}


@dataclass(frozen=True)
class Shown:
    """One command as a doc shows it."""

    where: str  # file:line
    text: str  # from `elastic-slurm` on, comment and prompt stripped
    synopsis: bool  # placeholders ([...], A|B, FILE...) rather than a command to run


def _strip(line: str) -> str | None:
    """The command of a doc line (None: not one)."""
    text = line.strip().removeprefix("$ ")
    text = re.sub(r'^eval "\$\((.*)\)"$', r"\1", text.split("  #")[0].strip())
    for prefix in PREFIXES:
        text = text.removeprefix(prefix)
    return text if text.startswith("elastic-slurm ") else None


def _shown() -> list[Shown]:
    found = []
    for path in [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]:
        lines = path.read_text(encoding="utf-8").splitlines()
        block: list[tuple[int, str]] | None = None
        for number, line in enumerate(lines, 1):
            if line.strip().startswith("```"):
                if block is not None:
                    prompted = any(text.strip().startswith("$ ") for _, text in block)
                    for n, text in block:
                        if prompted and not text.strip().startswith("$ "):
                            continue  # output of a `$ command`
                        if (command := _strip(text)) is not None:
                            found.append(Shown(f"{path.name}:{n}", command, _is_synopsis(command)))
                block = None if block is not None else []
                continue
            if block is not None:
                block.append((number, line))
            elif path.name == "README.md":
                for span in re.findall(r"`(elastic-slurm [^`]+)`", line):
                    command = _strip(span.replace("\\|", "|"))
                    if command is not None:  # prose names a command: a synopsis, even without placeholders
                        found.append(Shown(f"{path.name}:{number}", command, True))
    return found


def _is_synopsis(command: str) -> bool:
    return bool(
        re.search(r"[\[|]|\.\.\.|(?:^| )(?:FILE|NAME|R|DIR|WHEN|CONFIG|M|F|CACHE|H|N|POOL|NODE|URL|OLD)\b", command)
    )


SHOWN = _shown()


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def _options(parser: argparse.ArgumentParser) -> set[str]:
    return {option for action in parser._actions for option in action.option_strings}


def _key(words: list[str]) -> str:
    """The subcommand path of a command (`cluster update`, `validate`)."""
    parser, path = cli.build_parser(), []
    for word in words:
        choices = _subparsers(parser)
        if word.split("|")[0] not in choices:
            break
        path.append(word.split("|")[0])
        parser = choices[word.split("|")[0]]
    return " ".join(path)


def test_the_docs_show_commands_of_every_kind() -> None:
    assert len(SHOWN) > 40
    assert {s.synopsis for s in SHOWN} == {True, False}


@pytest.mark.parametrize("shown", [s for s in SHOWN if s.synopsis], ids=lambda s: s.where)
def test_each_synopsis_names_existing_subcommands_and_options(shown: Shown) -> None:
    words = shlex.split(re.sub(r"[\[\]]", " ", shown.text))[1:]
    parser = cli.build_parser()
    root_options = _options(parser)
    for word in words:
        choices = _subparsers(parser)
        if not choices:
            break
        alternatives = word.split("|")
        if not all(a in choices for a in alternatives):
            assert word.startswith("-") or word.isupper(), f"{shown.where}: {word!r} is no subcommand of {shown.text!r}"
            break
        parser = choices[alternatives[0]]
    for option in re.findall(r"(?<![\w-])(--?[a-z][a-z0-9-]*)", shown.text):
        assert option in _options(parser) | root_options, f"{shown.where}: {option} is not an option: {shown.text!r}"


@pytest.fixture(scope="module")
def stand_in(tmp_path_factory: pytest.TempPathFactory, emulated_aws: EmulatedAws) -> dict[str, str]:
    """Names and files the docs use → a stand-in deployed in the emulated AWS (minimal.yaml under a name of its own,
    its config object and parameter as `cdk deploy` leaves them)."""
    scratch = tmp_path_factory.mktemp("doc-commands")
    name = f"doc{uuid.uuid4().hex[:8]}"
    data = yaml.safe_load((REPO / "cluster_config/examples/minimal.yaml").read_text())
    data["clusters"][0]["name"] = name
    config = scratch / "my-cluster.yaml"
    config.write_text(yaml.safe_dump(data))
    words = {n: name for n in ("minimal", "demo", "c1")}
    words |= {f: str(config) for f in ("my-cluster.yaml", "my.yaml", "cluster.yaml", "research.yaml")}
    words |= {"cluster.schema.json": str(scratch / "cluster.schema.json"), "cdk.out": str(scratch / "cdk.out")}
    words["config"] = str(config)
    emulated_aws.client("s3", REGION).create_bucket(Bucket=assets_bucket(name))
    deploy_config(emulated_aws.client, load(config).clusters[0], config)
    return words


def _argv(shown: Shown, words: dict[str, str]) -> list[str]:
    out = []
    for word in shlex.split(shown.text)[1:]:
        if word in words:
            out.append(words[word])
        elif (REPO / word).is_file():
            out.append(str(REPO / word))
        else:
            out.append(word)
    return out


CONCRETE = [s for s in SHOWN if not s.synopsis]


def _not_run(key: str) -> str | None:
    """The allow-list entry covering a subcommand path (`local up` → `local`), or None."""
    return next((entry for entry in NOT_RUN if key == entry or key.startswith(entry + " ")), None)


def test_every_command_that_does_not_run_here_is_allow_listed_and_every_entry_is_used() -> None:
    used = {_not_run(_key(shlex.split(s.text)[1:])) for s in SHOWN}
    unused = set(NOT_RUN) - used
    assert not unused, f"allow-list entries no doc shows: {sorted(unused)}"


@pytest.mark.parametrize("shown", CONCRETE, ids=lambda s: s.where)
def test_each_command_parses_and_runs_where_it_can(
    shown: Shown,
    stand_in: dict[str, str],
    aws: EmulatedAws,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    argv = _argv(shown, stand_in)
    try:
        cli.build_parser().parse_args(argv)
    except SystemExit as exit_info:
        if exit_info.code == 0:  # --version, --help: they ran while parsing
            return
        pytest.fail(f"{shown.where}: `{shown.text}` does not parse: {capsys.readouterr().err.strip()}")
    if _not_run(_key(argv)) is not None:
        return  # parsed; runs elsewhere (NOT_RUN says where)
    monkeypatch.setenv("AWS_ENDPOINT_URL", aws.url)
    monkeypatch.setenv("AWS_DEFAULT_REGION", REGION)
    code = cli.main(argv)
    captured = capsys.readouterr()
    assert code == 0, f"{shown.where}: `{shown.text}` → exit {code}: {captured.err.strip()}"
    assert "Traceback" not in captured.err
