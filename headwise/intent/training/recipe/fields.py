"""A recipe field's type and range, checked when its part is built; every message names
the field by its path (``levers.pretrain_epochs``)."""

from __future__ import annotations

import dataclasses
import types
import typing
from typing import Any

from headwise.models.config import ModelConfig

__all__ = ["check_c", "check_choice", "check_overrides", "check_types", "describe_hint",
           "fits_hint"]


def fits_hint(value: Any, hint: Any) -> bool:
    """Whether ``value`` fits a field's type hint (no bool for a number, no float for an
    int, a list's items checked)."""
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        return any(fits_hint(value, h) for h in typing.get_args(hint))
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
    if origin in (list, tuple):
        items = typing.get_args(hint) or (Any,)
        return isinstance(value, (list, tuple)) and all(fits_hint(v, items[0]) for v in value)
    if origin is dict:
        return isinstance(value, dict)
    return isinstance(value, origin or hint)


def describe_hint(hint: Any) -> str:
    """A type hint in words, as a message or the docs say it."""
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        return " or ".join(describe_hint(h) for h in typing.get_args(hint))
    names = {int: "an integer", float: "a number", str: "a string", bool: "true or false",
             type(None): "null"}
    if hint in names:
        return names[hint]
    if typing.get_origin(hint) in (list, tuple):
        item = describe_hint(typing.get_args(hint)[0]).removeprefix("an ").removeprefix("a ")
        return f"a list of {item}s"
    if typing.get_origin(hint) is dict:
        return "an object"
    return getattr(hint, "__name__", str(hint))


def check_types(part: Any, path: str) -> None:
    """Refuse a field of the dataclass ``part`` whose value has the wrong type, naming it
    by ``path.field``."""
    hints = typing.get_type_hints(type(part))
    for f in dataclasses.fields(part):
        value = getattr(part, f.name)
        if not fits_hint(value, hints[f.name]):
            raise ValueError(f"{path}.{f.name} must be {describe_hint(hints[f.name])}, got "
                             f"{value!r}")


def check_choice(path: str, value: Any, choices: tuple[Any, ...]) -> None:
    """Refuse a field whose value is not one of ``choices``, naming them."""
    if value not in choices:
        raise ValueError(f"{path} must be one of {list(choices)}, got {value!r}")


def check_overrides(path: str, overrides: dict[str, Any], own: tuple[str, ...]) -> None:
    """``model_overrides`` must name ModelConfig fields the part does not own itself."""
    known = {f.name for f in dataclasses.fields(ModelConfig)}
    unknown = sorted(set(overrides) - known)
    if unknown:
        raise ValueError(f"{path}.model_overrides: {unknown} are not ModelConfig fields")
    mine = sorted(set(overrides) & set(own))
    if mine:
        raise ValueError(f"{path}.model_overrides: {mine} are fields of the part itself "
                         f"({path}.{mine[0]})")


def check_c(path: str, c: float | list[float]) -> None:
    """Refuse a logistic regression's inverse regularisation that is not positive (one
    value, or a non-empty list of candidates)."""
    cs = c if isinstance(c, list) else [c]
    if not cs or min(cs) <= 0:
        raise ValueError(f"{path} must be positive (or a non-empty list of such), got {c!r}")
