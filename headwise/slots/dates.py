"""Dates and date ranges in Chinese or English, resolved against a reference date.

``parse_date("下个月5号", reference=date(2026, 1, 15))`` is ``"2026-02-05"``;
``parse_date("next week", ...)`` the :class:`~headwise.slots.periods.DateRange`
2026-01-19..2026-01-25; ``parse_date("每月10号", ...)`` the recurrence ``"R/2026-02-10/P1M"``.
Numeric dates (``2026-03-05``, ``2026/3/5``, ``2026.03.05``) are read in either language.
Day and month in either order (``3/15``, ``15/3/2026``) are read when only one order names a
day (a number above 12 is the day); ``05/03/2026`` and ``3/5``, which both orders read, are
refused as ambiguous.

Ranges: ``between March 3 and 5``, ``from March 3 to March 5``, ``March 3-5``,
``3月1日到3月5日``, ``from 3月1日到3月5日``, ``3月1日至5日``, ``从下周一到下周三``. An end that is
a day alone (``5``, ``5th``, ``5日``) takes the start's month; an end that is itself a range
(``from March to May``) contributes its last day. The week conventions are those of
:mod:`headwise.slots.periods`.
"""

from __future__ import annotations

import re
from datetime import date

from headwise.slots.dates_en import parse_english_date
from headwise.slots.dates_zh import parse_chinese_date
from headwise.slots.english_numerals import ordinal_suffix
from headwise.slots.numbers import clean, has_cjk, parse_number, plain, strip_cjk_spaces
from headwise.slots.periods import DateRange, make_date

_ISO = re.compile(r"(\d{4})[-/.](\d{1,2})[-/.](\d{1,2})")
_AMBIGUOUS = re.compile(r"\d{1,2}[-/.]\d{1,2}[-/.]\d{2,4}")
#: 3/15, 15/3, 15/03/2026: month and day in an order that only a day above 12 settles
_DAY_MONTH = re.compile(r"(\d{1,2})/(\d{1,2})(?:/(\d{4}))?")
#: (separator, whether it may only be used after "between")
_SEPARATORS = ((" and ", True), (" to ", False), (" until ", False), (" till ", False),
               (" through ", False), (" thru ", False), ("到", False), ("至", False),
               ("~", False), (" - ", False), ("–", False), ("—", False), ("-", False))
_RANGE_PREFIXES = ("between ", "from ", "从", "自")
_BARE_DAY = re.compile(r"(?:the )?(\d{1,2}|[零〇一二两三四五六七八九十]+)(st|nd|rd|th|日|号)?")


def parse_date(text: str, reference: date, *, months_ahead: bool = False
               ) -> str | DateRange:
    """Read a date, a date range or a monthly, weekly or daily recurrence.

    Args:
        text: the date alone (``3月15日``, ``next Friday``, ``between March 3 and 5``).
        reference: the date that 今天 / ``today`` is.
        months_ahead: a month named without a year that comes before the reference's month
            is next year's (NLU++'s rule); False (the default, and the demo corpus's rule)
            keeps the reference's year.

    Returns:
        An ISO 8601 date (``2026-03-15``), a :class:`DateRange`, or an ISO 8601 recurrence
        (``R/2026-02-10/P1M``).

    Raises:
        ValueError: not a date, no such day (``2月30日``), an ambiguous numeric date
            (``05/03/2026``) or a range that ends before it starts.
    """
    s = clean(text)
    if not s:
        raise ValueError("empty text is not a date")
    single_error: ValueError | None = None
    prefix = next((p for p in _RANGE_PREFIXES if s.startswith(p)), None)
    if prefix is None:
        try:
            return _single(s, reference, months_ahead)
        except ValueError as e:
            single_error = e
    body = s[len(prefix):] if prefix else s
    for sep, needs_between in _SEPARATORS:
        if sep not in body or (needs_between and prefix != "between "):
            continue
        start_text, _, end_text = body.partition(sep)
        try:
            return _range(start_text.strip(), end_text.strip(), reference, months_ahead)
        except ValueError as e:
            single_error = single_error or e
            if sep != "-":
                raise
    if prefix is not None and single_error is None:
        raise ValueError(f"{text!r} starts a range ({prefix.strip()}) without its end")
    raise single_error or ValueError(f"{text!r} is not a date")


def _single(s: str, reference: date, months_ahead: bool) -> str | DateRange:
    m = _ISO.fullmatch(s)
    if m is not None:
        return make_date(int(m.group(1)), int(m.group(2)), int(m.group(3)), s).isoformat()
    m = _DAY_MONTH.fullmatch(s)
    if m is not None:
        return _day_month(m, reference, months_ahead, s)
    if _AMBIGUOUS.fullmatch(s):
        raise ValueError(f"{s!r} is ambiguous (day or month first?); write 2026-03-05")
    if has_cjk(s):
        return parse_chinese_date(strip_cjk_spaces(s), reference, months_ahead=months_ahead)
    return parse_english_date(s, reference, months_ahead=months_ahead)


def _day_month(m: re.Match[str], reference: date, months_ahead: bool, s: str) -> str:
    """``3/15`` or ``15/3`` (the year written, else the reference's, or with
    ``months_ahead`` the next for an earlier month): the order in which only one number can
    be a month."""
    a, b = int(m.group(1)), int(m.group(2))
    year = int(m.group(3)) if m.group(3) else reference.year
    readings = {(month, day) for month, day in ((a, b), (b, a)) if 1 <= month <= 12}
    if len(readings) != 1:
        if len(readings) > 1:
            raise ValueError(f"{s!r} is ambiguous (day or month first?); write 2026-03-05")
        raise ValueError(f"{s!r} is not a date: neither number is a month")
    (month, day), = readings
    if m.group(3) is None and months_ahead and month < reference.month:
        year += 1
    return make_date(year, month, day, s).isoformat()


def _range(start_text: str, end_text: str, reference: date, months_ahead: bool
           ) -> DateRange:
    start_day = _bare_day(start_text)
    end_day = _bare_day(end_text)
    if start_day is not None and end_day is None:  # the 3rd to the 5th of March
        last = _last(_single(end_text, reference, months_ahead))
        return DateRange.of(make_date(last.year, last.month, start_day, start_text), last)
    first = _first(_single(start_text, reference, months_ahead))
    if end_day is not None:  # March 3 to 5: the end's month is the start's
        return DateRange.of(first, make_date(first.year, first.month, end_day, end_text))
    return DateRange.of(first, _last(_single(end_text, reference, months_ahead)))


def _bare_day(text: str) -> int | None:
    """The day of ``5``, ``5th``, ``the 5th``, ``5日``, ``五号``; None for any other text."""
    m = _BARE_DAY.fullmatch(strip_cjk_spaces(text) if has_cjk(text) else text)
    if m is None:
        return None
    day = plain(parse_number(m.group(1)))
    suffix = m.group(2)
    if not isinstance(day, int):
        return None
    if suffix in ("st", "nd", "rd", "th") and suffix != ordinal_suffix(day):
        raise ValueError(f"{text!r} should be written {day}{ordinal_suffix(day)}")
    return day


def _first(value: str | DateRange) -> date:
    return date.fromisoformat(value.start if isinstance(value, DateRange) else _day(value))


def _last(value: str | DateRange) -> date:
    return date.fromisoformat(value.end if isinstance(value, DateRange) else _day(value))


def _day(value: str) -> str:
    if value.startswith("R/"):
        raise ValueError(f"a recurrence ({value}) cannot bound a date range")
    return value
