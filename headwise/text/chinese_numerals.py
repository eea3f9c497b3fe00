"""Chinese numerals: writing integers the way people say them, and reading them back.

``chinese_numeral(3500)`` is ``三千五百``, ``chinese_numeral(20000, liang=True)`` is ``两万``;
``parse_chinese_numeral`` reads both, and the everyday forms ``十二`` (12), ``一千零五`` (1005),
the spoken elision ``两千五`` (2500) and ``三万五`` (35,000), and digit strings ``二〇二六`` (2026).
:func:`parse_numeral` reads the mixed forms people type as well: ``1.5万`` (15,000), ``3万5``
(35,000), ``3,500.00``, ``三点八五`` (3.85), exactly, as a :class:`~decimal.Decimal`.
``chinese_numeral`` writes integers below 10**8 (up to 万); the parsers read 亿 too.
"""

from __future__ import annotations

import re
from decimal import Decimal

DIGITS = "零一二三四五六七八九"
#: numeral character -> digit (两 is the spoken 2, 〇 the written zero)
DIGIT_VALUE = {c: i for i, c in enumerate(DIGITS)} | {"两": 2, "〇": 0}
_UNIT_VALUE = {"十": 10, "百": 100, "千": 1000}


def chinese_numeral(n: int, *, liang: bool = False) -> str:
    """Write ``0 <= n < 10**8`` in Chinese numerals (``3500`` -> ``三千五百``, ``12`` -> ``十二``).

    Args:
        n: the integer.
        liang: write a leading 2 before 千/百/万 as 两 (``两千``, ``两万``), as people say it.

    Raises:
        ValueError: ``n`` out of range.
    """
    if not 0 <= n < 10**8:
        raise ValueError(f"chinese_numeral takes 0 <= n < 10**8, got {n}")
    if n == 0:
        return "零"
    wan, rest = divmod(n, 10000)
    out = ""
    if wan:
        out = ("两" if liang and wan == 2 else _below_10000(wan, liang, True)) + "万"
    if rest:
        out += ("零" if wan and rest < 1000 else "") + _below_10000(rest, liang, not wan)
    return out


def _below_10000(n: int, liang: bool, leading: bool) -> str:
    out, pending_zero = "", False
    for unit_value, unit in ((1000, "千"), (100, "百"), (10, "十"), (1, "")):
        d = n // unit_value % 10
        if d == 0:
            pending_zero = pending_zero or bool(out)
            continue
        if pending_zero:
            out, pending_zero = out + "零", False
        if d == 1 and unit == "十" and not out and leading:
            out += "十"  # 十二, not 一十二
        elif d == 2 and liang and not out and unit in ("千", "百"):
            out += "两" + unit
        else:
            out += DIGITS[d] + unit
    return out


_BIG_UNIT_VALUE = {"万": 10**4, "亿": 10**8}
#: an Arabic number as typed: ``3500``, ``3,500.00``, ``1.5``, ``.5``
_ARABIC = re.compile(r"(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?|\.\d+")
_ZEROS = ("零", "〇")
_ASCII_DIGITS = "0123456789"


def parse_chinese_numeral(text: str) -> int:
    """Read a Chinese integer numeral (``三千五百`` -> 3500, ``两万`` -> 20000, ``十二`` -> 12).

    Also the spoken elision of a last unit (``两千五`` -> 2500, ``三万五`` -> 35000, ``一百五``
    -> 150; ``两千零五`` is 2005) and digit strings (``二〇二六`` -> 2026).

    Args:
        text: Chinese numeral characters only (no Arabic digits; see :func:`parse_numeral`).

    Returns:
        The integer.

    Raises:
        ValueError: an empty text or a character that is not a Chinese numeral.
    """
    if not text:
        raise ValueError("empty numeral")
    for ch in text:
        if ch not in DIGIT_VALUE and ch not in _UNIT_VALUE and ch not in _BIG_UNIT_VALUE:
            raise ValueError(f"{ch!r} in {text!r} is not a Chinese numeral")
    return int(_integer(text, text))


