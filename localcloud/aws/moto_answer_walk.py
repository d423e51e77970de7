"""A quicker walk of an EC2 answer's shape for moto's serializer, installed in the emulated AWS server process; same
answers.

moto 5.2's `EC2Serializer` turns an answer object into a dict by walking botocore's output shape: for each member
of each structure it builds an `AttributePickerContext` (joining the whole key path into a string), calls the value
picker, then `_serialize`, which looks its method up by an f-string name, pushes and pops the path and calls
`_default_serialize`, which calls `get_serialized_name`. An instance has ~150 members (most of them unset); a
RunInstances answer of 500 instances is ~75,000 of these steps, most of the emulator's CPU in the N=4000 jobs bench.

`walked_result` replaces `EC2Serializer._serialize_result` with `AnswerWalk`, the same walk with less around it.
For each class of object at each key path it makes a plan once per answer (`AnswerWalk.plan`), per member:
- the names moto's picker tries, from `moto_serializer`'s cache (the same inputs decide them); each object's value
  is then read as moto's `get_value` reads it;
- the member's response transformer, found by moto's rule (moto sets its transformers before it serializes; none
  changes them while it does) and read from the dict, once per answer;
- how it is written: a string or an integer straight into its structure's dict under its XML name, as
  `BaseXMLSerializer` writes it; structures, lists and booleans as moto's XML serializer writes them; any other
  type (timestamps, maps, floats, blobs) and any member with an XML namespace by moto's own method, with moto's
  path set as its own walk would have it at that point.
It is used only for `EC2Serializer` itself with one of moto's two pickers and its default alias providers; anything
else, and errors, take moto's own path.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from moto.core.utils import MISSING, get_value  # type: ignore[attr-defined]

from localcloud.aws.moto_serializer import possible_names

_INSTALLED = "_elastic_slurm_walked_result"
_Transform = Callable[[Any], Any]
_Plan = tuple[tuple[str, Any, tuple[str, ...], bool, "_Transform | None", str, str], ...]
_STRING, _INTEGER, _OTHER = "string", "integer", "other"  # how a member is written (_leaf)
_KINDS = {"string": _STRING, "integer": _INTEGER, "long": _INTEGER}  # shape type -> how


def _leaf(shape: Any, key: str) -> tuple[str, str]:
    """How member `key` of shape `shape` is written, and under which XML name (`@name` for an attribute): a string
    or an integer straight into its structure's dict, anything else by `write`; a member with an XML namespace has
    no name here (moto's own `_default_serialize` writes it)."""
    serialization = shape.serialization
    kind = _KINDS.get(shape.type_name, _OTHER)
    if serialization.get("xmlNamespace"):
        return _OTHER, ""
    name = serialization.get("name", key)
    return kind, "@" + name if serialization.get("xmlAttribute", False) else name


class AnswerWalk:
    """One answer's walk: moto's `_serialize` and the XML type writers, for the serializer `serializer`."""

    def __init__(self, serializer: Any) -> None:
        self.serializer = serializer
        self.picker = serializer._value_picker
        self.transformers: dict[str, _Transform] = self.picker.response_transformers
        self.plans: dict[tuple[Any, ...], _Plan] = {}

    def transform_for(self, key_path: str, key: str) -> _Transform | None:
        """The first transformer whose path ends `key_path.key`, in the dict's order (moto's own rule)."""
        full = f"{key_path}.{key}"
        path = next((path for path in self.transformers if full.endswith(path)), None)
        return None if path is None else self.transformers[path]

    def plan(self, obj: Any, shape: Any, here: str) -> _Plan:
        """Per member of `shape` (in order): its key and shape, the names moto's picker tries on an object like
        `obj` (its class and its Meta's explicit aliases decide them), whether a name is a dotted path, and the
        transformer of its key path. Kept for the answer: its objects of one class at one path share it."""
        aliases = getattr(getattr(obj, "Meta", None), "serialization_aliases", None)
        plan_key = (obj.__class__, shape, here, id(aliases))
        plan = self.plans.get(plan_key)
        if plan is None:
            members = []
            for key, member in shape.members.items():
                member.parent = shape  # as moto sets it before each lookup (some names depend on it)
                names = possible_names(self.picker, obj, key, member)
                dotted = any("." in n for n in names)
                members.append((key, member, names, dotted, self.transform_for(here, key), *_leaf(member, key)))
            plan = self.plans[plan_key] = tuple(members)
        return plan

    def put(self, serialized: dict[str, Any], value: Any, shape: Any, key: str) -> None:
        """`BaseXMLSerializer._default_serialize`: under the member's XML name (an attribute's with "@"); a member
        with an XML namespace by moto's own."""
        name = _leaf(shape, key)[1]
        if name:
            serialized[name] = value
        else:
            self.serializer._default_serialize(serialized, value, shape, key)

    def write(self, serialized: dict[str, Any], value: Any, shape: Any, key: str, path: str) -> None:
        """moto's `_serialize`: the value at `path.key` (`path.<shape name>` at the top) by its shape's type."""
        kind = shape.type_name
        if kind == "string":
            self.put(serialized, str(value), shape, key)
        elif kind in ("integer", "long"):
            self.put(serialized, int(value), shape, key)
        elif kind == "boolean":
            self.put(serialized, "true" if value is True or str(value).lower() == "true" else "false", shape, key)
        elif kind == "structure":
            self.structure(serialized, value, shape, key, f"{path}.{key or shape.name}")
        elif kind == "list":
            self.list(serialized, value, shape, key, f"{path}.{key or shape.name}")
        else:
            serializer = self.serializer
            serializer.path = f"{path}.{key or shape.name}".split(".")
            getattr(serializer, f"_serialize_type_{kind}", serializer._default_serialize)(serialized, value, shape, key)

    def structure(self, serialized: dict[str, Any], value: Any, shape: Any, key: str, here: str) -> None:
        """`ResponseSerializer._serialize_type_structure`: each member the picker finds (the first name the object
        has, as moto's `get_value` reads it, through its transformer), in the shape's order."""
        if value is None:
            return
        wrapper: dict[str, Any] = {} if key else serialized
        by_item = hasattr(value, "__getitem__")
        for member_key, member_shape, names, dotted, transform, leaf, xml_key in self.plan(value, shape, here):
            found = None
            for name in names:
                if dotted:
                    picked = get_value(value, name, MISSING)
                elif by_item:
                    try:
                        picked = value[name]
                    except (KeyError, IndexError, TypeError, AttributeError):
                        picked = MISSING
                else:
                    picked = getattr(value, name, MISSING)
                if picked is not MISSING:
                    found = picked
                    break
            if transform is not None:
                found = transform(found)
            if found is None:
                continue
            if leaf is _STRING:
                wrapper[xml_key] = str(found)
            elif leaf is _INTEGER:
                wrapper[xml_key] = int(found)
            else:
                self.write(wrapper, found, member_shape, member_key, here)
        if key:
            self.put(serialized, wrapper, shape, key)

    def list(self, serialized: dict[str, Any], value: Any, shape: Any, key: str, here: str) -> None:
        """`BaseXMLSerializer._serialize_type_list`: the items that write something, under `member` or flattened."""
        member = shape.member
        items: list[Any] = []
        for item in value:
            wrapper: dict[str, Any] = {}
            self.write(wrapper, item, member, member.name, here)
            if wrapper:
                written = wrapper[member.serialization.get("name", member.name)]
                if written != {}:
                    items.append(written)
        if not items:
            if not shape.is_flattened:
                self.put(serialized, "", shape, key)
            return
        if shape.is_flattened:
            self.put(serialized, items, member, shape.serialization.get("name", key))
        else:
            self.put(serialized, {member.serialization.get("name", "member"): items}, shape, key)


def walked_result(own_result: Callable[[Any, Any, Any], Any]) -> Callable[[Any, Any, Any], Any]:
    """`EC2Serializer._serialize_result(self, resp, result)` by `AnswerWalk` (see the docstring for when)."""
    from moto.core.serialize import (
        DEFAULT_ALIAS_PROVIDERS,
        AttributePicker,
        EC2Serializer,
        XFormedAttributePicker,
    )

    def serialize_result(serializer: Any, resp: Any, result: Any) -> Any:
        picker = serializer._value_picker
        if (
            type(serializer) is not EC2Serializer
            or type(picker) not in (AttributePicker, XFormedAttributePicker)
            or picker.alias_providers is not DEFAULT_ALIAS_PROVIDERS
        ):
            return own_result(serializer, resp, result)
        output_shape = serializer.operation_model.output_shape
        serialized: dict[str, Any] = serializer.MAP_TYPE()
        if output_shape is not None:
            AnswerWalk(serializer).write(serialized, result, output_shape, "", ".".join(serializer.path))
        return serializer._serialized_result_to_response(resp, result, output_shape, serialized)  # type: ignore[arg-type]

    return serialize_result


def install() -> None:
    """Make moto's EC2 serializer walk its answers with `AnswerWalk` (idempotent)."""
    from moto.core.serialize import EC2Serializer

    if getattr(EC2Serializer, _INSTALLED, False):
        return
    EC2Serializer._serialize_result = walked_result(EC2Serializer._serialize_result)  # type: ignore[method-assign,assignment]
    setattr(EC2Serializer, _INSTALLED, True)
