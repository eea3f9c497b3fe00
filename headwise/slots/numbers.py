"""Numbers in any of the ways customers write them, and the text clean-up every parser shares.

:func:`parse_number` reads Arabic digits (``3,500.00``), Chinese numerals (``两千零五``,
``三点八五``), mixed forms (``1.5万``, ``3万5``), English words (``twenty-five``, ``a grand``)
and shorthand (``3.5k``, ``1.2m``, ``2bn``).
"""

from __future__ import annotations

import re
import unicodedata
from decimal import Decimal

from headwise.slots.english_numerals import parse_english_number
from headwise.text.chinese_numerals import parse_numeral

_CJK = re.compile(r"[\u3007\u4e00-\u9fff]")
_SHORTHAND = re.compile(r"([+-]?(?:\d[\d,]*(?:\.\d+)?|\.\d+))\s*(k|m|mn|bn|b)")
_SHORTHAND_SCALE = {"k": 10**3, "m": 10**6, "mn": 10**6, "bn": 10**9, "b": 10**9}
_ARABIC_ONLY = re.compile(r"[+-]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?|[+-]?\.\d+")


def clean(text: str) -> str:
    """The text every parser reads: NFKC (full-width ``３５００`` and ``％`` become ASCII), lower
    case, one space between words, no space at either end.

    Args:
        text: the raw slot text.

    Returns:
        The cleaned text.
    """
    return " ".join(unicodedata.normalize("NFKC", text).lower().split())


def has_cjk(text: str) -> bool:
    """Whether ``text`` holds a Chinese character."""
    return _CJK.search(text) is not None


def strip_cjk_spaces(text: str) -> str:
    """Remove the spaces of a Chinese text (``LPR 下调 25 个基点`` -> ``LPR下调25个基点``)."""
    return text.replace(" ", "")


def parse_number(text: str) -> Decimal:
    """Read a number written any of the ways this package knows.

    Args:
        text: the number alone (``3,500``, ``两千零五``, ``1.5万``, ``twenty-five``, ``3.5k``).

    Returns:
        The exact value.

    Raises:
        ValueError: the text is not a number.
    """
    s = clean(text)
    if not s:
        raise ValueError("empty text is not a number")
    if _ARABIC_ONLY.fullmatch(s):
        return Decimal(s.replace(",", ""))
    m = _SHORTHAND.fullmatch(s)
    if m is not None:
        return Decimal(m.group(1).replace(",", "")) * _SHORTHAND_SCALE[m.group(2)]
    if has_cjk(s):
        return parse_numeral(strip_cjk_spaces(s))
    try:
        return parse_english_number(s)
    except ValueError:
        raise ValueError(f"{text!r} is not a number") from None


def plain(value: Decimal) -> int | float:
    """An exact value as JSON likes it: an int when whole (``Decimal('15000.0')`` -> 15000),
    else a float."""
    return int(value) if value == value.to_integral_value() else float(value)
