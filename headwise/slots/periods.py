"""Calendar arithmetic behind the date parsers, and the conventions they follow.

Conventions (the same in Chinese and English unless said otherwise; the examples resolve
against Thursday 2026-01-15):

- Weeks run Monday to Sunday (ISO 8601, and 周一 is the first day of a Chinese week).
  ``this week`` / 本周 is the reference's week, ``next week`` / 下周 the one after
  (2026-01-19..2026-01-25), ``last week`` / 上周 the one before; each is a :class:`DateRange`.
- ``next Friday`` / 下周五 is the Friday of next week (2026-01-23, not tomorrow), as in the
  NLU++ annotations and as 下周五 always means. From a Sunday the next week starts the next day,
  so ``next Friday`` from Sunday 2026-01-18 is 2026-01-23, five days on.
- ``this Friday`` / 这周五 / 本周五 is the Friday of the reference's week (possibly past).
- ``Friday`` / 周五 alone is the next Friday strictly after the reference (2026-01-16; from a
  Friday, a week on): customer-service dates without a tense are mostly appointments.
- ``last Friday`` is the latest Friday strictly before the reference (2026-01-09; ``last
  Wednesday`` 2026-01-14, yesterday), as NLU++ annotates it; 上周五 is the Friday of the
  previous week, always (2026-01-09; 上周三 is 2026-01-07). The two differ for days of the
  week that have already come round this week.
- A day of the month alone (``the 5th``, 5号) is its next occurrence on or after the reference
  (the 20th -> 2026-01-20, the 5th -> 2026-02-05); a month and day without a year (``March
  3``, 3月15日) is in the reference's year, past or not.
- ``每月10号`` / ``the 10th of every month`` is the ISO 8601 recurrence
  ``R/<next occurrence on or after the reference>/P1M`` (``R/2026-02-10/P1M``); ``每周五`` /
  ``every Friday`` is ``R/<next Friday on or after>/P1W``.
- A month (``March``, 3月, 下个月) or a year (``2016``, 明年) alone is the range of its days.
- A named day the month lacks (下个月31号 in January, February 30) is an error, not a silent
  move to the 28th; a shift by months (3个月后, ``in 2 months``, ``a month ago``) from a day
  the target month lacks lands on that month's last day, as dateutil's relativedelta does.
- Quarters are calendar quarters (``this quarter`` / 本季度 is 2026-01-01..2026-03-31);
  ``the last 3 days`` / 最近3天 runs from 3 days before the reference to the reference, ``the
  next 2 weeks`` / 未来两周 from the day after it to 14 days after it.
"""

from __future__ import annotations

import calendar
from dataclasses import dataclass
from datetime import date, timedelta


@dataclass(frozen=True)
class DateRange:
    """The days from ``start`` to ``end``, both included, as ISO 8601 dates."""

    start: str
    end: str

    @classmethod
    def of(cls, start: date, end: date) -> DateRange:
        """A range from two dates.

        Raises:
            ValueError: ``end`` before ``start``.
        """
        if end < start:
            raise ValueError(f"a date range may not end ({end}) before it starts ({start})")
        return cls(start.isoformat(), end.isoformat())


def make_date(year: int, month: int, day: int, text: str) -> date:
    """``date(year, month, day)`` with an error message that names the text.

    Raises:
        ValueError: no such day (2月30日).
    """
    try:
        return date(year, month, day)
    except ValueError:
        raise ValueError(f"{text!r}: there is no day {year:04d}-{month:02d}-{day:02d}") from None


def add_months(d: date, months: int, text: str = "", *, clamp: bool = False) -> date:
    """The same day ``months`` calendar months on (negative: back).

    Args:
        d: the date.
        months: how many months on.
        text: the text being read, for the error message.
        clamp: move a day the target month lacks to its last day (``a month after January
            31`` is the end of February); False makes it an error.

    Raises:
        ValueError: the target month has no such day (and ``clamp`` is False).
    """
    year, month = shift_month(d, months)
    if clamp:
        return date(year, month, min(d.day, calendar.monthrange(year, month)[1]))
    return make_date(year, month, d.day, text or d.isoformat())


