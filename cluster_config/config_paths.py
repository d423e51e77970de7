"""Paths into the cluster YAML: the concrete ones a config diff reports and the patterns the update-policy table uses.

A concrete path is a tuple of segments: a field name (`str`), a list index (`int`) or a mapping key (`Key`), shown
as `clusters[0].partitions[1].pools[0].max_nodes` or `clusters[0].tags.owner`. A pattern has the same shape with
`[]` for any list index and `<key>` for any mapping key (`clusters[].tags.<key>`); `{a,b}` in a pattern's text lists
alternatives (`clusters[].slurm.{suspend_time,resume_timeout}`). `model_paths()` walks the pydantic model and yields
every pattern a diff can report: each leaf field, each list item (added or removed) and each optional or union
section (set, unset or switched), so a test can insist that each one has an update policy.
"""

from __future__ import annotations

import enum
import re
import types
import typing
from collections.abc import Iterator
from typing import Any

from pydantic import BaseModel

from cluster_config.model import ElasticSlurmConfig

ANY_INDEX = "[]"
ANY_KEY = "<key>"
_SIMPLE_KEY = re.compile(r"^[A-Za-z0-9_-]+$")
_TOKEN = re.compile(r"\[(\d*)\]|<key>|([A-Za-z_][A-Za-z0-9_]*)")


class Key(str):
    """A mapping key in a concrete path (a tag name, a cluster name in `licenses[].clusters`)."""

    __slots__ = ()


Segment = str | int
Path = tuple[Segment, ...]


def format_path(path: Path) -> str:
    """`('clusters', 0, 'tags', Key('a.b'))` → `clusters[0].tags["a.b"]` (patterns print the same way)."""
    out = ""
    for part in path:
        if isinstance(part, Key):
            out += f".{part}" if _SIMPLE_KEY.match(part) else f'["{part}"]'
        elif isinstance(part, int):
            out += f"[{part}]"
        elif part == ANY_INDEX:
            out += ANY_INDEX
        else:
            out += f".{part}" if out else part
    return out


def expand_braces(text: str) -> list[str]:
    """`a.{b,c}.d` → [`a.b.d`, `a.c.d`] (any number of non-nested brace groups)."""
    start = text.find("{")
    if start < 0:
        return [text]
    end = text.index("}", start)
    head, tail = text[:start], text[end + 1 :]
    return [out for option in text[start + 1 : end].split(",") for out in expand_braces(head + option.strip() + tail)]


def parse_pattern(text: str) -> Path:
    """One pattern (no braces) → segments; ValueError for anything else."""
    segments: list[Segment] = []
    position = 0
    while position < len(text):
        if text[position] == "." and segments:
            position += 1
        match = _TOKEN.match(text, position)
        if match is None:
            raise ValueError(f"bad path pattern {text!r} at {position}")
        if match.group(0).startswith("["):
            segments.append(int(match.group(1)) if match.group(1) else ANY_INDEX)
        elif match.group(0) == ANY_KEY:
            segments.append(ANY_KEY)
        else:
            segments.append(match.group(2))
        position = match.end()
    return tuple(segments)


def matches(pattern: Path, path: Path) -> bool:
    """Whether a concrete path is one of the pattern's."""
    if len(pattern) != len(path):
        return False
    for want, have in zip(pattern, path, strict=True):
        if isinstance(have, Key):
            ok = want == ANY_KEY
        elif isinstance(have, int):
            ok = want == ANY_INDEX or (isinstance(want, int) and want == have)
        else:
            ok = not isinstance(want, int) and want == have
        if not ok:
            return False
    return True


def generalize(path: Path) -> Path:
    """The pattern of a concrete path: every index → `[]`, every key → `<key>`."""
    return tuple(ANY_KEY if isinstance(p, Key) else ANY_INDEX if isinstance(p, int) else p for p in path)


def _is_model(annotation: Any) -> bool:
    return isinstance(annotation, type) and issubclass(annotation, BaseModel)


def _strip(annotation: Any) -> Any:
    """Annotated[X, ...] → X."""
    while typing.get_origin(annotation) is typing.Annotated:
        annotation = typing.get_args(annotation)[0]
    return annotation


def _walk(annotation: Any, path: Path, seen: frozenset[type]) -> Iterator[Path]:
    annotation = _strip(annotation)
    origin = typing.get_origin(annotation)
    if _is_model(annotation):
        if annotation in seen:
            return
        for name, field in annotation.model_fields.items():
            yield from _walk(field.annotation, (*path, name), seen | {annotation})
        return
    if origin in (typing.Union, types.UnionType):
        members = [_strip(a) for a in typing.get_args(annotation) if a is not type(None)]
        models = [m for m in members if _is_model(m)]
        if models:  # an optional or union section: set, unset or switched as a whole
            yield path
            for model in models:
                yield from _walk(model, path, seen)
            return
        if any(typing.get_origin(m) in (list, dict) for m in members):  # `list[...] | None` diffs like a list
            for member in members:
                yield from _walk(member, path, seen)
            return
        yield path
        return
    if origin is list:
        (item,) = typing.get_args(annotation)
        if _is_model(_strip(item)):
            yield (*path, ANY_INDEX)  # an item added or removed
        yield from _walk(item, (*path, ANY_INDEX), seen)
        return
    if origin is dict:
        _, value = typing.get_args(annotation)
        yield from _walk(value, (*path, ANY_KEY), seen)
        return
    if origin is typing.Literal or annotation in (str, int, float, bool) or _is_enum(annotation):
        yield path
        return
    raise TypeError(f"{format_path(path)}: no path rule for the annotation {annotation!r}")


def _is_enum(annotation: Any) -> bool:
    return isinstance(annotation, type) and issubclass(annotation, enum.Enum)


def model_paths(model: type[BaseModel] = ElasticSlurmConfig) -> list[Path]:
    """Every pattern a diff of two configs can report, in the model's field order, each once."""
    return list(dict.fromkeys(_walk(model, (), frozenset())))
