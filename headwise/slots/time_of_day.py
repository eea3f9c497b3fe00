"""Times of day: ``9 05 in the morning``, ``25 to 7 p.m.``, ``half past 3``, 下午3点半 ...

``parse_time`` returns a 24-hour :class:`TimeOfDay`. Read: ``9:05``, ``9 05``, ``9``,
``10 o'clock``, ``9am``, ``2:35 p.m.``, ``noon``, ``midnight``, ``half past 3``, ``quarter past
3``, ``quarter to 4``, ``25 to 7``, ``5 past 12``, with a part of the day after them (``a.m.``,
``p.m.``, ``in the morning``, ``afternoon``, ``evening``, ``night``); and Chinese ``9点``,
``9点05``, ``9点05分``, ``九点半``, ``十点一刻``, ``三点三刻``, ``9:30``, with 上午, 早上, 凌晨,
中午, 下午, 傍晚, 晚上 before them.

Afternoon, evening and p.m. move hours 1-11 to 13-23 (``0 45 p.m.`` is 12:45, as NLU++ has
it); ``night`` moves 6-11 to 18-23 and keeps earlier hours (``3 night`` is 03:00; ``12 at
night`` is 00:00); a.m. and morning move 12 to 0.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from headwise.slots.numbers import clean, has_cjk, parse_number, plain, strip_cjk_spaces

_EN_PARTS = {"a.m.": "am", "am": "am", "a.m": "am", "in the morning": "am", "morning": "am",
             "p.m.": "pm", "pm": "pm", "p.m": "pm", "in the afternoon": "pm", "afternoon": "pm",
             "in the evening": "pm", "evening": "pm", "tonight": "night", "at night": "night",
             "night": "night"}
_ZH_PARTS = {"上午": "am", "早上": "am", "早晨": "am", "清晨": "am", "凌晨": "am", "中午": "noon",
             "下午": "pm", "午后": "pm", "傍晚": "pm", "晚上": "night", "夜里": "night",
             "半夜": "night", "今晚": "night"}
_EN_MINUTES = {"half": 30, "quarter": 15, "a quarter": 15}
_NUM = r"(\d{1,2}|[a-z]+(?:-[a-z]+)?|a quarter)"
_CLOCK = re.compile(r"(\d{1,2})(?:[:.](\d{2})| (\d{2}))?(?: ?o'?clock)?")
_PAST_TO = re.compile(rf"{_NUM} (?:minutes )?(past|after|to|before|till) (\d{{1,2}}|[a-z]+)")
_ZH_NUM = r"[0-9零〇一二两三四五六七八九十]+"
_ZH_FORM = re.compile(rf"({_ZH_NUM})(?:点|时|:)(?:(半)|(一刻)|(三刻)|整|({_ZH_NUM})分?)?")


@dataclass(frozen=True)
class TimeOfDay:
    """A time of day on the 24-hour clock."""

    hour: int
    minute: int


def parse_time(text: str) -> TimeOfDay:
    """Read a time of day.

    Args:
        text: the time alone (``9 05 in the morning``, ``25 to 7 p.m.``, ``下午3点半``).

    Returns:
        The :class:`TimeOfDay`.

    Raises:
        ValueError: not a time of day, or an hour or minute out of range (``25:00``).
    """
    s = clean(text)
    if has_cjk(s):
        hour, minute, part = _chinese(strip_cjk_spaces(s), text)
    else:
        hour, minute, part = _english(s, text)
    hour = _apply(hour, part)
    if not (0 <= hour <= 23 and 0 <= minute <= 59):
        raise ValueError(f"{text!r} is not a time of day (hour {hour}, minute {minute})")
    return TimeOfDay(hour, minute)


def _english(s: str, text: str) -> tuple[int, int, str | None]:
    part = None
    for word in sorted(_EN_PARTS, key=len, reverse=True):
        if s.endswith(word) and (len(s) == len(word) or not s[-len(word) - 1].isalpha()):
            if len(s) > len(word):
                s, part = s[: -len(word)].strip(), _EN_PARTS[word]
                break
    if s in ("noon", "midday"):
        return 12, 0, None
    if s == "midnight":
        return 0, 0, None
    m = _CLOCK.fullmatch(s)
    if m is not None:
        return int(m.group(1)), int(m.group(2) or m.group(3) or 0), part
    m = _PAST_TO.fullmatch(s)
    if m is not None:  # 25 past 7, 25 to 7, half past 3
        minutes = _EN_MINUTES.get(m.group(1))
        if minutes is None:
            minutes = _whole(m.group(1), text)
        hour = _whole(m.group(3), text)
        if m.group(2) in ("past", "after"):
            return hour, minutes, part
        return (hour - 1) % 24, 60 - minutes, part
    try:
        return _whole(s, text), 0, part  # "nine"
    except ValueError:
        raise ValueError(f"{text!r} is not a time of day") from None


def _chinese(s: str, text: str) -> tuple[int, int, str | None]:
    part = None
    for word in sorted(_ZH_PARTS, key=len, reverse=True):
        if s.startswith(word):
            s, part = s[len(word):], _ZH_PARTS[word]
            break
    m = re.fullmatch(r"(\d{1,2}):(\d{2})", s)
    if m is not None:
        return int(m.group(1)), int(m.group(2)), part
    m = _ZH_FORM.fullmatch(s)
    if m is None:
        raise ValueError(f"{text!r} is not a time of day")
    hour = _whole(m.group(1), text)
    minute = (30 if m.group(2) else 15 if m.group(3) else 45 if m.group(4)
              else _whole(m.group(5), text) if m.group(5) else 0)
    return hour, minute, part


def _whole(s: str, text: str) -> int:
    value = plain(parse_number(s))
    if not isinstance(value, int):
        raise ValueError(f"{s!r} in {text!r} is not a whole number")
    return value


def _apply(hour: int, part: str | None) -> int:
    """The 24-hour hour of ``hour`` said with a part of the day."""
    if part == "am":
        return 0 if hour == 12 else hour
    if part == "pm":
        return 12 if hour in (0, 12) else hour + 12 if hour < 12 else hour
    if part == "night":
        return 0 if hour == 12 else hour + 12 if 6 <= hour < 12 else hour
    if part == "noon":
        return hour + 12 if 1 <= hour < 6 else hour
    return hour
