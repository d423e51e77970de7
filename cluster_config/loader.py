"""Load a cluster YAML file into a validated `ElasticSlurmConfig`, or raise `ConfigInvalid` with one line per problem.

This is the only way the rest of the project reads a config: parse once, validate once, then pass typed objects on.
Pydantic's messages are turned into YAML paths and plain words here (`format_loc`, `describe`).

Input limits (docs/validate.md), checked before anything is built from the text, so no input makes the loader crash,
hang or exhaust memory: a file of at most MAX_FILE_BYTES (1 MiB; the largest example is 3 KB), mappings and lists
nested at most MAX_DEPTH deep (counted over the parser's events, which need no recursion), and at most MAX_NODES values
once YAML aliases are expanded (a "billion laughs" file is refused, not validated for hours). Every message is cut to
MAX_MESSAGE characters, so a huge value is never echoed back whole.
"""

from __future__ import annotations

import difflib
import re
import types
import typing
import unicodedata
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ValidationError

from cluster_config import model, slurm_syntax
from cluster_config.checks import ConfigError, check
from cluster_config.deploy_checks import deploy_checks
from cluster_config.input_checks import input_problems
from cluster_config.instance_checks import TypeFacts, instance_problems
from cluster_config.model import ElasticSlurmConfig
from cluster_config.model_base import UNSAFE_CATEGORIES
from cluster_config.safe_types import shown

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
MAX_FILE_BYTES = 1024 * 1024
MAX_DEPTH = 32
MAX_NODES = 100_000
MAX_MESSAGE = 300


class ConfigInvalid(Exception):
    """The config could not be used; `errors` holds every problem found."""

    def __init__(self, source: str, errors: list[ConfigError]) -> None:
        self.source = source
        self.errors = [ConfigError(_cut(e.path), _cut(e.message)) for e in errors]
        super().__init__("\n".join(f"{source}: {e}" for e in self.errors))


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
    try:
        return int(text, 0) if text[:2] in ("0o", "0x") else int(text, 10)
    except ValueError:  # more digits than Python converts (sys.get_int_max_str_digits)
        raise yaml.constructor.ConstructorError(
            None, None, f"a number of {len(text)} digits", node.start_mark
        ) from None


_StrictYamlLoader.add_constructor(_INT, _construct_int)


