"""Requests validated against the protocol's pydantic shapes, errors told in the project's words.

``cuzk.protocol_requests`` declares what a client may send; this module validates a parsed body
or a query with those shapes and turns pydantic's errors into one 400 message that names each
field and says what it must be (the words come from the shape's own JSON schema: the same
document clients read), never pydantic's URLs or type names. A body's cost stays bounded:
fields the shape does not list are refused before pydantic sees them (pydantic would describe
each one, about 25 microseconds apiece), and list items fail fast (the first bad one is told).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, Generic, TypeVar

from pydantic import TypeAdapter, ValidationError

from cuzk.api.signals import OversizeNumber
from cuzk.protocol_requests import ProofQuery, SubmitRequest, WitnessSubmitQuery

T = TypeVar("T")
MAX_PROBLEMS = 5
"""Problems told in one message; more are counted, not listed."""
MAX_NAMES = 10
"""Unknown field names listed in one message."""
MAX_ABOUT = 100
"""A field's description (what it is for) follows a problem with it when it is this short."""
_OBJECT_TYPES = frozenset({"dict_type", "model_type", "typed_dict_type", "model_attributes_type"})


class RequestInvalid(Exception):
    """A request that does not have the protocol's shape; the message says every way it
    does not (HTTP 400)."""


def json_type(value: object) -> str:
    """JSON's name for a value's type, for messages a client can act on."""
    if value is None:
        return "null"
    if isinstance(value, OversizeNumber | bool):
        return "number" if isinstance(value, OversizeNumber) else "boolean"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    if isinstance(value, dict):
        return "object"
    return type(value).__name__


