"""Type checks of a recipe's fields against their annotations: ``"epochs": "ten"`` or
``2.5`` is refused in one line naming the field and what it takes, not a traceback later."""

from __future__ import annotations

import dataclasses
import types
import typing
from typing import Any


def _matches(value: Any, hint: Any) -> bool:
    """Whether ``value`` fits a recipe field's type hint (no bool for a number, no float
    for an int, a list's items checked)."""
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        return any(_matches(value, h) for h in typing.get_args(hint))
    if hint is type(None):
        return value is None
    if hint is Any:
        return True
    if hint is bool:
        return isinstance(value, bool)
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if hint is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if origin is list:
        (item,) = typing.get_args(hint) or (Any,)
        return isinstance(value, list) and all(_matches(v, item) for v in value)
    if origin is dict:
        return isinstance(value, dict)
    return isinstance(value, origin or hint)


def _describe(hint: Any) -> str:
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        return " or ".join(_describe(h) for h in typing.get_args(hint))
    if hint is type(None):
        return "null"
    names = {int: "an integer", float: "a number", str: "a string", bool: "true or false"}
    if hint in names:
        return names[hint]
    if typing.get_origin(hint) is list:
        item = _describe(typing.get_args(hint)[0]).removeprefix("an ").removeprefix("a ")
        return f"a list of {item}s"
    if typing.get_origin(hint) is dict:
        return "an object"
    return str(hint)


def check_field_types(recipe: Any) -> None:
    """Refuse a recipe field whose value has the wrong type (``"epochs": "ten"``,
    ``"epochs": 2.5``, ``"d_model": "64"``), naming the field and what it takes.

    Raises:
        ValueError: the first field of the wrong type.
    """
    hints = typing.get_type_hints(type(recipe))
    for f in dataclasses.fields(recipe):
        value = getattr(recipe, f.name)
        if not _matches(value, hints[f.name]):
            raise ValueError(f"recipe field {f.name!r} must be {_describe(hints[f.name])}, "
                             f"got {value!r}")
