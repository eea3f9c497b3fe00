"""Slot schemas as data: which converter turns each slot name's text into its value, and
the date that relative dates resolve against.

A schema is a JSON object (the built-in ones are files in ``headwise/slots/schemas/``)::

    {"name": "mybank", "reference_date": null,
     "description": "our transfer and card slots",
     "slots": {"transfer_amount": {"converter": "amount", "default_currency": "HKD"},
               "due_date": "iso_date",
               "card": "card_tail"}}

Each slot maps to a converter name of :data:`~headwise.slots.converters.CONVERTERS`, or to
an object with ``"converter"`` and that converter's options. ``reference_date`` is an ISO
date, or null for the day of the call. :func:`load_schema` reads and checks one (a file, a
mapping); :func:`register_schema` adds it to :data:`SCHEMAS`, after which
``normalize_slot(name, text, schema="mybank")`` and the compound classifier's answers use
it. Built in: ``demo`` (the demo corpus, 2026-01-15) and ``nlupp`` (NLU++ banking,
2022-03-15).
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import date
from importlib import resources
from pathlib import Path
from typing import Any

from headwise.slots.converters import CONVERTERS

__all__ = ["REFERENCE_DATES", "SCHEMAS", "SlotRule", "SlotSchema", "load_schema",
           "register_schema", "unregister_schema"]


@dataclass(frozen=True)
class SlotRule:
    """One slot of a schema: its converter's name and the options it is called with."""

    converter: str
    options: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> str | dict[str, Any]:
        """The rule as a schema file writes it (the bare name when it has no options)."""
        return self.converter if not self.options else {"converter": self.converter,
                                                         **self.options}


def _rule(slot: str, spec: Any, where: str) -> SlotRule:
    if isinstance(spec, str):
        spec = {"converter": spec}
    if not isinstance(spec, Mapping) or not isinstance(spec.get("converter"), str):
        raise ValueError(f"{where}: slot {slot!r} needs a converter name or an object with "
                         f"\"converter\", got {spec!r}")
    name = spec["converter"]
    if name not in CONVERTERS:
        raise ValueError(f"{where}: slot {slot!r} names converter {name!r}; known: "
                         f"{', '.join(sorted(CONVERTERS))}")
    options = {k: v for k, v in spec.items() if k != "converter"}
    allowed = [p.name for p in inspect.signature(CONVERTERS[name]).parameters.values()
               if p.kind is inspect.Parameter.KEYWORD_ONLY]
    unknown = sorted(set(options) - set(allowed))
    if unknown:
        raise ValueError(f"{where}: slot {slot!r}: converter {name!r} takes "
                         f"{', '.join(allowed) if allowed else 'no options'}, not "
                         f"{', '.join(unknown)}")
    return SlotRule(name, options)


class SlotSchema(Mapping[str, Callable[[str, date], Any]]):
    """A named set of slot rules: ``schema[slot](text, reference)`` is the slot's value.

    Args:
        name: the schema's name (what ``normalize_slot(..., schema=)`` takes).
        slots: slot name -> :class:`SlotRule`, a converter name, or an object with
            ``"converter"`` and its options.
        reference_date: the date relative dates resolve against; None for the day of the
            call.
        description: one line for the user.

    Raises:
        ValueError: an empty name or schema, an unknown converter or option.
    """

    def __init__(self, name: str, slots: Mapping[str, Any], *,
                 reference_date: date | None = None, description: str = "") -> None:
        if not isinstance(name, str) or not name.strip():
            raise ValueError(f"a slot schema needs a name, got {name!r}")
        if not slots:
            raise ValueError(f"slot schema {name!r} has no slots")
        self.name = name
        self.reference_date = reference_date
        self.description = description
        self.rules: dict[str, SlotRule] = {
            slot: spec if isinstance(spec, SlotRule) else _rule(slot, spec, f"schema {name!r}")
            for slot, spec in slots.items()}

    def __getitem__(self, slot: str) -> Callable[[str, date], Any]:
        rule = self.rules[slot]
        converter = CONVERTERS[rule.converter]
        return lambda text, reference: converter(text, reference, **rule.options)

    def __iter__(self) -> Iterator[str]:
        return iter(self.rules)

    def __len__(self) -> int:
        return len(self.rules)

    def __repr__(self) -> str:
        return f"SlotSchema({self.name!r}, {len(self)} slots)"

    def reference(self) -> date:
        """The date relative dates resolve against: the schema's, else today."""
        return self.reference_date or date.today()

    def to_dict(self) -> dict[str, Any]:
        """The schema as its JSON file holds it (:func:`load_schema` reads it back)."""
        return {"name": self.name,
                "reference_date": None if self.reference_date is None
                else self.reference_date.isoformat(),
                "description": self.description,
                "slots": {slot: rule.to_json() for slot, rule in self.rules.items()}}


