"""Load a cluster YAML file into a validated `ElasticSlurmConfig`, or raise `ConfigInvalid` with one line per problem.

This is the only way the rest of the project reads a config: parse once, validate once, then pass typed objects on.
Pydantic's messages are turned into YAML paths and plain words here (`format_loc`, `describe`).
"""

from __future__ import annotations

import difflib
import re
import types
import typing
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ValidationError

from cluster_config import model, slurm_syntax
from cluster_config.checks import ConfigError, check
from cluster_config.deploy_checks import deploy_checks
from cluster_config.model import ElasticSlurmConfig

# What a value matching each pattern looks like, for errors people can act on.
PATTERN_HINTS = {
    model.NAME_PATTERN: "a name of lowercase letters and digits, starting with a letter",
    model.CLUSTER_NAME_PATTERN: "a cluster name of lowercase letters, digits and '-' (2 or more, starting with a letter)",
    model.REGION_PATTERN: "a region name like us-east-1",
    model.AZ_PATTERN: "an availability zone name like us-east-1a",
    model.INSTANCE_TYPE_PATTERN: "an instance type like c7i.large",
    model.HOST_PORT_PATTERN: "host:port",
    model.DB_INSTANCE_CLASS_PATTERN: "an RDS instance class like t4g.medium or db.t4g.medium",
    slurm_syntax.FEATURE_PATTERN: "a Slurm feature name: letters, digits, '_', '.' and '-' only",
}
_SCALARS = (str, int, float, bool, type(None))


class ConfigInvalid(Exception):
    """The config could not be used; `errors` holds every problem found."""

    def __init__(self, source: str, errors: list[ConfigError]) -> None:
        self.source = source
        self.errors = errors
        super().__init__("\n".join(f"{source}: {e}" for e in errors))


class _StrictYamlLoader(yaml.SafeLoader):
    """SafeLoader that rejects a key given twice in one mapping (plain YAML silently keeps the last one), and reads
    plain scalars by YAML 1.2's core schema instead of PyYAML's YAML 1.1: only true/false are booleans and there are
    no base-60 numbers, so Slurm values stay what they say (`OFF`, `no`, `30:00`, `1:30:00`) instead of becoming
    False or 1800; 010 is ten."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: set[Any] = set()
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue
            key = self.construct_object(key_node, deep=deep)
            if not isinstance(key, typing.Hashable):
                continue  # SafeLoader reports unhashable keys itself
            if key in seen:
                raise yaml.constructor.ConstructorError(None, None, f"duplicate key '{key}'", key_node.start_mark)
            seen.add(key)
        return super().construct_mapping(node, deep=deep)


_BOOL, _INT, _FLOAT = "tag:yaml.org,2002:bool", "tag:yaml.org,2002:int", "tag:yaml.org,2002:float"
_StrictYamlLoader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag not in (_BOOL, _INT, _FLOAT)]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}
_StrictYamlLoader.add_implicit_resolver(_BOOL, re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$"), list("tTfF"))
_StrictYamlLoader.add_implicit_resolver(
    _INT, re.compile(r"^(?:[-+]?[0-9]+|0o[0-7]+|0x[0-9a-fA-F]+)$"), list("-+0123456789")
)
_StrictYamlLoader.add_implicit_resolver(
    _FLOAT,
    re.compile(
        r"^(?:[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$"
    ),
    list("-+.0123456789"),
)


def _construct_int(loader: yaml.SafeLoader, node: yaml.ScalarNode) -> int:
    text = str(loader.construct_scalar(node))
    return int(text, 0) if text[:2] in ("0o", "0x") else int(text, 10)


_StrictYamlLoader.add_constructor(_INT, _construct_int)


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


def _models_in(annotation: Any) -> list[type[BaseModel]]:
    """The pydantic models a field annotation may hold (through Optional, unions, lists, dicts, Annotated)."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin is typing.Annotated:
        return _models_in(args[0])
    if origin in (typing.Union, types.UnionType, list, dict):
        return [m for arg in args for m in _models_in(arg)]
    return []


def known_keys(loc: tuple[int | str, ...]) -> list[str]:
    """The keys allowed in the mapping at `loc` (empty when that is not a config section)."""
    models: list[type[BaseModel]] = [ElasticSlurmConfig]
    for part in loc:
        if isinstance(part, int):
            continue
        fields = [m.model_fields[part] for m in models if part in m.model_fields]
        if fields:
            models = [m for f in fields for m in _models_in(f.annotation)]
        else:  # a discriminated-union tag: keep the member whose `mode` is that tag
            models = [
                m for m in models if part in typing.get_args(getattr(m.model_fields.get("mode"), "annotation", None))
            ]
    return sorted({key for m in models for key in m.model_fields})


def describe(err: Any) -> str:
    """One pydantic error → a message naming what was wrong and what was given."""
    kind = err["type"]
    if kind == "extra_forbidden":
        key = str(err["loc"][-1])
        close = difflib.get_close_matches(key, known_keys(tuple(err["loc"][:-1])), n=1)
        hint = f"did you mean '{close[0]}'?" if close else "see `elastic-slurm schema` for the allowed keys"
        return f"unknown key '{key}' ({hint})"
    if kind == "missing":
        return "required key is missing"
    given = err.get("input")
    if kind == "string_pattern_mismatch" and err["ctx"]["pattern"] in PATTERN_HINTS:
        return f"'{given}' is not {PATTERN_HINTS[err['ctx']['pattern']]}"
    msg = str(err["msg"]).removeprefix("Value error, ")
    if kind != "value_error" and isinstance(given, _SCALARS):
        msg += f", got {given!r}"
    return msg


def parse(data: Any, source: str = "<config>") -> ElasticSlurmConfig:
    """Validate already-loaded YAML data (a dict) into a config; raises ConfigInvalid."""
    if not isinstance(data, dict):
        raise ConfigInvalid(source, [ConfigError("(top level)", "the file must be a mapping with a 'clusters' key")])
    try:
        config = ElasticSlurmConfig.model_validate(data)
    except ValidationError as exc:
        errors = [ConfigError(format_loc(tuple(e["loc"])), describe(e)) for e in exc.errors()]
        raise ConfigInvalid(source, errors) from None
    problems = check(config) + deploy_checks(config)
    if problems:
        raise ConfigInvalid(source, problems)
    return config


def parse_yaml(text: str, source: str = "<config>") -> ElasticSlurmConfig:
    """Parse and validate YAML text; raises ConfigInvalid (malformed YAML names the line)."""
    try:
        data = yaml.load(text, Loader=_StrictYamlLoader)  # a SafeLoader subclass: no arbitrary objects
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}" if mark is not None else "(file)"
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise ConfigInvalid(source, [ConfigError(where, f"not valid YAML: {problem}")]) from None
    return parse(data, source)


def load(path: str | Path) -> ElasticSlurmConfig:
    """Read and validate a YAML file; raises ConfigInvalid (also for unreadable or malformed YAML)."""
    source = str(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigInvalid(source, [ConfigError("(file)", f"cannot read: {exc.strerror or exc}")]) from None
    except UnicodeDecodeError as exc:
        raise ConfigInvalid(
            source, [ConfigError("(file)", f"not UTF-8 text: {exc.reason} at byte {exc.start}")]
        ) from None
    return parse_yaml(text, source)
