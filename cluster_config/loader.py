"""Load a cluster YAML file into a validated `ElasticSlurmConfig`, or raise `ConfigInvalid` with one line per problem.

This is the only way the rest of the project reads a config: parse once, validate once, then pass typed objects on.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from cluster_config.checks import ConfigError, check
from cluster_config.model import ElasticSlurmConfig


class ConfigInvalid(Exception):
    """The config could not be used; `errors` holds every problem found."""

    def __init__(self, source: str, errors: list[ConfigError]) -> None:
        self.source = source
        self.errors = errors
        super().__init__("\n".join(f"{source}: {e}" for e in errors))


def format_loc(loc: tuple[int | str, ...]) -> str:
    """Pydantic error location → YAML path: ('clusters', 0, 'name') → `clusters[0].name`."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif part in ("create", "import") and out.endswith("network"):
            continue  # discriminated-union tag pydantic inserts; not a YAML key
        else:
            out += f".{part}" if out else str(part)
    return out or "(top level)"


def _message(err: Any) -> str:
    msg = str(err["msg"])
    if err["type"] == "extra_forbidden":
        return "unknown key (check the spelling; see `elastic-slurm schema`)"
    if err["type"] == "missing":
        return "required key is missing"
    if msg.startswith("Value error, "):
        msg = msg[len("Value error, ") :]
    return msg


def parse(data: Any, source: str = "<config>") -> ElasticSlurmConfig:
    """Validate already-loaded YAML data (a dict) into a config; raises ConfigInvalid."""
    if not isinstance(data, dict):
        raise ConfigInvalid(source, [ConfigError("(top level)", "the file must be a mapping with a 'clusters' key")])
    try:
        config = ElasticSlurmConfig.model_validate(data)
    except ValidationError as exc:
        errors = [ConfigError(format_loc(tuple(e["loc"])), _message(e)) for e in exc.errors()]
        raise ConfigInvalid(source, errors) from None
    problems = check(config)
    if problems:
        raise ConfigInvalid(source, problems)
    return config


def load(path: str | Path) -> ElasticSlurmConfig:
    """Read and validate a YAML file; raises ConfigInvalid (also for unreadable or malformed YAML)."""
    source = str(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigInvalid(source, [ConfigError("(file)", f"cannot read: {exc.strerror}")]) from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}" if mark is not None else "(file)"
        raise ConfigInvalid(source, [ConfigError(where, f"not valid YAML: {getattr(exc, 'problem', exc)}")]) from None
    return parse(data, source)
