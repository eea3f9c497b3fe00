"""One entry point for every kind of value, and the JSON form of the results.

::

    normalize_value("amount", "两万块")                      # Amount(20000.0, "CNY")
    normalize_value("rate", "LPR 下调 25 个基点")             # Rate(-0.25, -25.0, True, "LPR")
    normalize_value("date", "next Friday", reference=date(2026, 1, 15))   # "2026-01-23"
    to_json(normalize_value("amount", "$20"))               # {"amount": 20.0, "currency": "USD"}
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from datetime import date
from typing import Any

from headwise.slots.amount import Amount, parse_amount
from headwise.slots.dates import parse_date
from headwise.slots.duration import parse_duration_months
from headwise.slots.numbers import parse_number, plain
from headwise.slots.ordinal import parse_ordinal
from headwise.slots.periods import DateRange
from headwise.slots.rate import Rate, parse_rate
from headwise.slots.time_of_day import TimeOfDay, parse_time

#: kind -> what :func:`normalize_value` returns for it
KINDS: dict[str, str] = {
    "amount": "Amount(value, currency)",
    "rate": "Rate(percent, basis_points, change, base)",
    "ordinal": "int, counting from 1",
    "duration": "int, months",
    "number": "int, or float when not whole",
    "date": "ISO 8601 date str, DateRange, or recurrence str R/<date>/P1M",
    "time": "TimeOfDay(hour, minute)",
}


def normalize_value(kind: str, text: str, *, reference: date | None = None) -> Any:
    """The normalised value of a slot text of a given kind.

    Args:
        kind: one of :data:`KINDS` (``amount``, ``rate``, ``ordinal``, ``duration``,
            ``number``, ``date``, ``time``).
        text: the slot's text (``三千五百元``, ``next Friday``, ``第三期``).
        reference: the date relative dates are resolved against (``date`` only); None for
            today.

    Returns:
        For ``amount`` an :class:`Amount`, ``rate`` a :class:`Rate`, ``ordinal`` and
        ``duration`` (months) an int, ``number`` an int or float, ``date`` an ISO 8601 date
        string, a :class:`DateRange` or a recurrence string, ``time`` a :class:`TimeOfDay`.

    Raises:
        ValueError: an unknown kind, or a text that is not a value of that kind (the message
            names the text and what is wrong).
    """
    parsers: dict[str, Callable[[str], Any]] = {
        "amount": parse_amount,
        "rate": parse_rate,
        "ordinal": parse_ordinal,
        "duration": parse_duration_months,
        "number": lambda t: plain(parse_number(t)),
        "date": lambda t: parse_date(t, reference or date.today()),
        "time": parse_time,
    }
    if kind not in parsers:
        raise ValueError(f"unknown kind {kind!r}; known: {', '.join(KINDS)}")
    if not isinstance(text, str) or not text.strip():
        raise ValueError(f"no {kind} in the empty text {text!r}")
    return parsers[kind](text)


def to_json(value: Any) -> Any:
    """A JSON-able form of a value :func:`normalize_value` returns.

    ``Amount`` -> ``{"amount", "currency"}``, ``Rate`` -> ``{"percent", "basis_points",
    "change", "base"}``, ``DateRange`` -> ``{"start", "end"}``, ``TimeOfDay`` ->
    ``{"hour", "minute"}``, a ``datetime.date`` -> its ISO string; numbers, strings, None,
    lists and dicts pass through (their items converted).

    Args:
        value: the value.

    Returns:
        Plain dicts, lists, strings, numbers, booleans and None.

    Raises:
        TypeError: a value of no known type.
    """
    if isinstance(value, Amount):
        return {"amount": value.value, "currency": value.currency}
    if isinstance(value, (Rate, DateRange, TimeOfDay)):
        return dataclasses.asdict(value)
    if isinstance(value, date):
        return value.isoformat()
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    if isinstance(value, (list, tuple)):
        return [to_json(v) for v in value]
    if isinstance(value, dict):
        return {str(k): to_json(v) for k, v in value.items()}
    raise TypeError(f"no JSON form for {type(value).__name__} {value!r}")