def load_schema(source: str | Path | Mapping[str, Any]) -> SlotSchema:
    """A slot schema from a JSON file or an already parsed mapping (the format of the
    module docstring).

    Raises:
        FileNotFoundError: no such file.
        ValueError: not a JSON object, a missing name or slots, a bad reference date, an
            unknown converter or option (the message names the file and the slot).
    """
    where = "schema"
    if isinstance(source, (str, Path)):
        path = Path(source)
        where = str(path)
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except json.JSONDecodeError as e:
            raise ValueError(f"{path}: not JSON ({e})") from None
    else:
        data = source
    if not isinstance(data, Mapping):
        raise ValueError(f"{where}: a slot schema is a JSON object, got {type(data).__name__}")
    unknown = sorted(set(data) - {"name", "reference_date", "description", "slots"})
    if unknown:
        raise ValueError(f"{where}: unknown keys {unknown}; a schema has name, "
                         f"reference_date, description and slots")
    if not isinstance(data.get("slots"), Mapping):
        raise ValueError(f"{where}: \"slots\" must be an object of slot name -> converter")
    reference = data.get("reference_date")
    try:
        day = None if reference is None else date.fromisoformat(reference)
    except (TypeError, ValueError):
        raise ValueError(f"{where}: reference_date must be an ISO date or null, got "
                         f"{reference!r}") from None
    try:
        return SlotSchema(data.get("name", ""), data["slots"], reference_date=day,
                          description=str(data.get("description", "")))
    except ValueError as e:
        raise ValueError(f"{where}: {e}") from None


def _builtin() -> dict[str, SlotSchema]:
    folder = resources.files("headwise.slots") / "schemas"
    out = {}
    for name in ("demo", "nlupp"):  # the lookup order of a slot name without a schema
        schema = load_schema(json.loads((folder / f"{name}.json").read_text("utf-8")))
        out[schema.name] = schema
    return out


#: schema name -> schema: the built-in ``demo`` and ``nlupp``, then those registered; a slot
#: name looked up without a schema is tried in this order
SCHEMAS: dict[str, SlotSchema] = _builtin()
#: the reference date of each built-in schema
REFERENCE_DATES: dict[str, date] = {name: s.reference() for name, s in SCHEMAS.items()}
_BUILTIN = frozenset(SCHEMAS)


def register_schema(schema: SlotSchema | str | Path | Mapping[str, Any], *,
                    replace: bool = False) -> SlotSchema:
    """Add a schema (or a file or mapping :func:`load_schema` reads) to :data:`SCHEMAS`.

    Raises:
        ValueError: a built-in schema's name, or a registered one without ``replace``.
    """
    if not isinstance(schema, SlotSchema):
        schema = load_schema(schema)
    if schema.name in _BUILTIN:
        raise ValueError(f"{schema.name!r} is a built-in schema; give yours another name")
    if schema.name in SCHEMAS and not replace:
        raise ValueError(f"a schema {schema.name!r} is registered; pass replace=True")
    SCHEMAS[schema.name] = schema
    return schema


def unregister_schema(name: str) -> None:
    """Remove a registered schema (a built-in one stays).

    Raises:
        KeyError: no such registered schema.
    """
    if name in _BUILTIN or name not in SCHEMAS:
        raise KeyError(f"no registered schema {name!r}")
    del SCHEMAS[name]
