"""A quicker value lookup for moto's response serializer, installed in the emulated AWS server process; same answers.

moto 5.2 writes every answer from botocore's output shape: for each member of each structure its value picker
(`XFormedAttributePicker.__call__`) lists the attribute names to try (six alias providers built per lookup, each
name also in snake_case), takes the first one the object has, then matches the member's key path against every
response transformer of the service (`str.endswith`, 20 for EC2). A DescribeInstances answer of 1,000 instances is
~480,000 such lookups; in the N=4000 jobs bench they were over half of the emulator's CPU (py-spy, bench/README.md).

Neither list depends on the object's values: the names depend on the object's class (its name, its `Meta`'s
explicit alias for the key), the key and the member's shape with the structure it sits in (`shape.parent`, set by
the serializer before each lookup); the transformer on the transformers' paths and the key path. `picked_value` keeps
both per those inputs, asks moto's own `get_possible_keys` for the names on a miss, and then does exactly what moto's
`__call__` does: the first name the object has, else None, through the first transformer whose path ends the key
path. A picker with other alias providers than moto's defaults goes to moto's own code.

The answer's XML is then written by xmltodict, which checks each element name of the answer (`_validate_name`, a
third of xmltodict's time). `validated_once` remembers the names that passed; any other name goes to xmltodict's own
check, which raises for a bad one as before.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

_INSTALLED = "_elastic_slurm_cached_picker"
CACHE_LIMIT = 100_000  # entries per cache; a full cache starts over (the inputs above are few: shapes x classes)
_NO_META = object()  # the object has no Meta.serialization_aliases: moto's ExplicitAlias offers nothing
_NO_ALIAS = object()
_names: dict[tuple[Any, ...], tuple[str, ...]] = {}
_transforms: dict[tuple[int, str], tuple[tuple[str, ...], str | None]] = {}  # -> (the dict's keys, match)


def _explicit_alias(obj: Any, key: str) -> Any:
    """What moto's ExplicitAlias gives for `key`: the object's `Meta.serialization_aliases[key]`, or _NO_ALIAS."""
    aliases: Any = getattr(getattr(obj, "Meta", None), "serialization_aliases", _NO_META)
    if aliases is _NO_META or key not in aliases:
        return _NO_ALIAS
    return aliases[key]


def possible_names(picker: Any, obj: Any, key: str, shape: Any) -> tuple[str, ...]:
    """The attribute names moto's picker tries for this lookup, in its order (computed by moto once per inputs)."""
    parent = getattr(shape, "parent", None) if shape is not None else None
    cache_key = (type(picker), obj.__class__, _explicit_alias(obj, key), key, shape, parent)
    names = _names.get(cache_key)
    if names is None:
        from moto.core.serialize import AttributePickerContext

        names = tuple(picker.get_possible_keys(AttributePickerContext(obj=obj, key=key, shape=shape)))
        if len(_names) >= CACHE_LIMIT:
            _names.clear()
        _names[cache_key] = names
    return names


def _transform(transformers: dict[str, Callable[[Any], Any]], key_path: str) -> Callable[[Any], Any] | None:
    """The first transformer whose path ends `key_path`, in the dict's order, or None (as moto finds it).

    What is kept is the path that matched, for the dict's keys as they were: moto adds and replaces transformers
    while it serves (a VPC peering sets the status its answer shows), so a changed key list looks again and the
    function is read from the dict at each call."""
    paths = tuple(transformers)
    cached = _transforms.get((id(transformers), key_path))
    if cached is None or cached[0] != paths:
        cached = (paths, next((path for path in paths if key_path.endswith(path)), None))
        if len(_transforms) >= CACHE_LIMIT:
            _transforms.clear()
        _transforms[(id(transformers), key_path)] = cached
    return None if cached[1] is None else transformers[cached[1]]


def picked_value(own_call: Callable[[Any, Any], Any]) -> Callable[[Any, Any], Any]:
    """moto's `AttributePicker.__call__` with the names and the transformer of a lookup kept (see the docstring)."""
    from moto.core.serialize import DEFAULT_ALIAS_PROVIDERS
    from moto.core.utils import MISSING, get_value  # type: ignore[attr-defined]

    def pick(picker: Any, context: Any) -> Any:
        if picker.alias_providers is not DEFAULT_ALIAS_PROVIDERS:
            return own_call(picker, context)
        obj = context.obj
        value = None
        for name in possible_names(picker, obj, context.key, context.shape):
            found = get_value(obj, name, MISSING)
            if found is not MISSING:
                value = found
                break
        transformers = picker.response_transformers
        if transformers:
            transform = _transform(transformers, f"{context.key_path}.{context.key}")
            if transform is not None:
                value = transform(value)
        return value

    return pick


def validated_once(own_check: Callable[[Any, str], None]) -> Callable[[Any, str], None]:
    """xmltodict's `_validate_name(value, kind)`, skipped for a (name, kind) that passed it before."""
    passed: set[tuple[str, str]] = set()

    def check(value: Any, kind: str) -> None:
        if isinstance(value, str) and (value, kind) in passed:
            return
        own_check(value, kind)  # raises ValueError for a bad name
        if isinstance(value, str):
            if len(passed) >= CACHE_LIMIT:
                passed.clear()
            passed.add((value, kind))

    return check


def install() -> None:
    """Make moto's attribute pickers keep what they computed per lookup and xmltodict check a name once
    (idempotent)."""
    import xmltodict
    from moto.core.serialize import AttributePicker

    if getattr(AttributePicker, _INSTALLED, False):
        return
    AttributePicker.__call__ = picked_value(AttributePicker.__call__)  # type: ignore[method-assign,assignment]
    xmltodict._validate_name = validated_once(xmltodict._validate_name)
    setattr(AttributePicker, _INSTALLED, True)