def format_loc(loc: tuple[int | str, ...]) -> str:
    """Pydantic error location → YAML path: ('clusters', 0, 'name') → `clusters[0].name`."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif part in ("create", "import") and out.endswith("network"):
            continue  # discriminated-union tag pydantic inserts; not a YAML key
        elif part == "[key]":
            continue  # pydantic's marker of a mapping key's own error; the key itself is the previous part
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
        return f"{shown(str(given))} is not {PATTERN_HINTS[err['ctx']['pattern']]}"
    msg = str(err["msg"]).removeprefix("Value error, ")
    if kind in _STRICT_TYPES and isinstance(given, str | bool | float):
        if isinstance(given, str) and not _quoted_literal(given):
            msg += f", unable to parse string as {_STRICT_TYPES[kind]}"
        return f"{msg}, got {_what(given)}"
    if kind != "value_error" and isinstance(given, _SCALARS):
        msg += f", got {shown(given) if isinstance(given, str) else repr(given)}"
    return msg


_STRICT_TYPES = {"int_type": "an integer", "float_type": "a number", "bool_type": "a boolean"}
_NUMBER = re.compile(r"[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?")


def _quoted_literal(given: str) -> bool:
    """A string that would have been a number or a boolean without its quotes."""
    return given.strip().lower() in ("true", "false") or bool(_NUMBER.fullmatch(given.strip()))


def _what(given: str | bool | float) -> str:
    """A value of the wrong type as the YAML wrote it: `true` is a boolean, `"4"` a quoted string."""
    if isinstance(given, bool):
        return f"the boolean {str(given).lower()}"
    if isinstance(given, float):
        return f"the fraction {given!r}"
    if _quoted_literal(given):
        return f"the string {shown(given)} (write numbers and true/false without quotes)"
    return shown(given)


def _cut(text: str) -> str:
    """A message line of at most MAX_MESSAGE characters, with no control or invisible character (a value pydantic
    quotes in its message, e.g. a discriminator's, is escaped: one problem stays one line)."""
    text = "".join(repr(c)[1:-1] if unicodedata.category(c) in UNSAFE_CATEGORIES else c for c in text)
    return text if len(text) <= MAX_MESSAGE else text[: MAX_MESSAGE - 3] + "..."


def parse(data: Any, source: str = "<config>", facts: TypeFacts | None = None) -> ElasticSlurmConfig:
    """Validate already-loaded YAML data (a dict) into a config; raises ConfigInvalid. `facts` (from an instance
    cache) add the checks only they can prove: offerings per region, GPUs of each instance type."""
    if not isinstance(data, dict):
        raise ConfigInvalid(source, [ConfigError("(top level)", "the file must be a mapping with a 'clusters' key")])
    try:
        config = ElasticSlurmConfig.model_validate(data)
    except ValidationError as exc:
        raise ConfigInvalid(source, _errors(exc)) from None
    problems = check(config) + deploy_checks(config) + input_problems(config) + instance_problems(config, facts)
    if problems:
        raise ConfigInvalid(source, problems)
    return config


# The events of the nesting check come from libyaml when PyYAML has it (10 times faster), else from PyYAML's parser.
_EVENT_LOADERS = [getattr(yaml, "CSafeLoader", yaml.SafeLoader), yaml.SafeLoader]


# The members of a scalar union (`str | int | bool` of slurm_settings) pydantic names in an error's location.
_UNION_MEMBERS = frozenset({"str", "int", "bool", "float"})


def _errors(exc: ValidationError) -> list[ConfigError]:
    """One error per YAML path: a value no member of a union takes is one line naming them all."""
    by_path: dict[str, list[str]] = {}
    for err in exc.errors():
        loc = tuple(err["loc"])
        if loc and loc[-1] in _UNION_MEMBERS:
            loc = loc[:-1]
        by_path.setdefault(format_loc(loc), []).append(describe(err))
    return [
        ConfigError(path, messages[0] if len(messages) == 1 else _one_of(messages))
        for path, messages in by_path.items()
    ]


def _one_of(messages: list[str]) -> str:
    wanted = [m.split(",", 1)[0].removeprefix("Input should be ") for m in dict.fromkeys(messages)]
    return "Input should be " + " or ".join(wanted)


def _structure_problem(text: str) -> ConfigError | None:
    """The first nesting beyond MAX_DEPTH, from the parser's events, read lazily up to that point (no tree is built,
    nothing recurses). A syntax error before it is left to the loader, which words it as the file's error."""
    for loader_class in _EVENT_LOADERS:
        depth = 0
        try:
            for event in yaml.parse(text, Loader=loader_class):
                if isinstance(event, yaml.CollectionStartEvent):
                    depth += 1
                    if depth > MAX_DEPTH:
                        mark = event.start_mark
                        return ConfigError(
                            f"line {mark.line + 1}" if mark is not None else "(file)",
                            f"mappings and lists nest more than {MAX_DEPTH} levels deep",
                        )
                elif isinstance(event, yaml.CollectionEndEvent):
                    depth -= 1
            return None
        except (yaml.YAMLError, UnicodeError):
            continue  # the other parser may get further before its error (libyaml refuses some text PyYAML reads)
    return None


class _TooLarge(Exception):
    """The loaded data breaks a limit once aliases are expanded (the message says which)."""


def _check_expanded(data: Any) -> None:
    """Raise _TooLarge when `data`, with every alias expanded, holds more than MAX_NODES values or nests deeper than
    MAX_DEPTH (a chain of anchors nests deeper than the text; an anchor inside itself nests forever). A shared subtree
    is measured once (its size and height), then counted each time it is referenced; recursion stops at MAX_DEPTH."""
    measured: dict[int, tuple[int, int]] = {}
    too_deep = f"mappings and lists nest more than {MAX_DEPTH} levels deep once YAML aliases are expanded"

    def measure(node: Any, depth: int) -> tuple[int, int]:
        """(values, height) of `node`, found at `depth`."""
        if not isinstance(node, dict | list):
            return 1, 0
        if depth > MAX_DEPTH:
            raise _TooLarge(too_deep)
        if id(node) in measured:
            total, height = measured[id(node)]
            if depth + height > MAX_DEPTH:
                raise _TooLarge(too_deep)
            return total, height
        items = [*node.keys(), *node.values()] if isinstance(node, dict) else node
        total, height = 1, 1
        for item in items:
            size, below = measure(item, depth + 1)
            total, height = total + size, max(height, below + 1)
            if total > MAX_NODES:
                raise _TooLarge(f"more than {MAX_NODES} values once YAML aliases are expanded")
        measured[id(node)] = (total, height)
        return total, height

    measure(data, 1)


def parse_yaml(text: str, source: str = "<config>", facts: TypeFacts | None = None) -> ElasticSlurmConfig:
    """Parse and validate YAML text; raises ConfigInvalid (malformed YAML names the line; the input limits of the
    module docstring are checked first)."""
    if len(text) > MAX_FILE_BYTES:
        raise ConfigInvalid(source, [ConfigError("(file)", f"larger than {MAX_FILE_BYTES // 1024} KiB: not a config")])
    try:
        problem = _structure_problem(text)
        if problem is not None:
            raise ConfigInvalid(source, [problem])
        data = yaml.load(text, Loader=_StrictYamlLoader)  # a SafeLoader subclass: no arbitrary objects
    except UnicodeError:  # a lone surrogate in text given as a str (a file's bytes are decoded before)
        raise ConfigInvalid(source, [ConfigError("(file)", "not UTF-8 text: a lone surrogate")]) from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}" if mark is not None else "(file)"
        problem_text = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise ConfigInvalid(source, [ConfigError(where, f"not valid YAML: {problem_text}")]) from None
    try:
        _check_expanded(data)
    except _TooLarge as exc:
        raise ConfigInvalid(source, [ConfigError("(file)", str(exc))]) from None
    return parse(data, source, facts)


def load(path: str | Path, facts: TypeFacts | None = None) -> ElasticSlurmConfig:
    """Read and validate a YAML file; raises ConfigInvalid (also for unreadable, oversized or malformed YAML)."""
    source = str(path)
    try:
        with Path(path).open("rb") as handle:
            raw = handle.read(MAX_FILE_BYTES + 1)  # never more: a 50 MB file is refused without reading it all
        if len(raw) > MAX_FILE_BYTES:
            raise ConfigInvalid(
                source, [ConfigError("(file)", f"larger than {MAX_FILE_BYTES // 1024} KiB: not a config")]
            )
        text = raw.decode("utf-8")
    except OSError as exc:
        raise ConfigInvalid(source, [ConfigError("(file)", f"cannot read: {exc.strerror or exc}")]) from None
    except UnicodeDecodeError as exc:
        raise ConfigInvalid(
            source, [ConfigError("(file)", f"not UTF-8 text: {exc.reason} at byte {exc.start}")]
        ) from None
    return parse_yaml(text, source, facts)
