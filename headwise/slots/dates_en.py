"""English dates relative to a reference date: tomorrow, next Friday, March 3, the 5th ...

Forms read (conventions in :mod:`headwise.slots.periods`):

- days: today, tonight, this morning, tomorrow, yesterday, last night, the day after tomorrow,
  the day before yesterday; in 3 days, 3 days ago, a week ago, in two months, 2 weeks from now
- weekdays: Friday, on Friday, this Friday, next Friday, last Friday, this coming Friday,
  Friday next week, next week Monday, Saturday last week, Wednesday in a week
- weeks, months and years as ranges: this week, next week, last week, the week after next,
  this weekend, next weekend, this month, next month, last month, previous month, this year,
  current year, last year, March, March 2026, November this year, October last year, 2016
- month and day: March 3, March 3rd, March the 3rd, 3 March, 3rd of March, the 3rd of March
  2026, Mar 3, 2026; the 5th, 25th this month, the 5th of next month; end of the month
- recurrences: the 10th of each month, 10th of every month, every month on the 10th,
  monthly on the 10th (``R/<date>/P1M``), every Friday (``P1W``), every day, daily (``P1D``)
"""

from __future__ import annotations

import re
from datetime import date, timedelta

from headwise.slots.english_numerals import ordinal_suffix
from headwise.slots.numbers import parse_number, plain
from headwise.slots.periods import (
    DateRange,
    add_months,
    daily,
    make_date,
    month_end,
    month_range,
    monthly,
    next_day_of_month,
    next_weekday,
    previous_weekday,
    quarter_range,
    shift_month,
    week_range,
    weekday_in_week,
    weekend_range,
    weekly,
    year_range,
)

WEEKDAYS = {"monday": 0, "mon": 0, "tuesday": 1, "tue": 1, "tues": 1, "wednesday": 2, "wed": 2,
            "thursday": 3, "thu": 3, "thur": 3, "thurs": 3, "friday": 4, "fri": 4,
            "saturday": 5, "sat": 5, "sunday": 6, "sun": 6}
MONTHS = {name: i for i, names in enumerate(
    (("january", "jan"), ("february", "feb"), ("march", "mar"), ("april", "apr"), ("may",),
     ("june", "jun"), ("july", "jul"), ("august", "aug"), ("september", "sep", "sept"),
     ("october", "oct"), ("november", "nov"), ("december", "dec")), start=1) for name in names}
_DAYS = {"today": 0, "tonight": 0, "this morning": 0, "this afternoon": 0, "this evening": 0,
         "tomorrow": 1, "tomorrow morning": 1, "tomorrow afternoon": 1, "tomorrow evening": 1,
         "tomorrow night": 1, "the day after tomorrow": 2, "day after tomorrow": 2,
         "yesterday": -1, "last night": -1, "yesterday morning": -1, "yesterday afternoon": -1,
         "yesterday evening": -1, "the day before yesterday": -2, "day before yesterday": -2}
_OFFSET = {"this": 0, "current": 0, "next": 1, "coming": 1, "following": 1, "last": -1,
           "previous": -1, "past": -1}
_WD = "(" + "|".join(sorted(WEEKDAYS, key=len, reverse=True)) + ")"
_MON = "(" + "|".join(sorted(MONTHS, key=len, reverse=True)) + ")"
_DAY = r"(\d{1,2})(st|nd|rd|th)?"
_YEAR = r"(?:,? (\d{4}))?"
_UNITS = {"day": 1, "days": 1, "week": 7, "weeks": 7, "fortnight": 14, "fortnights": 14,
          "month": 0, "months": 0, "year": 0, "years": 0}
