"""Chinese dates relative to a reference date: 3月15日, 下个月5号, 明天, 上周五, 每月10号 ...

Forms read (numbers in Arabic digits or Chinese numerals; conventions in
:mod:`headwise.slots.periods`):

- days: 今天 明天 后天 大后天 昨天 前天 大前天; N天后, N天前, N周后, N个月后, N年前 ...
- weekdays: 周五, 星期五, 礼拜五, 周日/星期天, with 上/上上/这/本/下/下下 (上周五, 下周一);
  weeks and weekends: 上周, 本周, 下周, 下个星期, 周末, 下周末 (ranges)
- months: 3月15日 (or 号), 三月十五号, 2026年3月5日, 明年3月1日, 3月 (a range), 下个月5号,
  上个月20号, 下个月 (a range), 月底, 下个月底
- years: 2026年, 今年, 明年, 去年 (ranges)
- a day alone: 15号, 十五日
- recurrences: 每月10号 (``R/2026-02-10/P1M``), 每周五 (``P1W``), 每天 (``P1D``)
"""

from __future__ import annotations

import re
from datetime import date, timedelta

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
    quarter_range,
    shift_month,
    week_range,
    weekday_in_week,
    weekend_range,
    weekly,
    year_range,
)

_DAYS = {"今天": 0, "今日": 0, "今儿": 0, "明天": 1, "明日": 1, "明儿": 1, "后天": 2,
         "大后天": 3, "昨天": -1, "昨日": -1, "昨儿": -1, "前天": -2, "大前天": -3}
_WEEKDAY = {"一": 0, "二": 1, "三": 2, "四": 3, "五": 4, "六": 5, "日": 6, "天": 6, "末": -1}
_WEEK_OFFSET = {"上上": -2, "上": -1, "这": 0, "本": 0, "今": 0, "下下": 2, "下": 1}
_MONTH_WORDS = {"上上个月": -2, "上个月": -1, "上月": -1, "这个月": 0, "本月": 0, "当月": 0,
                "这月": 0, "下个月": 1, "下月": 1, "下下个月": 2}
_YEAR_WORDS = {"前年": -2, "去年": -1, "今年": 0, "本年": 0, "明年": 1, "后年": 2}
_NUM = r"[0-9零〇一二两三四五六七八九十百千万]+"
_WEEK_WORD = r"(?:周|星期|礼拜)"
_RELATIVE = re.compile(rf"({_NUM}|半)(天|日|个?(?:星期|礼拜)|周|个月|年)(?:以|之)?(后|前)")
_WEEKDAY_RE = re.compile(rf"(上上|上|这|本|今|下下|下)?个?{_WEEK_WORD}([一二三四五六日天末])")
_WEEK_RE = re.compile(rf"(上上|上|这|本|下下|下)个?{_WEEK_WORD}")
_MONTH_DAY = re.compile(rf"(?:({_NUM})年|(前年|去年|今年|本年|明年|后年))?({_NUM})月"
                        rf"(?:({_NUM})[号日]?|(底|末))?")
_YEAR = re.compile(rf"({_NUM})年")
_MONTH_WORD_DAY = re.compile(r"(上上个月|上个月|上月|这个月|本月|当月|这月|下个月|下月|下下个月)?"
                             rf"(?:({_NUM})[号日]|(月?底|月?末))?")
_AHEAD = ("未来", "接下来", "今后")
_SPAN = re.compile(rf"(最近|近|过去|未来|接下来|今后)({_NUM})"
                   r"(天|日|个?(?:星期|礼拜)|周|个月|月|年)(?:内|里|中)?")
_QUARTER_OFFSET = {"上个": -1, "上": -1, "这个": 0, "本": 0, "下个": 1, "下": 1}
_QUARTER = re.compile(r"(上个|上|这个|本|下个|下)季度?")
_MONTHLY = re.compile(rf"每个?月({_NUM})[号日]")
_WEEKLY = re.compile(rf"每个?{_WEEK_WORD}([一二三四五六日天])")


