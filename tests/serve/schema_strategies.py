"""Hypothesis strategies from the service's OpenAPI document: request bodies that its JSON
Schema accepts, and bodies one change away from that.

Handles what the service's schemas use: ``$ref`` to ``components/schemas``, ``anyOf`` /
``oneOf`` (also beside an object's properties, with branches that name required
properties: exactly one of ``text`` and ``texts``), ``const`` / ``enum``, the JSON types
with ``minimum`` / ``maximum``, ``minLength`` / ``maxLength`` / ``pattern``, ``minItems`` /
``maxItems``, and objects with optional properties and ``additionalProperties: false``.
Strings and lists are kept short (a fuzz is about shapes, not sizes; the size limits have
their own tests).
"""

from __future__ import annotations

import math
import re
from typing import Any

from hypothesis import strategies as st

#: longest generated string and list
MAX_STRING = 30
MAX_LIST = 4
#: characters of generated strings: any Unicode scalar value (no lone surrogates, which no
#: schema string can hold)
CHARS = st.characters(codec="utf-8")
#: any JSON value, small
JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-10**6, 10**6)
    | st.floats(allow_nan=False, allow_infinity=False) | st.text(CHARS, max_size=12),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(CHARS, max_size=8),
                                                                inner, max_size=3),
    max_leaves=6)


def resolve(schema: dict[str, Any], document: dict[str, Any]) -> dict[str, Any]:
    """A schema with its ``$ref`` (to ``#/components/schemas/NAME``) followed."""
    while "$ref" in schema:
        *_, name = schema["$ref"].split("/")
        schema = document["components"]["schemas"][name]
    return schema


def request_schema(document: dict[str, Any], path: str, method: str = "post"
                   ) -> dict[str, Any] | None:
    """The JSON Schema of an operation's request body, or None when it takes none."""
    body = document["paths"][path][method].get("requestBody")
    if body is None:
        return None
    return body["content"]["application/json"]["schema"]


def valid(schema: dict[str, Any], document: dict[str, Any]) -> st.SearchStrategy[Any]:
    """Values the schema accepts."""
    schema = resolve(schema, document)
    for key in ("anyOf", "oneOf"):
        if key in schema:
            return _alternatives(schema, key, document)
    if "const" in schema:
        return st.just(schema["const"])
    if "enum" in schema:
        return st.sampled_from(schema["enum"])
    kind = schema.get("type")
    if kind == "null":
        return st.none()
    if kind == "boolean":
        return st.booleans()
    if kind == "integer":
        low, high = schema.get("minimum"), schema.get("maximum")
        return st.integers(None if low is None else math.ceil(low),
                           None if high is None else math.floor(high))
    if kind == "number":
        return st.floats(schema.get("minimum"), schema.get("maximum"), allow_nan=False,
                         allow_infinity=False)
    if kind == "string":
        low = schema.get("minLength", 0)
        text = st.text(CHARS, min_size=low,
                       max_size=max(low, min(schema.get("maxLength", MAX_STRING), MAX_STRING)))
        if "pattern" in schema:
            pattern = re.compile(schema["pattern"])
            text = text.filter(lambda s: pattern.search(s) is not None)
        return text
    if kind == "array":
        low = schema.get("minItems", 0)
        return st.lists(valid(schema.get("items", {}), document), min_size=low,
                        max_size=max(low, min(schema.get("maxItems", MAX_LIST), MAX_LIST)))
    if kind == "object":
        props = schema.get("properties", {})
        required = set(schema.get("required", ()))
        return st.fixed_dictionaries(
            {k: valid(v, document) for k, v in props.items() if k in required},
            optional={k: valid(v, document) for k, v in props.items() if k not in required})
    return JSON_VALUES  # no constraint


def _alternatives(schema: dict[str, Any], key: str, document: dict[str, Any]
                  ) -> st.SearchStrategy[Any]:
    """Values of an ``anyOf`` / ``oneOf`` schema; beside other keywords, each branch is the
    schema with the branch's required properties, and a ``oneOf`` value meets the required
    of exactly one branch."""
    branches = schema[key]
    rest = {k: v for k, v in schema.items() if k != key}
    if not rest:
        return st.one_of([valid(s, document) for s in branches])
    merged = st.one_of([valid({**rest, **b, "required": [
        *rest.get("required", ()), *b.get("required", ())]}, document) for b in branches])
    if key == "anyOf":
        return merged
    return merged.filter(lambda v: sum(
        all(name in v for name in b.get("required", ())) for b in branches) == 1)


def object_schema(schema: dict[str, Any], document: dict[str, Any]) -> dict[str, Any] | None:
    """The object branch of a body schema (a request model, possibly ``anyOf`` null)."""
    schema = resolve(schema, document)
    if schema.get("type") == "object":
        return schema
    for branch in schema.get("anyOf", ()):
        found = object_schema(branch, document)
        if found is not None:
            return found
    return None


@st.composite
def one_change(draw: st.DrawFn, schema: dict[str, Any], document: dict[str, Any]
               ) -> tuple[Any, str, str | None]:
    """A valid object body with one change: ``(body, change, field)``, the change one of
    ``"unknown_field"`` (a property the schema does not have), ``"any_value"`` (a
    property set to any JSON value, valid or not) or ``"not_an_object"`` (the whole body
    replaced by a JSON value that is not an object)."""
    obj = object_schema(schema, document)
    assert obj is not None, "no object body"
    body = dict(draw(valid(obj, document)))
    props = list(obj.get("properties", {}))
    change = draw(st.sampled_from(["unknown_field", "any_value", "not_an_object"]))
    if change == "unknown_field":
        name = draw(st.text(CHARS, min_size=1, max_size=10).filter(lambda k: k not in props))
        body[name] = draw(JSON_VALUES)
        return body, change, name
    if change == "any_value":
        name = draw(st.sampled_from(props))
        body[name] = draw(JSON_VALUES)
        return body, change, name
    return draw(JSON_VALUES.filter(lambda v: not isinstance(v, dict | type(None)))), change, \
        None