_UNIT = "(" + "|".join(sorted(_UNITS, key=len, reverse=True)) + ")"
_PATTERNS = [(name, re.compile(pattern)) for name, pattern in (
    ("in", rf"in (.+?) {_UNIT}(?: time)?"),
    ("ago", rf"(.+?) {_UNIT} (?:ago|back|before)"),
    ("from_now", rf"(.+?) {_UNIT} from (?:now|today)"),
    ("weekday", rf"(?:(this|next|last|coming|this coming|past) )?{_WD}"),
    ("weekday_week", rf"{_WD},? (this|next|last) week"),
    ("week_weekday", rf"(this|next|last) week'?s? {_WD}"),
    ("weekday_in", rf"{_WD} (?:in a week|week|a week on|after next)"),
    ("week", r"(this|current|next|coming|following|last|previous|past) week"),
    ("span", rf"(?:the )?(last|past|previous|next|coming|following) (.+?) {_UNIT}"),
    ("quarter", r"(this|current|next|coming|following|last|previous|past) quarter"),
    ("week_after_next", r"the week after next|week after next"),
    ("weekend", r"(?:(this|next|last|coming) )?weekend"),
    ("month_word", r"(this|current|next|coming|following|last|previous|past) month"),
    ("year_word", r"(this|current|next|coming|following|last|previous|past) year"),
    ("month_day", rf"{_MON}\.? (?:the )?{_DAY}{_YEAR}"),
    ("day_month", rf"(?:the )?{_DAY} (?:of )?{_MON}\.?{_YEAR}"),
    ("month_year", rf"{_MON}\.?(?: (\d{{4}}|this year|next year|last year))?"),
    ("year", r"(\d{4})"),
    ("day_of", rf"(?:the )?{_DAY} (?:of )?(this|next|last) month"),
    ("day", r"the (\d{1,2})(st|nd|rd|th)?|(\d{1,2})(st|nd|rd|th)"),
    ("end_of_month", r"(?:the )?end of (?:the |(this|next|last) )?month"),
    ("monthly", rf"(?:on )?(?:the )?{_DAY} (?:of )?(?:each|every) month"
                rf"|(?:every|each) month on the {_DAY}|monthly on the {_DAY}"),
    ("weekly", rf"every {_WD}"),
    ("daily", r"every day|each day|daily"),
)]


def parse_english_date(s: str, reference: date, *, months_ahead: bool = False
                       ) -> str | DateRange:
    """Read an English date.

    Args:
        s: the cleaned, lower-case text (:func:`~headwise.slots.numbers.clean`).
        reference: the date that ``today`` is.
        months_ahead: a month named without a year that comes before the reference's month
            is next year's (``January`` in March 2022 is January 2023, as NLU++ annotates);
            False keeps the reference's year.

    Returns:
        An ISO 8601 date, a :class:`DateRange`, or a recurrence ``R/<date>/P1M`` (``P1W``,
        ``P1D``).

    Raises:
        ValueError: not an English date, or no such day (February 30).
    """
    s = s.strip(" .,")
    s = s.removeprefix("on ").removeprefix("by ")
    if s in _DAYS:
        return (reference + timedelta(days=_DAYS[s])).isoformat()
    if s.startswith("the week of "):  # the week of the 1st: Monday to Sunday around it
        day = parse_english_date(s[len("the week of "):], reference, months_ahead=months_ahead)
        if isinstance(day, DateRange) or day.startswith("R/"):
            raise ValueError(f"{s!r}: 'the week of' takes a single day")
        return week_range(date.fromisoformat(day))
    for name, pattern in _PATTERNS:
        m = pattern.fullmatch(s)
        if m is not None:
            if months_ahead and name in _YEARLESS and m.group(_YEARLESS[name][1]) is None:
                if MONTHS[m.group(_YEARLESS[name][0])] < reference.month:
                    return _RESOLVE[name](m, date(reference.year + 1, 1, 1), s)
            return _RESOLVE[name](m, reference, s)
    raise ValueError(f"{s!r} is not a date")


#: patterns whose year may be left out: name -> (group of the month, group of the year)
_YEARLESS = {"month_day": (1, 4), "day_month": (3, 4), "month_year": (1, 2)}


def _count(text: str, s: str) -> int:
    if text in ("a", "an", "one"):
        return 1
    try:
        value = plain(parse_number(text))
    except ValueError:
        raise ValueError(f"{text!r} in {s!r} is not a number") from None
    if not isinstance(value, int):
        raise ValueError(f"{text!r} in {s!r} is not a whole number")
    return value


def _shift(reference: date, n: int, unit: str, s: str) -> str:
    if _UNITS[unit]:
        return (reference + timedelta(days=n * _UNITS[unit])).isoformat()
    months = n * (12 if unit.startswith("year") else 1)
    return add_months(reference, months, s, clamp=True).isoformat()


def _day(m: re.Match[str], index: int, s: str) -> int:
    """The day of the month in groups ``index`` (digits) and ``index + 1`` (suffix)."""
    n = int(m.group(index))
    suffix = m.group(index + 1)
    if suffix is not None and suffix != ordinal_suffix(n):
        raise ValueError(f"{s!r}: {n}{suffix} should be written {n}{ordinal_suffix(n)}")
    return n