def describe(value: object) -> str:
    """A value as a message may show it: short scalars as JSON, containers by their type."""
    if isinstance(value, OversizeNumber):
        return f"a number of {value.digits} digits"
    if isinstance(value, dict | list):
        return json_type(value)
    text = json.dumps(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _name(name: str) -> str:
    """A field name the client chose, quoted, JSON-escaped (control characters, surrogates) and
    at most 40 characters long."""
    text = json.dumps(name)[1:-1]
    return "'" + (text if len(text) <= 40 else text[:37] + "...") + "'"


def _where(loc: Sequence[int | str]) -> str:
    """``('inputs', 1)`` as ``'inputs[1]'``."""
    text = ""
    for part in loc:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return repr(text)


def _plural(n: int, word: str) -> str:
    return word if n == 1 else word + "s"


class Shape(Generic[T]):
    """One request shape: its validator, its JSON schema, and how its problems are told."""

    def __init__(self, shape: type[T], subject: str) -> None:
        self.adapter: TypeAdapter[T] = TypeAdapter(shape)
        self.schema: dict[str, Any] = self.adapter.json_schema()
        self.fields: tuple[str, ...] = tuple(self.schema.get("properties", {}))
        self.closed = self.schema.get("additionalProperties") is False
        self.subject = subject  # "request body", "query"

    def validate(self, data: Any) -> T:
        """``data`` as the shape (RequestInvalid telling every problem found)."""
        if self.closed and isinstance(data, dict):
            unknown = [k for k in data if k not in self.fields]
            if unknown:
                raise RequestInvalid(self._unknown(unknown))
        try:
            return self.adapter.validate_python(data)
        except ValidationError as e:
            errors: list[Mapping[str, Any]] = list(e.errors(include_url=False))
            raise RequestInvalid(self.message(errors)) from None

    # ---- messages

    def message(self, errors: Sequence[Mapping[str, Any]]) -> str:
        unknown = [str(e["loc"][-1]) for e in errors if e["type"] == "extra_forbidden"]
        missing = [str(e["loc"][-1]) for e in errors if e["type"] == "missing"]
        problems = [self._unknown(unknown)] if unknown else []
        if missing:
            problems.append(f"missing required {_plural(len(missing), 'field')}: "
                            + ", ".join(_name(k) for k in missing))
        problems += [self._problem(e) for e in errors
                     if e["type"] not in ("extra_forbidden", "missing")]
        text = "; ".join(problems[:MAX_PROBLEMS])
        if len(problems) > MAX_PROBLEMS:
            text += f" (and {len(problems) - MAX_PROBLEMS} more problems)"
        return text

    def _unknown(self, names: Sequence[str]) -> str:
        shown = ", ".join(_name(k) for k in names[:MAX_NAMES])
        if len(names) > MAX_NAMES:
            shown += f" and {len(names) - MAX_NAMES} more"
        return (f"unknown {_plural(len(names), 'field')}: {shown}"
                f" (allowed: {', '.join(self.fields)})")

    def _problem(self, error: Mapping[str, Any]) -> str:
        loc, kind, value = error["loc"], error["type"], error.get("input")
        if not loc:
            if kind in _OBJECT_TYPES:
                return f"{self.subject} must be a JSON object, got {json_type(value)}"
            return f"{self.subject} is invalid: {error['msg']}"
        where = _where(loc)
        ctx: Mapping[str, Any] = error.get("ctx") or {}
        if kind == "value_error" and "error" in ctx:  # the shape's own check, told after the value
            return f"{where} {describe(value)} {ctx['error']}"
        if kind == "string_too_long" and isinstance(value, str):
            return (f"{where} is {len(value)} characters; at most {ctx.get('max_length')} are"
                    " allowed")
        if kind == "string_unicode":
            return (f"{where} is not Unicode text: it holds a lone UTF-16 surrogate (an unpaired"
                    " \\ud800-\\udfff escape)")
        text = f"{where} must be {expectation(self._node(loc))}, got {describe(value)}"
        about = self._node(loc[:1]).get("description", "")
        if about and len(about) <= MAX_ABOUT and "`" not in about and "\n" not in about:
            text += f" ({about[0].lower()}{about[1:].rstrip('.')})"  # what the field is for
        return text

    def _node(self, loc: Sequence[int | str]) -> Mapping[str, Any]:
        """The JSON schema of what belongs at ``loc`` ({} when the schema does not say)."""
        node: Mapping[str, Any] = self.schema
        for part in loc:
            if "$ref" in node:
                node = self.schema.get("$defs", {}).get(node["$ref"].rsplit("/", 1)[-1], {})
            if isinstance(part, int):
                node = node.get("items", {})
            else:
                node = node.get("properties", {}).get(part, {})
        return node


def expectation(node: Mapping[str, Any]) -> str:
    """What a JSON schema node accepts, in words: 'a non-empty string of at most 256
    characters', 'one of critical, high, normal, low', 'a number from 0 to 300'."""
    if "enum" in node:
        return "one of " + ", ".join(str(v) for v in node["enum"])
    kind = node.get("type")
    if kind == "string":
        if node.get("format") == "date-time":
            return "an RFC 3339 time string such as '2026-12-01T16:30:00Z'"
        low, high = node.get("minLength", 0), node.get("maxLength")
        text = "a non-empty string" if low == 1 else "a string"
        if low > 1:
            text += f" of at least {low} characters"
        if high is not None:
            text += f" of at most {high} characters"
        return text
    if kind in ("number", "integer"):
        text = "a number" if kind == "number" else "an integer"
        low, high = node.get("minimum"), node.get("maximum")
        if low is not None and high is not None:
            return f"{text} from {low:g} to {high:g}"
        if low is not None:
            return f"{text} of at least {low:g}"
        return text if high is None else f"{text} of at most {high:g}"
    if kind == "array":
        items = node.get("items", {})
        return "an array of objects" if items.get("type") == "object" else "an array"
    if kind == "object":
        return "an object"
    if kind == "boolean":
        return "true or false"
    return "valid"


SUBMIT = Shape(SubmitRequest, "request body")
PROOF_QUERY = Shape(ProofQuery, "query")
WITNESS_QUERY = Shape(WitnessSubmitQuery, "query")
