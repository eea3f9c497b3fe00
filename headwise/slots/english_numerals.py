"""English number words: cardinals (``twenty-five``, ``a thousand``) and ordinals (``21st``).

``parse_english_number("five hundred")`` is 500, ``parse_english_number("a grand")`` 1000,
``parse_english_number("1.5 million")`` 1,500,000 and ``parse_english_number("two point five")``
2.5; ``parse_english_ordinal("twenty-first")`` and ``parse_english_ordinal("21st")`` are 21.
Values are exact :class:`~decimal.Decimal` numbers. Text is expected lower-case.
"""

from __future__ import annotations

import re
from decimal import Decimal

ONES = {"zero": 0, "oh": 0, "nil": 0, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5,
        "six": 6, "seven": 7, "eight": 8, "nine": 9, "ten": 10, "eleven": 11, "twelve": 12,
        "thirteen": 13, "fourteen": 14, "fifteen": 15, "sixteen": 16, "seventeen": 17,
        "eighteen": 18, "nineteen": 19}
TENS = {"twenty": 20, "thirty": 30, "forty": 40, "fifty": 50, "sixty": 60, "seventy": 70,
        "eighty": 80, "ninety": 90}
#: scale words; ``grand`` is the spoken thousand (``a grand``, ``five grand``)
SCALES = {"thousand": 10**3, "grand": 10**3, "million": 10**6, "billion": 10**9}
ORDINAL_ONES = {"first": 1, "second": 2, "third": 3, "fourth": 4, "fifth": 5, "sixth": 6,
                "seventh": 7, "eighth": 8, "ninth": 9, "tenth": 10, "eleventh": 11,
                "twelfth": 12, "thirteenth": 13, "fourteenth": 14, "fifteenth": 15,
                "sixteenth": 16, "seventeenth": 17, "eighteenth": 18, "nineteenth": 19,
                "twentieth": 20, "thirtieth": 30, "fortieth": 40, "fiftieth": 50,
                "sixtieth": 60, "seventieth": 70, "eightieth": 80, "ninetieth": 90}
ORDINAL_SCALES = {"hundredth": 100, "thousandth": 1000, "millionth": 10**6}
#: every word a cardinal may contain
NUMBER_WORDS = frozenset(ONES) | frozenset(TENS) | frozenset(SCALES) | {
    "hundred", "dozen", "a", "an", "and", "point", "half", "minus", "negative"}

_NUMERIC = re.compile(r"\d+(?:,\d{3})*(?:\.\d+)?|\.\d+")
_ORDINAL_DIGITS = re.compile(r"(\d+)(st|nd|rd|th)")


def words(text: str) -> list[str]:
    """Split lower-case text into words: hyphens and commas between words separate them."""
    return [w for w in re.split(r"[\s\-]+|,(?!\d{3})", text.strip()) if w]


def parse_english_number(text: str) -> Decimal:
    """Read an English cardinal, in words, digits or both.

    ``six``, ``twenty-five``, ``five hundred``, ``one thousand two hundred and fifty``,
    ``a hundred``, ``a grand`` (1000), ``3 thousand``, ``1.5 million``, ``a dozen``,
    ``two point five``, ``one and a half`` (1.5), ``minus three``.

    Args:
        text: lower-case text.

    Returns:
        The exact value.

    Raises:
        ValueError: an unknown word or a malformed number (``five twenty``, ``hundred hundred``).
    """
    tokens = [t for t in words(text) if t != "and"]
    if not tokens:
        raise ValueError(f"no number in {text!r}")
    sign = 1
    if tokens[0] in ("minus", "negative"):
        sign, tokens = -1, tokens[1:]
    total = current = Decimal(0)
    seen = False  # any number at all
    last = ""  # kind of the last token: ones, tens, hundred, scale, numeric, a, half
    for i, tok in enumerate(tokens):
        if tok in ("a", "an"):
            if i + 1 == len(tokens) or tokens[i + 1] not in (
                    "hundred", "dozen", "half", *SCALES):
                raise ValueError(f"{text!r} is not a number")
            last = "a"
            continue
        if tok == "point":
            rest = tokens[i + 1:]
            if not rest or any(t not in ONES or ONES[t] > 9 for t in rest):
                raise ValueError(f"{text!r}: 'point' must be followed by digit words")
            frac = Decimal("0." + "".join(str(ONES[t]) for t in rest))
            return sign * (total + current + frac)
        if _NUMERIC.fullmatch(tok):
            if last in ("ones", "tens", "numeric"):
                raise ValueError(f"{text!r} has two numbers side by side")
            current += Decimal(tok.replace(",", ""))
            last = "numeric"
        elif tok in ONES:
            if last == "ones" or last == "numeric" or (last == "tens" and ONES[tok] >= 10):
                raise ValueError(f"{text!r} has two numbers side by side")
            if last == "tens" and ONES[tok] == 0:
                raise ValueError(f"{text!r} is not a number")
            current += ONES[tok]
            last = "ones"
        elif tok in TENS:
            if last in ("ones", "tens", "numeric"):
                raise ValueError(f"{text!r} has two numbers side by side")
            current += TENS[tok]
            last = "tens"
        elif tok == "hundred":
            if last == "hundred":
                raise ValueError(f"{text!r} is not a number")
            current = (current or 1) * 100
            last = "hundred"
        elif tok == "dozen":
            current = (current or 1) * 12
            last = "scale"
        elif tok in SCALES:
            if last == "scale" and not current:
                raise ValueError(f"{text!r} is not a number")
            total += (current or 1) * SCALES[tok]
            current = Decimal(0)
            last = "scale"
        elif tok == "half":
            current += Decimal("0.5")  # one and a half, a half
            last = "half"
        else:
            raise ValueError(f"{tok!r} in {text!r} is not a number word")
        seen = True
    if not seen:
        raise ValueError(f"no number in {text!r}")
    return sign * (total + current)


def parse_english_ordinal(text: str) -> int:
    """Read an English ordinal: ``third``, ``3rd``, ``twenty-first``, ``one hundredth``, ``21st``.

    Args:
        text: lower-case text, the ordinal alone.

    Returns:
        The number (``third`` -> 3).

    Raises:
        ValueError: not an ordinal, or digits with the wrong suffix (``3th``, ``21th``).
    """
    tokens = [t for t in words(text) if t != "and"]
    if not tokens:
        raise ValueError(f"no ordinal in {text!r}")
    last = tokens[-1]
    m = _ORDINAL_DIGITS.fullmatch(last)
    if m is not None:
        if len(tokens) > 1:
            raise ValueError(f"{text!r} is not an ordinal")
        n = int(m.group(1))
        if m.group(2) != ordinal_suffix(n):
            raise ValueError(f"{last!r} should be written {n}{ordinal_suffix(n)}")
        return n
    prefix = " ".join(tokens[:-1])
    if last in ORDINAL_ONES:
        head = int(parse_english_number(prefix)) if prefix else 0
        if prefix and (head % 10 or (ORDINAL_ONES[last] >= 10 and head % 100)):
            raise ValueError(f"{text!r} is not an ordinal")
        return head + ORDINAL_ONES[last]
    if last in ORDINAL_SCALES:
        head = int(parse_english_number(prefix)) if prefix else 1
        return head * ORDINAL_SCALES[last]
    raise ValueError(f"{text!r} is not an ordinal")


def ordinal_suffix(n: int) -> str:
    """The English suffix of ``n`` written in digits: ``st``, ``nd``, ``rd`` or ``th``."""
    if n % 100 in (11, 12, 13):
        return "th"
    return {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
