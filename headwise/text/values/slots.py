"""Slot values by slot name, in the JSON form each corpus annotates them.

Two schemas. ``demo``, the built-in demo corpus (:mod:`headwise.text.demo_corpus`; relative
dates resolved against 2026-01-15):

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
NLU++ schema without naming it; ``date`` is the demo corpus's unless ``schema="nlupp"``.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import date
from typing import Any

from headwise.text.values.amount import parse_amount
from headwise.text.values.dates import parse_date
from headwise.text.values.duration import parse_duration_days, parse_duration_months
from headwise.text.values.normalize import to_json
from headwise.text.values.numbers import clean, has_cjk, parse_number, plain, strip_cjk_spaces
from headwise.text.values.ordinal import parse_ordinal
from headwise.text.values.periods import DateRange
from headwise.text.values.rate import parse_rate
from headwise.text.values.time_of_day import parse_time

#: the "today" of each schema
REFERENCE_DATES = {"demo": date(2026, 1, 15), "nlupp": date(2022, 3, 15)}

_CARD_DIGITS = str.maketrans("零〇一二两三四五六七八九幺", "0012234567891")
_CARD_PREFIXES = ("卡号尾号", "尾号是", "尾号为", "尾号", "末四位是", "末四位", "后四位是",
                  "后四位", "ending in ", "ending with ", "ends in ", "ends with ",
                  "last four digits ", "last 4 digits ", "last four ", "last 4 ", "ending ")
_VAGUE = re.compile(r"\b(?:some|several|lately|recently|a while|for (?:days|weeks|months|years))\b")
_EVERY = {"monthly": "a month", "each month": "a month", "every month": "a month",
          "weekly": "a week", "each week": "a week", "every week": "a week",
          "daily": "a day", "each day": "a day", "every day": "a day",
          "yearly": "a year", "annually": "a year", "each year": "a year", "every year": "a year"}


def _basis_points(text: str) -> int | float:
    """Signed basis points of a rate text: an int when whole (``下调25个基点`` -> -25)."""
    bp = round(parse_rate(text).basis_points, 6)
    return int(bp) if bp.is_integer() else bp


def parse_card_tail(text: str) -> str:
    """The last four digits of a card (``1234``, ``尾号1234``, ``ending in 1234``, ``一二三四``).

    Raises:
        ValueError: not four digits.
    """
    s = clean(text)
    if has_cjk(s):
        s = strip_cjk_spaces(s)
    for prefix in _CARD_PREFIXES:
        if s.startswith(prefix):
            s = s[len(prefix):].strip()
            break
    s = s.translate(_CARD_DIGITS).removesuffix("号")
    if not re.fullmatch(r"\d{4}", s):
        raise ValueError(f"{text!r} is not the last four digits of a card")
    return s


def _demo_date(text: str, reference: date) -> Any:
    return to_json(parse_date(text, reference))


def _ymd(iso: str) -> dict[str, int]:
    d = date.fromisoformat(iso)
    return {"day": d.day, "month": d.month, "year": d.year}


def _vague(text: str) -> bool:
    """Whether a date text is one NLU++ marks ``ambiguous`` (``some days ago``, ``lately``)."""
    return _VAGUE.search(clean(text)) is not None


def _nlupp_date(end: bool) -> Callable[[str, date], Any]:
    def parse(text: str, reference: date) -> Any:
        if _vague(text):
            return "ambiguous"
        value = parse_date(text, reference, months_ahead=True)
        if isinstance(value, DateRange):
            return _ymd(value.end if end else value.start)
        if value.startswith("R/"):
            raise ValueError(f"{text!r} is a recurrence, not a date")
        return _ymd(value)
    return parse


def _nlupp_period(text: str, reference: date) -> dict[str, Any]:
    s = clean(text)
    if _vague(text):
        return {"type": "ambiguous"}
    if s in _EVERY:
        return {"type": "relative", "days": parse_duration_days(_EVERY[s])}
    try:
        value = parse_date(text, reference, months_ahead=True)
    except ValueError:
        try:
            return {"type": "relative", "days": parse_duration_days(text)}
        except ValueError:
            raise ValueError(f"{text!r} is neither a period of dates nor a span") from None
    if isinstance(value, DateRange):
        return {"type": "absolute", "from": _ymd(value.start), "to": _ymd(value.end)}
    if value.startswith("R/"):
        return {"type": "periodic"}
    return {"type": "absolute", "from": _ymd(value), "to": _ymd(value)}


def _time(text: str, reference: date) -> dict[str, int]:
    return to_json(parse_time(text))


_Parser = Callable[[str, date], Any]
SCHEMAS: dict[str, dict[str, _Parser]] = {
    "demo": {
        "amount": lambda t, r: {"amount": (a := parse_amount(t)).value,
                                "currency": a.currency or "CNY"},
        "rate_change_bp": lambda t, r: _basis_points(t),
        "rate_spread_bp": lambda t, r: _basis_points(t),
        "rate_percent": lambda t, r: parse_rate(t).percent,
        "ordinal": lambda t, r: parse_ordinal(t),
        "duration_months": lambda t, r: parse_duration_months(t),
        "date": _demo_date,
        "card_tail": lambda t, r: parse_card_tail(t),
    },
    "nlupp": {
        "amount_of_money": lambda t, r: {"amount": (a := parse_amount(t)).value,
                                         "currency": a.currency or "ambiguous"},
        "number": lambda t, r: plain(parse_number(t)),
        "date": _nlupp_date(end=False),
        "date_from": _nlupp_date(end=False),
        "date_to": _nlupp_date(end=True),
        "date_period": _nlupp_period,
        "time": _time,
        "time_from": _time,
        "time_to": _time,
    },
}


def normalize_slot(name: str, text: str, *, reference: date | None = None,
                   schema: str | None = None) -> Any:
    """The normalised value of a slot, in the JSON form its corpus uses.

    ``normalize_slot(slot.name, slot.text) == slot.value`` for every slot of the demo corpus.

    Args:
        name: the slot name (``amount``, ``rate_change_bp``, ``date``, ``amount_of_money`` ...;
            see the module docstring).
        text: the slot's text.
        reference: the date relative dates resolve against; None for the schema's own
            (:data:`REFERENCE_DATES`: the demo corpus 2026-01-15, NLU++ 2022-03-15).
        schema: ``"demo"`` or ``"nlupp"``; None to look the name up in the demo schema first,
            then in NLU++'s.

    Returns:
        The value: a number, a string or a dict of them.

    Raises:
        ValueError: an unknown schema or slot name, or a text that does not parse.
    """
    if schema is not None and schema not in SCHEMAS:
        raise ValueError(f"unknown schema {schema!r}; known: {', '.join(SCHEMAS)}")
    names = [schema] if schema is not None else list(SCHEMAS)
    for key in names:
        if name in SCHEMAS[key]:
            if not isinstance(text, str) or not text.strip():
                raise ValueError(f"slot {name!r} has an empty text")
            return SCHEMAS[key][name](text, reference or REFERENCE_DATES[key])
    known = sorted({n for key in names for n in SCHEMAS[key]})
    raise ValueError(f"unknown slot {name!r}; known: {', '.join(known)}")
