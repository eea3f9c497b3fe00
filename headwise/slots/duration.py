"""Durations: loan terms in whole months (``12期``, ``两年``, ``a year and a half``), and spans
in days.

``parse_duration_months`` reads ``12期``, ``24个月``, ``两年`` (24), ``一年半`` (18), ``半年`` (6),
``三个季度`` (9), ``分12期`` (12), ``6 months``, ``two years``, ``a year and a half`` (18),
``one and a half years``, ``1.5 years``, ``half a year``, ``12 instalments``.
``parse_duration_days`` reads spans as NLU++ counts them: a year 365 days, a month 30, a week
7 (``two weeks`` -> 14, ``11 years`` -> 4015).
"""

from __future__ import annotations

import re
from decimal import Decimal

from headwise.slots.numbers import clean, has_cjk, parse_number, strip_cjk_spaces

#: unit -> months (the 期 of a loan is a monthly instalment)
_ZH_MONTH_UNITS = {"个月": 1, "月": 1, "期": 1, "年": 12, "个季度": 3, "季度": 3}
_EN_MONTH_UNITS = {"months": 1, "month": 1, "mos": 1, "mo": 1, "mths": 1, "mth": 1,
                   "instalments": 1, "installments": 1, "monthly payments": 1, "payments": 1,
                   "years": 12, "year": 12, "yrs": 12, "yr": 12, "quarters": 3, "quarter": 3}
_ZH_DAY_UNITS = {"天": 1, "日": 1, "个星期": 7, "星期": 7, "个礼拜": 7, "礼拜": 7, "周": 7,
                 "个月": 30, "月": 30, "年": 365}
_EN_DAY_UNITS = {"days": 1, "day": 1, "weeks": 7, "week": 7, "fortnights": 14, "fortnight": 14,
                 "months": 30, "month": 30, "years": 365, "year": 365}
_EN_LEADING = ("for", "over", "in", "a period of", "a term of", "term of", "within")


def parse_duration_months(text: str) -> int:
    """Read a duration in whole months.

    Args:
        text: the duration alone.

    Returns:
        The number of months.

    Raises:
        ValueError: not a duration, or not a whole number of months (``一个半月``, ``3 weeks``).
    """
    months = _measure(text, _ZH_MONTH_UNITS, _EN_MONTH_UNITS, zh_half=6)
    if months != months.to_integral_value() or months <= 0:
        raise ValueError(f"{text!r} is not a whole number of months")
    return int(months)


def parse_duration_days(text: str) -> int:
    """Read a span in days (a year is 365 days, a month 30, a week 7).

    Args:
        text: the span alone (``two weeks``, ``76 days``, ``a year``, ``三个月``).

    Returns:
        The number of days.

    Raises:
        ValueError: not a span of days, weeks, months or years.
    """
    days = _measure(text, _ZH_DAY_UNITS, _EN_DAY_UNITS, zh_half=None)
    if days != days.to_integral_value() or days <= 0:
        raise ValueError(f"{text!r} is not a whole number of days")
    return int(days)


def _measure(text: str, zh_units: dict[str, int], en_units: dict[str, int], *,
             zh_half: int | None) -> Decimal:
    s = clean(text)
    if has_cjk(s):
        return _chinese(strip_cjk_spaces(s), zh_units, zh_half, text)
    return _english(s, en_units, text)


def _chinese(s: str, units: dict[str, int], half_year: int | None, text: str) -> Decimal:
    for prefix in ("为期", "分", "共", "总共"):
        if s.startswith(prefix) and len(s) > len(prefix):
            s = s[len(prefix):]
            break
    if half_year is not None and s == "半年":
        return Decimal(half_year)
    m = re.fullmatch(r"(.+?)年半", s)
    if m is not None and "年" in units:
        return _number(m.group(1), text) * units["年"] + units["年"] // 2
    m = re.fullmatch(r"(.+?)个半月", s)
    if m is not None:
        return (_number(m.group(1), text) + Decimal("0.5")) * units["个月"]
    for unit in sorted(units, key=len, reverse=True):
        if s.endswith(unit) and len(s) > len(unit):
            return _number(s[: -len(unit)], text) * units[unit]
    raise ValueError(f"{text!r} is not a duration")


def _english(s: str, units: dict[str, int], text: str) -> Decimal:
    for prefix in _EN_LEADING:
        if s.startswith(prefix + " "):
            s = s[len(prefix) + 1:]
            break
    s = s.replace("-", " ")
    extra = Decimal(0)
    if s.endswith(" and a half"):  # a year and a half
        s, extra = s[: -len(" and a half")], Decimal("0.5")
    m = re.fullmatch(r"half an? (\w+)", s)  # half a year
    if m is not None and m.group(1) in units:
        return Decimal("0.5") * units[m.group(1)]
    for unit in sorted(units, key=len, reverse=True):
        if (s == unit and not unit.endswith("s")) or s in ("a " + unit, "an " + unit):
            return (1 + extra) * units[unit]
        if s.endswith(" " + unit) or (s.endswith(unit) and s[: -len(unit)][-1:].isdigit()):
            head = s[: -len(unit)].strip()
            return (_number(head, text) + extra) * units[unit]
    raise ValueError(f"{text!r} is not a duration")


def _number(s: str, text: str) -> Decimal:
    try:
        return parse_number(s)
    except ValueError:
        raise ValueError(f"{s!r} in {text!r} is not a number") from None
