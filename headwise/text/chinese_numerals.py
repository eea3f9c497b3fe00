"""Chinese numerals: writing integers the way people say them, and reading them back.

``chinese_numeral(3500)`` is ``三千五百``, ``chinese_numeral(20000, liang=True)`` is ``两万``;
``parse_chinese_numeral`` reads both, and the everyday forms ``十二`` (12) and ``一千零五``
(1005). Integers below 10**8 (up to 万; 亿 is not needed for customer-service amounts).
"""

from __future__ import annotations

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


def parse_chinese_numeral(text: str) -> int:
    """Read a Chinese integer numeral (``三千五百`` -> 3500, ``两万`` -> 20000, ``十二`` -> 12).

    Raises:
        ValueError: a character that is not a Chinese numeral.
    """
    if not text:
        raise ValueError("empty numeral")
    total = section = digit = 0
    for ch in text:
        if ch in DIGIT_VALUE:
            digit = DIGIT_VALUE[ch]
        elif ch in _UNIT_VALUE:
            section += (digit or 1) * _UNIT_VALUE[ch]
            digit = 0
        elif ch == "万":
            total += (section + digit) * 10000
            section = digit = 0
        else:
            raise ValueError(f"{ch!r} in {text!r} is not a Chinese numeral")
    return total + section + digit
