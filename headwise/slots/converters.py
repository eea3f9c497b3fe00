"""The converters a slot schema names: each turns a slot's text into the JSON value a corpus
annotates, given the date that relative dates resolve against.

A converter is called as ``converter(text, reference, **options)``; its keyword-only
parameters are the options a schema may set (``{"converter": "amount",
"default_currency": "GBP"}``). :data:`CONVERTERS` lists them by the name schemas use:

- ``amount``: ``{"amount": 3500.0, "currency": "CNY"}``; option ``default_currency`` for a
  text that names none (``"CNY"``; NLU++ says ``"ambiguous"``)
- ``basis_points``: signed basis points, an int when whole (``下调25个基点`` -> -25)
- ``rate_percent``: percent (``3.85%`` -> 3.85)
- ``ordinal``: ``第三期`` -> 3
- ``duration_months`` / ``duration_days``: ``两年`` -> 24; ``two weeks`` -> 14
- ``iso_date``: ISO 8601 (``2026-03-15``), a recurrence (``R/2026-02-10/P1M``) or a range
  ``{"start", "end"}``
- ``calendar_date``: ``{"day", "month", "year"}``; option ``end`` takes a range's last day
  instead of its first; a vague text (``lately``) is ``"ambiguous"``
- ``date_period``: ``{"type": "absolute", "from", "to"}``, ``{"type": "periodic"}``,
  ``{"type": "relative", "days": 14}`` or ``{"type": "ambiguous"}``
- ``time_of_day``: ``{"hour", "minute"}``
- ``number``: an int (a float when not whole)
- ``card_tail``: the last four digits of a card, as a string (``尾号1234`` -> ``"1234"``)
"""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import date
from typing import Any

from headwise.slots.amount import parse_amount
from headwise.slots.dates import parse_date
from headwise.slots.duration import parse_duration_days, parse_duration_months
from headwise.slots.normalize import to_json
from headwise.slots.numbers import clean, has_cjk, parse_number, plain, strip_cjk_spaces
from headwise.slots.ordinal import parse_ordinal
from headwise.slots.periods import DateRange
from headwise.slots.rate import parse_rate
from headwise.slots.time_of_day import parse_time

__all__ = ["CONVERTERS", "Converter", "parse_card_tail"]

#: ``converter(text, reference, **options) -> JSON value``
Converter = Callable[..., Any]

_CARD_DIGITS = str.maketrans("零〇一二两三四五六七八九幺", "0012234567891")
_CARD_PREFIXES = ("卡号尾号", "尾号是", "尾号为", "尾号", "末四位是", "末四位", "后四位是",
                  "后四位", "ending in ", "ending with ", "ends in ", "ends with ",
                  "last four digits ", "last 4 digits ", "last four ", "last 4 ", "ending ")
_VAGUE = re.compile(r"\b(?:some|several|lately|recently|a while|for (?:days|weeks|months|years))\b")
_EVERY = {"monthly": "a month", "each month": "a month", "every month": "a month",
          "weekly": "a week", "each week": "a week", "every week": "a week",
          "daily": "a day", "each day": "a day", "every day": "a day",
          "yearly": "a year", "annually": "a year", "each year": "a year", "every year": "a year"}


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


def _amount(text: str, reference: date, *, default_currency: str = "CNY") -> dict[str, Any]:
    a = parse_amount(text)
    return {"amount": a.value, "currency": a.currency or default_currency}


def _basis_points(text: str, reference: date) -> int | float:
    bp = round(parse_rate(text).basis_points, 6)
    return int(bp) if bp.is_integer() else bp


def _ymd(iso: str) -> dict[str, int]:
    d = date.fromisoformat(iso)
    return {"day": d.day, "month": d.month, "year": d.year}


def _vague(text: str) -> bool:
    """Whether a date text is too vague to resolve (``some days ago``, ``lately``)."""
    return _VAGUE.search(clean(text)) is not None


def _calendar_date(text: str, reference: date, *, end: bool = False) -> Any:
    if _vague(text):
        return "ambiguous"
    value = parse_date(text, reference, months_ahead=True)
    if isinstance(value, DateRange):
        return _ymd(value.end if end else value.start)
    if value.startswith("R/"):
        raise ValueError(f"{text!r} is a recurrence, not a date")
    return _ymd(value)


def _date_period(text: str, reference: date) -> dict[str, Any]:
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


#: converter name (as schemas write it) -> the converter
CONVERTERS: dict[str, Converter] = {
    "amount": _amount,
    "basis_points": _basis_points,
    "rate_percent": lambda text, reference: parse_rate(text).percent,
    "ordinal": lambda text, reference: parse_ordinal(text),
    "duration_months": lambda text, reference: parse_duration_months(text),
    "duration_days": lambda text, reference: parse_duration_days(text),
    "iso_date": lambda text, reference: to_json(parse_date(text, reference)),
    "calendar_date": _calendar_date,
    "date_period": _date_period,
    "time_of_day": lambda text, reference: to_json(parse_time(text)),
    "number": lambda text, reference: plain(parse_number(text)),
    "card_tail": lambda text, reference: parse_card_tail(text),
}