def _year(text: str | None, reference: date) -> int:
    if text is None or text == "this year":
        return reference.year
    if text == "next year":
        return reference.year + 1
    if text == "last year":
        return reference.year - 1
    return int(text)


def _weekday(m: re.Match[str], ref: date, s: str) -> str:
    which, weekday = m.group(1), WEEKDAYS[m.group(2)]
    if which in (None, "coming", "this coming"):
        return next_weekday(ref, weekday).isoformat()
    if which in ("last", "past"):
        return previous_weekday(ref, weekday).isoformat()
    return weekday_in_week(ref, weekday, _OFFSET[which]).isoformat()


def _monthly(m: re.Match[str], ref: date, s: str) -> str:
    index = next(i for i in (1, 3, 5) if m.group(i) is not None)
    return monthly(ref, _day(m, index, s), s)


def _day_of(m: re.Match[str], ref: date, s: str) -> str:
    year, month = shift_month(ref, _OFFSET[m.group(3)])
    return make_date(year, month, _day(m, 1, s), s).isoformat()


def _span(m: re.Match[str], ref: date, s: str) -> DateRange:
    """``the last 3 days`` (3 days ago to today), ``next 2 weeks`` (tomorrow to 14 days on)."""
    n = _count(m.group(2), s)
    if m.group(1) in ("last", "past", "previous"):
        return DateRange.of(date.fromisoformat(_shift(ref, -n, m.group(3), s)), ref)
    return DateRange.of(ref + timedelta(days=1), date.fromisoformat(_shift(ref, n, m.group(3), s)))


def _bare_day(m: re.Match[str], ref: date, s: str) -> str:
    index = 1 if m.group(1) is not None else 3
    return next_day_of_month(ref, _day(m, index, s), s).isoformat()


def _end_of_month(m: re.Match[str], ref: date, s: str) -> str:
    year, month = shift_month(ref, _OFFSET[m.group(1) or "this"])
    return month_end(year, month).isoformat()


def _month_year(m: re.Match[str], ref: date, s: str) -> DateRange:
    return month_range(_year(m.group(2), ref), MONTHS[m.group(1)])


_RESOLVE = {
    "in": lambda m, ref, s: _shift(ref, _count(m.group(1), s), m.group(2), s),
    "ago": lambda m, ref, s: _shift(ref, -_count(m.group(1), s), m.group(2), s),
    "from_now": lambda m, ref, s: _shift(ref, _count(m.group(1), s), m.group(2), s),
    "weekday": _weekday,
    "weekday_week": lambda m, ref, s: weekday_in_week(
        ref, WEEKDAYS[m.group(1)], _OFFSET[m.group(2)]).isoformat(),
    "week_weekday": lambda m, ref, s: weekday_in_week(
        ref, WEEKDAYS[m.group(2)], _OFFSET[m.group(1)]).isoformat(),
    "weekday_in": lambda m, ref, s: (next_weekday(ref, WEEKDAYS[m.group(1)])
                                     + timedelta(days=7)).isoformat(),
    "week": lambda m, ref, s: week_range(ref, _OFFSET[m.group(1)]),
    "week_after_next": lambda m, ref, s: week_range(ref, 2),
    "span": _span,
    "quarter": lambda m, ref, s: quarter_range(ref, _OFFSET[m.group(1)]),
    "weekend": lambda m, ref, s: weekend_range(ref, _OFFSET[m.group(1) or "this"]),
    "month_word": lambda m, ref, s: month_range(*shift_month(ref, _OFFSET[m.group(1)])),
    "year_word": lambda m, ref, s: year_range(ref.year + _OFFSET[m.group(1)]),
    "month_day": lambda m, ref, s: make_date(_year(m.group(4), ref), MONTHS[m.group(1)],
                                             _day(m, 2, s), s).isoformat(),
    "day_month": lambda m, ref, s: make_date(_year(m.group(4), ref), MONTHS[m.group(3)],
                                             _day(m, 1, s), s).isoformat(),
    "month_year": _month_year,
    "year": lambda m, ref, s: year_range(int(m.group(1))),
    "day_of": _day_of,
    "day": _bare_day,
    "end_of_month": _end_of_month,
    "monthly": _monthly,
    "weekly": lambda m, ref, s: weekly(ref, WEEKDAYS[m.group(1)]),
    "daily": lambda m, ref, s: daily(ref),
}