def parse_numeral(text: str) -> Decimal:
    """Read a number written in Arabic digits, Chinese numerals or a mix of the two, exactly.

    ``3500``, ``3,500.00``, ``三千五百``, ``两千零五`` (2005), ``1.5万`` (15000), ``3万5`` (35000),
    ``12万3千``, ``三点八五`` (3.85), ``一点五万`` (15000), ``负五`` and ``-5``.

    Args:
        text: the numeral, without a unit.

    Returns:
        The value as a :class:`~decimal.Decimal` (``1.5万`` is exactly 15000).

    Raises:
        ValueError: an empty text, a character that is no numeral, or numbers side by side
            without a unit between them (``3五``).
    """
    s = text.strip()
    sign = 1
    if s[:1] in ("-", "−", "负"):
        sign, s = -1, s[1:]
    if not s:
        raise ValueError(f"no number in {text!r}")
    if "点" in s:
        head, _, tail = s.partition("点")
        n = 0
        while n < len(tail) and (tail[n] in DIGIT_VALUE or tail[n] in _ASCII_DIGITS):
            n += 1
        digits, scale = tail[:n], tail[n:]
        if not digits or any(ch not in _BIG_UNIT_VALUE for ch in scale):
            raise ValueError(f"{text!r} is not a decimal numeral")
        frac = "".join(str(DIGIT_VALUE[ch]) if ch in DIGIT_VALUE else ch for ch in digits)
        value = (_integer(head, text) if head else Decimal(0)) + Decimal("0." + frac)
        for ch in scale:
            value *= _BIG_UNIT_VALUE[ch]
        return sign * value
    return sign * _integer(s, text)


def _tokens(s: str, text: str) -> list[tuple[str, Decimal, bool]]:
    """``(kind, value, single_digit)``: kind ``num``, ``zero``, ``unit`` (十百千) or ``big``."""
    out: list[tuple[str, Decimal, bool]] = []
    i = 0
    while i < len(s):
        m = _ARABIC.match(s, i)
        if m is not None:
            lit = m.group()
            out.append(("num", Decimal(lit.replace(",", "")), len(lit) == 1))
            i = m.end()
            continue
        ch = s[i]
        if ch in _ZEROS:
            out.append(("zero", Decimal(0), True))
        elif ch in DIGIT_VALUE:
            out.append(("num", Decimal(DIGIT_VALUE[ch]), True))
        elif ch in _UNIT_VALUE:
            out.append(("unit", Decimal(_UNIT_VALUE[ch]), False))
        elif ch in _BIG_UNIT_VALUE:
            out.append(("big", Decimal(_BIG_UNIT_VALUE[ch]), False))
        else:
            raise ValueError(f"{ch!r} in {text!r} is not a numeral")
        i += 1
    return out


def _integer(s: str, text: str) -> Decimal:
    """The value of a numeral without 点 (Arabic runs act as digits: ``1.5万``, ``3万5``)."""
    tokens = _tokens(s, text)
    if not tokens:
        raise ValueError(f"no number in {text!r}")
    if len(tokens) > 1 and all(kind in ("num", "zero") and one for kind, _, one in tokens):
        if any(ch in _ASCII_DIGITS for ch in s):
            raise ValueError(f"{text!r} has two numbers without a unit between them")
        return Decimal("".join(str(int(v)) for _, v, _ in tokens))  # 二〇二六 -> 2026
    yi = wan = section = Decimal(0)
    digit: Decimal | None = None
    prev = ""
    for kind, value, _ in tokens:
        if kind == "num":
            if digit is not None:
                raise ValueError(f"{text!r} has two numbers without a unit between them")
            digit = value
        elif kind == "zero":
            digit = None
        elif kind == "unit":
            if prev == "unit" and digit is None:
                raise ValueError(f"{text!r} has two units in a row")
            section += (digit if digit is not None else 1) * value
            digit = None
        else:  # 万 or 亿
            group = section + (digit if digit is not None else 0)
            if value == 10**8:
                yi += (wan + group or 1) * value
                wan = Decimal(0)
            else:
                wan += (group or 1) * value
            section, digit = Decimal(0), None
        prev = kind
    tail = digit if digit is not None else Decimal(0)
    last, before = tokens[-1], tokens[-2] if len(tokens) > 1 else None
    if (digit is not None and before is not None and before[0] in ("unit", "big")
            and before[1] >= 100 and last[2]):
        tail = digit * before[1] / 10  # the spoken elision: 两千五 = 2500, 三万五 = 35000
    return yi + wan + section + tail
