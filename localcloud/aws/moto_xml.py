"""A quicker writer of moto's EC2 answers as XML, installed in the emulated AWS server process; same bytes.

moto's EC2 serializer turns the answer's dict into XML with `xmltodict.unparse(full_document=True,
short_empty_elements=True, pretty=False)`: per element a SAX `startElement`, an `AttributesImpl`, a name check and a
recursive call with fourteen arguments. For a RunInstances answer of 500 instances that was a quarter of the
serializer's time (py-spy, bench/README.md). `xml_document` writes the same document into a list of strings:

- a dict is an element: `@name` keys are its attributes (in order), `#text` its text, other keys its children, an
  empty list child is left out; a list is the same element repeated; None is an empty element; any other value is
  text (`true`/`false` for booleans, bytes decoded as UTF-8 with replacement, else `str`);
- text is escaped with `xml.sax.saxutils.escape`, attributes with `quoteattr`, as XMLGenerator does;
- an element with neither children nor text is written `<name/>`.

What this writer does not do the same way it does not try: a `#comment` key, an `@xmlns` dict (namespace map), an
iterable value other than a list (a tuple, a generator), a name that is not a string, a document whose root repeats,
or a name xmltodict would refuse all raise `Unwritten`, and `write_body` then hands the whole answer to xmltodict
itself, which writes it, or raises its own error. moto's answers are dicts, lists, strings and numbers.

Every answer of every service then goes through moto's `BaseResponse._enrich_response`, which puts the request id
between `<RequestId>` and `</RequestId>` with a regular expression whose look-behind is tried at every character of
the body: 6 % of the emulator's CPU for 4.5 MB RunInstances answers, which name it `<requestId>` and never match.
`request_id_where_named` runs moto's own function on an empty body when the answer holds no `<RequestId>` (the
status header and the `x-amzn-requestid` header are set as before) and returns the body as it was, which is what the
unmatched substitution returns; any other answer goes to moto's own function.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any
from xml.sax.saxutils import escape, quoteattr

PROLOG = '<?xml version="1.0" encoding="utf-8"?>\n'
_INSTALLED = "_elastic_slurm_xml_writer"
_good_names: set[str] = set()  # names xmltodict's own check let through
_NAMES_LIMIT = 100_000


class Unwritten(Exception):
    """A document this writer leaves to xmltodict."""


def _checked(name: Any) -> str:
    """`name`, if xmltodict's `_validate_name` accepts it as an element or attribute name (and it is a plain str:
    xmltodict writes a str subclass's value, an f-string its `__format__`)."""
    if type(name) is not str or name == "#comment":
        raise Unwritten(name)
    if name in _good_names:
        return name
    from xmltodict import _validate_name

    try:
        _validate_name(name, "element")
    except ValueError as refused:
        raise Unwritten(name) from refused
    if len(_good_names) >= _NAMES_LIMIT:
        _good_names.clear()
    _good_names.add(name)
    return name


def _text(value: Any) -> str:
    """xmltodict's `_convert_value_to_string` with its defaults."""
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value).decode("utf-8", errors="replace")
    return str(value)


def _escaped(text: str) -> str:
    """`xml.sax.saxutils.escape(text)` (&, <, >), which most texts of an answer do not need; a plain str either
    way (as `escape`'s replacements return for a str subclass: its value, not its `__str__` or `__format__`)."""
    if "&" in text or "<" in text or ">" in text:
        return escape(text)
    return text if type(text) is str else str.__str__(text)


def _element(name: str, value: Any, out: list[str]) -> None:
    """Write `value` as the element(s) `name`, as xmltodict's `_emit` does. The start tag goes in last (its
    attributes may follow children in the dict): `/>` when nothing was written inside."""
    if isinstance(value, list):
        items = value
    elif hasattr(value, "__iter__") and not isinstance(value, (str, bytes, bytearray, memoryview, dict)):
        raise Unwritten(name)  # another iterable: it may write no element at all
    else:
        items = [value]
    for item in items:
        if not isinstance(item, dict):
            leaf = "" if item is None else item if isinstance(item, str) else _text(item)
            out.append(f"<{name}>{_escaped(leaf)}</{name}>" if leaf else f"<{name}/>")
            continue
        start = len(out)
        out.append("")  # the start tag, once its attributes are known
        attributes = ""
        text: str | None = None
        for key, child in item.items():
            if key == "#text":
                text = None if child is None else _text(child)
            elif isinstance(key, str) and key.startswith("@"):
                if key == "@xmlns" and isinstance(child, dict):
                    raise Unwritten(key)
                attributes += f" {_checked(key[1:])}={quoteattr('' if child is None else _text(child))}"
            elif isinstance(child, str):
                key = _checked(key)
                out.append(f"<{key}>{_escaped(child)}</{key}>" if child else f"<{key}/>")
            elif not (isinstance(child, list) and not child):
                _element(_checked(key), child, out)
        if len(out) == start + 1 and not text:
            out[start] = f"<{name}{attributes}/>"
            continue
        out[start] = f"<{name}{attributes}>"
        if text:
            out.append(_escaped(text))
        out.append(f"</{name}>")


def xml_document(body: dict[str, Any]) -> str:
    """The whole document xmltodict writes for `body` (one root), or Unwritten."""
    if len(body) != 1:
        raise Unwritten("not one root")
    ((name, value),) = body.items()
    if isinstance(value, list) and len(value) > 1:
        raise Unwritten("a repeated root")
    out = [PROLOG]
    _element(_checked(name), value, out)
    return "".join(out)


def written_body(own_body: Callable[[Any, Any], str]) -> Callable[[Any, Any], str]:
    """EC2Serializer's `_serialize_body(self, body)` by `xml_document`, or by moto's own for what it leaves."""

    def write_body(serializer: Any, body: Any) -> str:
        if serializer.pretty_print or not isinstance(body, dict):
            return own_body(serializer, body)
        try:
            return xml_document(body)
        except Unwritten:
            return own_body(serializer, body)

    return write_body


def request_id_where_named(own_enrich: Callable[[Any, Any], Any]) -> Callable[[Any, Any], Any]:
    """moto's `BaseResponse._enrich_response(headers, body)`, its search skipped where it cannot match."""

    def enrich(headers: Any, body: Any) -> Any:
        if isinstance(body, str) and "<RequestId>" not in body:
            headers, _ = own_enrich(headers, "")
            return headers, body
        return own_enrich(headers, body)

    return enrich


def install() -> None:
    """Make moto's EC2 serializer write its XML with `xml_document`, and moto look for a `<RequestId>` only in an
    answer that has one (idempotent)."""
    from moto.core.responses import BaseResponse
    from moto.core.serialize import EC2Serializer

    if getattr(EC2Serializer, _INSTALLED, False):
        return
    EC2Serializer._serialize_body = written_body(EC2Serializer._serialize_body)  # type: ignore[method-assign,assignment]
    BaseResponse._enrich_response = staticmethod(request_id_where_named(BaseResponse._enrich_response))  # type: ignore[method-assign,assignment]
    setattr(EC2Serializer, _INSTALLED, True)
