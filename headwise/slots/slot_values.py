"""Slot values by slot name, in the JSON form each corpus annotates them.

Which converter reads which slot is a schema's (:mod:`headwise.slots.schema`; data files in
``headwise/slots/schemas/``). Two are built in. ``demo``, the built-in demo corpus
(:mod:`headwise.demo.corpus`; relative dates resolved against 2026-01-15):

- ``amount``: ``{"amount": 3500.0, "currency": "CNY"}`` (CNY when the text names none)
- ``rate_change_bp``: signed basis points (``下调25个基点`` -> -25)
- ``rate_spread_bp``: basis points over the base rate (``55个基点`` -> 55)
- ``rate_percent``: percent (``3.85%`` -> 3.85)
- ``ordinal``: ``第三期`` -> 3; ``duration_months``: ``两年`` -> 24
- ``date``: ISO 8601 (``2026-03-15``) or a recurrence (``R/2026-02-10/P1M``); a range is
  ``{"start", "end"}``
- ``card_tail``: the last four digits of a card, as a string (``尾号1234`` -> ``"1234"``)

``nlupp``, the NLU++ banking annotations (resolved against 2022-03-15, the day they take as
today):

- ``amount_of_money``: ``{"amount": 73.0, "currency": "GBP"}`` (``"ambiguous"`` when unstated)
- ``number``: an int (a float when not whole)
- ``date``, ``date_from``: ``{"day", "month", "year"}`` (of a range: its first day);
  ``date_to``: the same (of a range: its last day)
- ``date_period``: ``{"type": "absolute", "from": {...}, "to": {...}}`` for a range,
  ``{"type": "periodic"}`` for a recurrence, ``{"type": "relative", "days": 14}`` for a span
- ``time``, ``time_from``, ``time_to``: ``{"hour", "minute"}``

Slot names only NLU++ uses (``amount_of_money``, ``date_period``, ``time`` ...) resolve to the
NLU++ schema without naming it; ``date`` is the demo corpus's unless ``schema="nlupp"``. A
team's own slots go in a schema of its own (:func:`~headwise.slots.schema.register_schema`).
"""

from __future__ import annotations

from datetime import date
from typing import Any

from headwise.slots.schema import SCHEMAS, SlotSchema

__all__ = ["normalize_slot"]


def normalize_slot(name: str, text: str, *, reference: date | None = None,
                   schema: str | SlotSchema | None = None) -> Any:
    """The normalised value of a slot, in the JSON form its corpus uses.

    ``normalize_slot(slot.name, slot.text) == slot.value`` for every slot of the demo corpus.

    Args:
        name: the slot name (``amount``, ``rate_change_bp``, ``date``, ``amount_of_money`` ...;
            see the module docstring).
        text: the slot's text.
        reference: the date relative dates resolve against; None for the schema's own
            (:data:`REFERENCE_DATES`: the demo corpus 2026-01-15, NLU++ 2022-03-15; a
            schema without one: today).
        schema: a schema's name in :data:`~headwise.slots.schema.SCHEMAS` (``"demo"``,
            ``"nlupp"`` or one registered) or a :class:`~headwise.slots.schema.SlotSchema`;
            None to look the name up in every registered schema, in order (the demo
            corpus's first, then NLU++'s).

    Returns:
        The value: a number, a string or a dict of them.

    Raises:
        ValueError: an unknown schema or slot name, or a text that does not parse.
    """
    if isinstance(schema, SlotSchema):
        schemas = [schema]
    elif schema is not None:
        if schema not in SCHEMAS:
            raise ValueError(f"unknown schema {schema!r}; known: {', '.join(SCHEMAS)}")
        schemas = [SCHEMAS[schema]]
    else:
        schemas = list(SCHEMAS.values())
    for chosen in schemas:
        if name in chosen:
            if not isinstance(text, str) or not text.strip():
                raise ValueError(f"slot {name!r} has an empty text")
            return chosen[name](text, reference or chosen.reference())
    known = sorted({n for chosen in schemas for n in chosen})
    raise ValueError(f"unknown slot {name!r}; known: {', '.join(known)}")
