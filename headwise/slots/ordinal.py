"""Ordinals: which instalment, payment or month (``第三期``, ``the 21st instalment``).

``parse_ordinal`` reads ``第三期``, ``第12期``, ``第二十一期``, ``第3个月``, ``third``, ``3rd``,
``twenty-first``, ``the 21st instalment``, ``instalment 3`` and ``instalment no. 3``.
"""

from __future__ import annotations

import re

from headwise.slots.english_numerals import parse_english_ordinal
from headwise.slots.numbers import clean, has_cjk, parse_number, plain, strip_cjk_spaces

#: measure words that may follow 第N
_ZH_MEASURES = ("个月", "期", "个", "笔", "次", "天", "年", "月", "周", "张", "名", "位",
                "条", "份", "项", "号", "批", "季度")
_ZH_ORDINAL = re.compile(r"第([0-9零〇一二两三四五六七八九十百千万]+)(" + "|".join(_ZH_MEASURES)
                         + r")?")
#: nouns an English ordinal may count
_EN_NOUNS = ("instalments", "instalment", "installments", "installment", "payments", "payment",
             "repayments", "repayment", "months", "month", "one", "period", "term", "bill",
             "statement", "time", "transaction", "charge")
_EN_LEADING = ("the", "my", "our", "your", "this", "that")
_NUMBERED = re.compile(r"(?:(?:" + "|".join(_EN_NOUNS) + r")\s+)?(?:number|no\.?|#)?\s*(\d+)")


def parse_ordinal(text: str) -> int:
    """Read an ordinal.

    Args:
        text: the ordinal alone, with or without the noun it counts.

    Returns:
        The position, counting from 1 (``第三期`` -> 3).

    Raises:
        ValueError: not an ordinal, or a position below 1 (``第零期``).
    """
    s = clean(text)
    if has_cjk(s):
        m = _ZH_ORDINAL.fullmatch(strip_cjk_spaces(s))
        if m is None:
            raise ValueError(f"{text!r} is not an ordinal (第N期, 第N个 ...)")
        n = plain(parse_number(m.group(1)))
    else:
        n = _english(s, text)
    if not isinstance(n, int) or n < 1:
        raise ValueError(f"{text!r} is not a position counted from 1")
    return n


def _english(s: str, text: str) -> int:
    words = s.split()
    while words and words[0] in _EN_LEADING:
        words = words[1:]
    numbered = _NUMBERED.fullmatch(" ".join(words))
    if numbered is not None and not numbered.group(0).isdigit():
        return int(numbered.group(1))  # instalment 3, instalment no. 3, #3
    if words and words[-1] in _EN_NOUNS:
        words = words[:-1]
    if not words:
        raise ValueError(f"{text!r} is not an ordinal")
    return parse_english_ordinal(" ".join(words))