def parse_chinese_date(s: str, reference: date, *, months_ahead: bool = False
                       ) -> str | DateRange:
    """Read a Chinese date.

    Args:
        s: the cleaned text (:func:`~headwise.slots.numbers.clean`), spaces removed.
        reference: the date that 今天 is.
        months_ahead: a month named without a year that comes before the reference's month
            is next year's (1月 in March is next January); False keeps the reference's year.

    Returns:
        An ISO 8601 date, a :class:`DateRange`, or a recurrence ``R/<date>/P1M`` (``P1W``,
        ``P1D``).

    Raises:
        ValueError: not a Chinese date, or no such day (2月30日).
    """
    s = s.removeprefix("在").removesuffix("这天").removesuffix("那天")
    if s in _DAYS:
        return (reference + timedelta(days=_DAYS[s])).isoformat()
    if s in ("每天", "每日"):
        return daily(reference)
    if m := _RELATIVE.fullmatch(s):
        return _relative(m, reference, s).isoformat()
    if m := _MONTHLY.fullmatch(s):
        return monthly(reference, _int(m.group(1), s), s)
    if m := _WEEKLY.fullmatch(s):
        return weekly(reference, _WEEKDAY[m.group(1)])
    if m := _WEEKDAY_RE.fullmatch(s):
        return _weekday(m.group(1), _WEEKDAY[m.group(2)], reference)
    if m := _WEEK_RE.fullmatch(s):
        return week_range(reference, _WEEK_OFFSET[m.group(1)])
    if m := _SPAN.fullmatch(s):
        return _span(m, reference, s)
    if m := _QUARTER.fullmatch(s):
        return quarter_range(reference, _QUARTER_OFFSET[m.group(1)])
    if m := _MONTH_DAY.fullmatch(s):
        return _month_day(m, reference, s, months_ahead)
    if m := _YEAR.fullmatch(s):
        return year_range(_int(m.group(1), s))
    if s in _YEAR_WORDS:
        return year_range(reference.year + _YEAR_WORDS[s])
    if s and (m := _MONTH_WORD_DAY.fullmatch(s)):
        return _month_word_day(m, reference, s)
    raise ValueError(f"{s!r} is not a date")


def _int(text: str, s: str) -> int:
    value = plain(parse_number(text))
    if not isinstance(value, int):
        raise ValueError(f"{text!r} in {s!r} is not a whole number")
    return value


def _relative(m: re.Match[str], reference: date, s: str) -> date:
    n = 0.5 if m.group(1) == "半" else _int(m.group(1), s)
    unit, sign = m.group(2), 1 if m.group(3) == "后" else -1
    if unit in ("天", "日") or "星期" in unit or "礼拜" in unit or unit == "周":
        days = n * (1 if unit in ("天", "日") else 7)
        if days != int(days):
            raise ValueError(f"{s!r} is not a whole number of days")
        return reference + timedelta(days=sign * int(days))
    months = n * (12 if unit == "年" else 1)
    if months != int(months):
        raise ValueError(f"{s!r} is not a whole number of months")
    return add_months(reference, sign * int(months), s, clamp=True)


def _span(m: re.Match[str], reference: date, s: str) -> DateRange:
    """最近3天 (3 days ago to today), 未来两周 (tomorrow to 14 days on)."""
    n = _int(m.group(2), s)
    unit = m.group(3)
    if unit in ("天", "日"):
        end = reference + timedelta(days=n if m.group(1) in _AHEAD else -n)
    elif unit in ("个月", "月", "年"):
        months = n * (12 if unit == "年" else 1)
        end = add_months(reference, months if m.group(1) in _AHEAD else -months, s, clamp=True)
    else:
        end = reference + timedelta(weeks=n if m.group(1) in _AHEAD else -n)
    if m.group(1) in _AHEAD:
        return DateRange.of(reference + timedelta(days=1), end)
    return DateRange.of(end, reference)


def _weekday(offset: str | None, weekday: int, reference: date) -> str | DateRange:
    weeks = _WEEK_OFFSET[offset] if offset else None
    if weekday == -1:  # 周末
        return weekend_range(reference, weeks or 0)
    if weeks is None:  # 周五 alone: the next one
        return next_weekday(reference, weekday).isoformat()
    return weekday_in_week(reference, weekday, weeks).isoformat()


def _month_day(m: re.Match[str], reference: date, s: str, months_ahead: bool
               ) -> str | DateRange:
    month = _int(m.group(3), s)
    if not 1 <= month <= 12:
        raise ValueError(f"{s!r}: there is no month {month}")
    if m.group(1):
        year = _int(m.group(1), s)
        if year < 100:
            raise ValueError(f"{s!r}: write the year in full")
    else:
        year = reference.year + _YEAR_WORDS.get(m.group(2) or "今年", 0)
        if months_ahead and m.group(2) is None and month < reference.month:
            year += 1
    if m.group(4):
        return make_date(year, month, _int(m.group(4), s), s).isoformat()
    if m.group(5):
        return month_end(year, month).isoformat()
    return month_range(year, month)


def _month_word_day(m: re.Match[str], reference: date, s: str) -> str | DateRange:
    word, day, end = m.group(1), m.group(2), m.group(3)
    if word is None:
        if day is not None:  # 15号: the next 15th
            return next_day_of_month(reference, _int(day, s), s).isoformat()
        return month_end(reference.year, reference.month).isoformat()  # 月底
    year, month = shift_month(reference, _MONTH_WORDS[word])
    if day is not None:
        return make_date(year, month, _int(day, s), s).isoformat()
    if end is not None:
        return month_end(year, month).isoformat()
    return month_range(year, month)