def month_range(year: int, month: int) -> DateRange:
    """Every day of a month."""
    last = calendar.monthrange(year, month)[1]
    return DateRange.of(date(year, month, 1), date(year, month, last))


def month_end(year: int, month: int) -> date:
    """The last day of a month."""
    return date(year, month, calendar.monthrange(year, month)[1])


def shift_month(d: date, months: int) -> tuple[int, int]:
    """``(year, month)`` of the month ``months`` after ``d``'s."""
    year, month = divmod(d.year * 12 + d.month - 1 + months, 12)
    return year, month + 1


def quarter_range(d: date, quarters: int = 0) -> DateRange:
    """Every day of ``d``'s calendar quarter, ``quarters`` quarters on."""
    year, month = shift_month(d, 3 * quarters)
    first = 3 * ((month - 1) // 3) + 1
    return DateRange.of(date(year, first, 1), month_end(year, first + 2))


def year_range(year: int) -> DateRange:
    """Every day of a year."""
    return DateRange.of(date(year, 1, 1), date(year, 12, 31))


def week_start(d: date, weeks: int = 0) -> date:
    """The Monday of ``d``'s week, ``weeks`` weeks on."""
    return d - timedelta(days=d.weekday()) + timedelta(weeks=weeks)


def week_range(d: date, weeks: int = 0) -> DateRange:
    """Monday to Sunday of ``d``'s week, ``weeks`` weeks on (1: next week, -1: last week)."""
    start = week_start(d, weeks)
    return DateRange.of(start, start + timedelta(days=6))


def weekend_range(d: date, weeks: int = 0) -> DateRange:
    """Saturday and Sunday of ``d``'s week, ``weeks`` weeks on."""
    start = week_start(d, weeks) + timedelta(days=5)
    return DateRange.of(start, start + timedelta(days=1))


def weekday_in_week(d: date, weekday: int, weeks: int = 0) -> date:
    """Day ``weekday`` (0 = Monday) of ``d``'s week, ``weeks`` weeks on."""
    return week_start(d, weeks) + timedelta(days=weekday)


def next_weekday(d: date, weekday: int, *, inclusive: bool = False) -> date:
    """The first day ``weekday`` (0 = Monday) after ``d`` (or on it, when ``inclusive``)."""
    ahead = (weekday - d.weekday()) % 7
    if ahead == 0 and not inclusive:
        ahead = 7
    return d + timedelta(days=ahead)


def previous_weekday(d: date, weekday: int) -> date:
    """The last day ``weekday`` (0 = Monday) strictly before ``d``."""
    back = (d.weekday() - weekday) % 7 or 7
    return d - timedelta(days=back)


def next_day_of_month(d: date, day: int, text: str = "") -> date:
    """The first date on or after ``d`` whose day of the month is ``day`` (skipping months
    without one: the 31st after 2026-01-31 is 2026-03-31).

    Raises:
        ValueError: ``day`` is not 1..31.
    """
    if not 1 <= day <= 31:
        raise ValueError(f"{text or day!r}: there is no day {day} in a month")
    for months in range(12):
        year, month = shift_month(d, months)
        if day <= calendar.monthrange(year, month)[1] and date(year, month, day) >= d:
            return date(year, month, day)
    raise AssertionError("unreachable: every day 1..31 occurs within a year")


def monthly(d: date, day: int, text: str = "") -> str:
    """The recurrence ``R/<next day-th on or after d>/P1M`` (``每月10号``)."""
    return f"R/{next_day_of_month(d, day, text).isoformat()}/P1M"


def weekly(d: date, weekday: int) -> str:
    """The recurrence ``R/<next weekday on or after d>/P1W`` (``每周五``)."""
    return f"R/{next_weekday(d, weekday, inclusive=True).isoformat()}/P1W"


def daily(d: date) -> str:
    """The recurrence ``R/<d>/P1D`` (``每天``)."""
    return f"R/{d.isoformat()}/P1D"
