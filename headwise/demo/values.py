"""Slot values of the demo corpus: Chinese amounts, rates, ordinals and dates, both ways.

Every ``render_*`` function draws a value from a :class:`random.Random` and writes it the
way a customer might (``3500元``, ``3,500.00元``, ``三千五百元``, ``1.5万``, ``两万块``), returning
a :class:`Rendered`: the text, the normalised value and where the numerals sit inside the
text. Every ``parse_*`` function reads such a text back to its normalised value, by its
own route, so the two check each other. Normalised values, by slot name:

- ``amount``: ``{"amount": 3500.0, "currency": "CNY"}``
- ``rate_change_bp``: signed basis points (``下调25个基点`` -> -25)
- ``rate_spread_bp``: basis points over LPR (``55个基点`` -> 55)
- ``rate_percent``: percent (``3.85%`` -> 3.85)
- ``ordinal``: instalment number (``第三期`` -> 3)
- ``duration_months``: months (``12期``, ``24个月``, ``两年`` -> 12, 24, 24)
- ``date``: ISO 8601, relative dates resolved against :data:`REFERENCE_DATE` (2026-01-15);
  a monthly day (``每月10号``) is the recurrence ``R/2026-02-10/P1M`` from its next occurrence
- ``card_tail``: the last four digits of a card, as a string
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass
from datetime import date, timedelta
from typing import Any

from headwise.text.chinese_numerals import (
    DIGIT_VALUE,
    DIGITS,
    chinese_numeral,
    parse_chinese_numeral,
)

#: the "today" against which 明天, 下个月5号, 每月10号 ... are resolved
REFERENCE_DATE = date(2026, 1, 15)
CURRENCY = "CNY"

_ARABIC = re.compile(r"\d+(?:\.\d+)?")


@dataclass(frozen=True)
class Rendered:
    """A slot value written out.

    Attributes:
        text: the surface text.
        value: the normalised value (see the module docstring).
        numbers: ``(start, end)`` of each numeral inside ``text``.
    """

    text: str
    value: Any
    numbers: tuple[tuple[int, int], ...]


def _number(text: str) -> float:
    """Arabic (``3,500.00``) or Chinese integer numeral."""
    plain = text.replace(",", "")
    return float(plain) if _ARABIC.fullmatch(plain) else float(parse_chinese_numeral(text))


def _int_text(rng: random.Random, n: int, chinese_share: float = 0.35) -> str:
    return chinese_numeral(n, liang=rng.random() < 0.5) if rng.random() < chinese_share else str(n)


def _wrap(prefix: str, numeral: str, suffix: str, value: Any) -> Rendered:
    """``prefix + numeral + suffix`` with the numeral marked as the number."""
    start = len(prefix)
    return Rendered(prefix + numeral + suffix, value, ((start, start + len(numeral)),))


# -- amounts ---------------------------------------------------------------------------------
_AMOUNT_RANGES = {"amount": (500, 50000, 100), "small_amount": (20, 2000, 10),
                  "big_amount": (20000, 1000000, 10000)}


def render_amount(rng: random.Random, scale: str = "amount") -> Rendered:
    """An amount of yuan in one of several forms (``3500元``, ``3,500.00元``, ``三千五百块``,
    ``1.5万``, ``两万块``).

    Args:
        rng: the random source.
        scale: ``"amount"`` (500-50,000), ``"small_amount"`` (20-2,000) or ``"big_amount"``
            (20,000-1,000,000).
    """
    low, high, step = _AMOUNT_RANGES[scale]
    v = rng.randrange(low, high + 1, step)
    value = {"amount": float(v), "currency": CURRENCY}
    forms = ["digits", "digits", "chinese"] + (["separated"] if v >= 1000 else [])
    if v >= 10000 and v % 1000 == 0:
        forms += ["wan", "wan"] + (["chinese_wan"] if v % 10000 == 0 else [])
    form = rng.choice(forms)
    if form == "digits":
        return _wrap("", str(v), rng.choice(["元", "元", "块", "块钱"]), value)
    if form == "separated":
        return _wrap("", f"{v:,.2f}", "元", value)
    if form == "chinese":
        return _wrap("", chinese_numeral(v, liang=rng.random() < 0.5), rng.choice(["元", "块"]),
                     value)
    if form == "wan":
        return _wrap("", f"{v / 10000:g}万", rng.choice(["", "元", "块"]), value)
    return _wrap("", chinese_numeral(v // 10000, liang=True) + "万", rng.choice(["", "元", "块"]),
                 value)


def parse_amount(text: str) -> float:
    """Yuan in an amount text (``三千五百元`` -> 3500.0, ``1.5万`` -> 15000.0).

    Raises:
        ValueError: not an amount.
    """
    s = text
    for unit in ("块钱", "元", "块"):
        if s.endswith(unit):
            s = s[: -len(unit)]
            break
    scale = 1
    if s.endswith("万") and _ARABIC.fullmatch(s[:-1].replace(",", "")):
        s, scale = s[:-1], 10000
    return round(_number(s) * scale, 2)


# -- rates -----------------------------------------------------------------------------------
_DOWN = ("下调", "下调了", "降了", "下降了", "调降")
_UP = ("上调", "上调了", "涨了", "上升了", "调升")
_BP_UNITS = ("个基点", "个基点", "基点", "bp", "BP")
_RATE_CHANGE = re.compile(r"(下调了|下调|降了|下降了|调降|上调了|上调|涨了|上升了|调升)"
                          r"(.+?)(个基点|基点|bp|BP)")
_RATES = (3.05, 3.1, 3.2, 3.25, 3.3, 3.45, 3.5, 3.6, 3.7, 3.85, 3.95, 4.1, 4.2, 4.35, 4.5,
          4.65, 4.9)


def render_rate_change(rng: random.Random) -> Rendered:
    """A change of rate in basis points (``下调25个基点`` -> -25, ``上调10bp`` -> 10)."""
    bp = rng.choice((5, 10, 10, 15, 20, 25, 25, 30, 35, 50))
    sign = rng.choice((-1, -1, 1))
    verb = rng.choice(_DOWN if sign < 0 else _UP)
    return _wrap(verb, _int_text(rng, bp), rng.choice(_BP_UNITS), sign * bp)


def parse_rate_change(text: str) -> int:
    """Signed basis points of a rate change text.

    Raises:
        ValueError: not a rate change.
    """
    m = _RATE_CHANGE.fullmatch(text)
    if m is None:
        raise ValueError(f"{text!r} is not a rate change")
    sign = 1 if m.group(1) in _UP else -1
    return sign * int(_number(m.group(2)))


def render_rate_spread(rng: random.Random) -> Rendered:
    """Basis points over LPR (``55个基点``)."""
    bp = rng.randrange(20, 125, 5)
    return _wrap("", _int_text(rng, bp, 0.2), rng.choice(_BP_UNITS), bp)


def parse_rate_spread(text: str) -> int:
    """Basis points of a spread text (``55个基点`` -> 55)."""
    for unit in _BP_UNITS:
        if text.endswith(unit):
            return int(_number(text[: -len(unit)]))
    raise ValueError(f"{text!r} is not a number of basis points")


def render_rate(rng: random.Random) -> Rendered:
    """An interest rate in percent (``3.85%``, ``百分之三点八五``)."""
    r = rng.choice(_RATES)
    if rng.random() < 0.8:
        return _wrap("", str(r), "%", r)
    whole, frac = str(r).split(".")
    text = "百分之" + chinese_numeral(int(whole)) + "点" + "".join(DIGITS[int(d)] for d in frac)
    return Rendered(text, r, ((0, len(text)),))


def parse_rate(text: str) -> float:
    """Percent of a rate text (``3.85%`` -> 3.85, ``百分之四点二`` -> 4.2).

    Raises:
        ValueError: not a rate.
    """
    if text.endswith("%") and _ARABIC.fullmatch(text[:-1]):
        return float(text[:-1])
    if text.startswith("百分之") and "点" in text:
        whole, frac = text[3:].split("点")
        digits = "".join(str(DIGIT_VALUE[c]) for c in frac)
        return float(f"{parse_chinese_numeral(whole)}.{digits}")
    raise ValueError(f"{text!r} is not a rate")


# -- instalments -----------------------------------------------------------------------------
def render_ordinal(rng: random.Random) -> Rendered:
    """An ordinal instalment (``第三期``, ``第12期``)."""
    n = rng.randint(1, 24)
    return _wrap("第", _int_text(rng, n, 0.6), "期", n)


def parse_ordinal(text: str) -> int:
    """Number of an ordinal instalment text (``第三期`` -> 3)."""
    if not (text.startswith("第") and text.endswith("期")):
        raise ValueError(f"{text!r} is not an ordinal instalment")
    return int(_number(text[1:-1]))


_YEARS = {12: "一年", 24: "两年", 36: "三年"}


def render_duration(rng: random.Random) -> Rendered:
    """A number of months (``12期``, ``二十四期``, ``24个月``, ``两年``)."""
    n = rng.choice((3, 6, 6, 9, 12, 12, 18, 24, 24, 36))
    form = rng.choice(("期", "期", "个月") + (("年",) if n in _YEARS else ()))
    if form == "年":
        return _wrap("", _YEARS[n][0], "年", n)
    return _wrap("", _int_text(rng, n, 0.4), form, n)


def parse_duration(text: str) -> int:
    """Months of a duration text (``12期`` -> 12, ``两年`` -> 24)."""
    for unit, months in (("个月", 1), ("期", 1), ("年", 12)):
        if text.endswith(unit):
            return int(_number(text[: -len(unit)])) * months
    raise ValueError(f"{text!r} is not a duration")


# -- dates -----------------------------------------------------------------------------------
_RELATIVE_DAYS = {"今天": 0, "明天": 1, "后天": 2, "昨天": -1, "前天": -2}
_MONTH_WORDS = {"上个月": -1, "上月": -1, "这个月": 0, "本月": 0, "下个月": 1, "下月": 1}
_DAY_SUFFIX = ("号", "号", "日")


def _add_months(d: date, months: int) -> date:
    year, month = divmod(d.year * 12 + d.month - 1 + months, 12)
    return date(year, month + 1, d.day)


def render_date(rng: random.Random, tense: str = "any") -> Rendered:
    """A date (``3月15日``, ``下个月5号``, ``昨天``), resolved against :data:`REFERENCE_DATE`.

    Args:
        rng: the random source.
        tense: ``"past"`` (on or before the reference date), ``"future"`` (after it) or
            ``"any"``.
    """
    ref = REFERENCE_DATE
    kind = rng.choice(("absolute", "absolute", "month_word", "relative"))
    if kind == "relative":
        words = [w for w, k in _RELATIVE_DAYS.items()
                 if tense == "any" or (k <= 0) == (tense == "past")]
        word = rng.choice(words)
        return Rendered(word, (ref + timedelta(days=_RELATIVE_DAYS[word])).isoformat(), ())
    if kind == "month_word":
        offsets = {"past": (-1, 0), "future": (0, 1), "any": (-1, 0, 1)}[tense]
        offset = rng.choice(offsets)
        day = (rng.randint(1, ref.day) if tense == "past" and offset == 0
               else rng.randint(ref.day + 1, 28) if tense == "future" and offset == 0
               else rng.randint(1, 28))
        word = rng.choice([w for w, k in _MONTH_WORDS.items() if k == offset])
        value = _add_months(ref.replace(day=day), offset)
        return _wrap(word, str(day), rng.choice(_DAY_SUFFIX), value.isoformat())
    if tense == "past":
        value = date(ref.year, 1, rng.randint(1, ref.day))
    else:
        first = ref + timedelta(days=1) if tense == "future" else date(ref.year, 1, 1)
        value = first + timedelta(days=rng.randrange((date(ref.year, 12, 28) - first).days))
    month, day = str(value.month), str(value.day)
    suffix = rng.choice(_DAY_SUFFIX)
    text = f"{month}月{day}{suffix}"
    start = len(month) + 1
    return Rendered(text, value.isoformat(), ((0, len(month)), (start, start + len(day))))


def render_monthly_day(rng: random.Random) -> Rendered:
    """A day of every month (``每月10号``) as an ISO 8601 recurrence from its next occurrence."""
    day = rng.randint(1, 28)
    return _wrap(rng.choice(("每月", "每个月")), str(day), rng.choice(_DAY_SUFFIX),
                 _monthly(day))


def _monthly(day: int) -> str:
    first = REFERENCE_DATE.replace(day=day)
    if day < REFERENCE_DATE.day:
        first = _add_months(first, 1)
    return f"R/{first.isoformat()}/P1M"


_DATE = re.compile(r"(?:(\d{1,2})月|(上个月|上月|这个月|本月|下个月|下月|每个月|每月))"
                   r"(\d{1,2})[号日]")


def parse_date(text: str, reference: date = REFERENCE_DATE) -> str:
    """ISO 8601 form of a date text, relative dates resolved against ``reference``.

    ``3月15日`` -> ``2026-03-15`` (the reference year), ``下个月5号`` -> ``2026-02-05``,
    ``明天`` -> ``2026-01-16``, ``每月10号`` -> ``R/2026-02-10/P1M``.

    Raises:
        ValueError: not a date.
    """
    if text in _RELATIVE_DAYS:
        return (reference + timedelta(days=_RELATIVE_DAYS[text])).isoformat()
    m = _DATE.fullmatch(text)
    if m is None:
        raise ValueError(f"{text!r} is not a date")
    day = int(m.group(3))
    if m.group(1):
        return date(reference.year, int(m.group(1)), day).isoformat()
    if m.group(2) in ("每月", "每个月"):
        first = reference.replace(day=day)
        return f"R/{(first if day >= reference.day else _add_months(first, 1)).isoformat()}/P1M"
    return _add_months(reference.replace(day=day), _MONTH_WORDS[m.group(2)]).isoformat()


# -- cards -----------------------------------------------------------------------------------
def render_card_tail(rng: random.Random) -> Rendered:
    """The last four digits of a card number."""
    text = f"{rng.randrange(10000):04d}"
    return Rendered(text, text, ((0, 4),))


def parse_card_tail(text: str) -> str:
    """The four digits (checked)."""
    if not re.fullmatch(r"\d{4}", text):
        raise ValueError(f"{text!r} is not four digits")
    return text


#: template placeholder -> (slot name, renderer)
PLACEHOLDERS: dict[str, tuple[str, Any]] = {
    "amount": ("amount", lambda rng: render_amount(rng, "amount")),
    "small_amount": ("amount", lambda rng: render_amount(rng, "small_amount")),
    "big_amount": ("amount", lambda rng: render_amount(rng, "big_amount")),
    "bp_change": ("rate_change_bp", render_rate_change),
    "bp_spread": ("rate_spread_bp", render_rate_spread),
    "rate": ("rate_percent", render_rate),
    "ordinal": ("ordinal", render_ordinal),
    "duration": ("duration_months", render_duration),
    "date": ("date", lambda rng: render_date(rng, "any")),
    "past_date": ("date", lambda rng: render_date(rng, "past")),
    "future_date": ("date", lambda rng: render_date(rng, "future")),
    "monthly": ("date", render_monthly_day),
    "card": ("card_tail", render_card_tail),
}


def parse_slot(name: str, text: str) -> Any:
    """The normalised value of a slot text, by slot name (the inverse of the renderers).

    Raises:
        ValueError: an unknown slot name or a text that does not parse.
    """
    if name == "amount":
        return {"amount": parse_amount(text), "currency": CURRENCY}
    parsers = {"rate_change_bp": parse_rate_change, "rate_spread_bp": parse_rate_spread,
               "rate_percent": parse_rate, "ordinal": parse_ordinal,
               "duration_months": parse_duration, "date": parse_date,
               "card_tail": parse_card_tail}
    if name not in parsers:
        raise ValueError(f"unknown slot {name!r}")
    return parsers[name](text)
