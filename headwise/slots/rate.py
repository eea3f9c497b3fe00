"""Interest rates: levels in percent, and movements or spreads in basis points.

``3.85%`` and ``百分之三点八五`` are the level ``Rate(3.85, 385.0, change=False)``;
``LPR 下调 25 个基点``, ``下调25个基点`` and ``down 25bp`` the movement
``Rate(-0.25, -25.0, change=True, base="LPR")`` (the base only when named);
``上调10bp``, ``up 15 basis points`` and ``cut by 0.25 percentage points`` likewise.
A spread over a base rate (``LPR加55个基点``, ``LPR + 55bp``, ``55bp over LPR``, ``LPR减20个基点``)
is a level relative to that base: ``Rate(0.55, 55.0, change=False, base="LPR")``. A movement
to a level (``下调至3.5%``, ``cut to 3.5%``) is that level, ``change=False``.

One basis point is a hundredth of a percentage point; ``percent`` and ``basis_points`` always
hold the same quantity in the two units (``basis_points == 100 * percent``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from decimal import Decimal

from headwise.slots.english_numerals import NUMBER_WORDS
from headwise.slots.numbers import clean, has_cjk, parse_number, strip_cjk_spaces

#: unit -> (basis points per unit, whether the unit names a movement of points)
_ZH_UNITS = {"个基点": 1, "基点": 1, "bps": 1, "bp": 1, "个百分点": 100, "百分点": 100, "%": 100}
_EN_UNITS = {"basis points": 1, "basis point": 1, "bps": 1, "bp": 1, "percentage points": 100,
             "percentage point": 100, "pps": 100, "pp": 100, "ppts": 100, "ppt": 100,
             "per cent": 100, "percent": 100, "pct": 100, "%": 100}
_BASES = {"lpr": "LPR", "贷款市场报价利率": "LPR", "shibor": "SHIBOR", "libor": "LIBOR",
          "sofr": "SOFR", "euribor": "EURIBOR", "prime": "PRIME", "base rate": "BASE"}
# the role of every other word around the quantity
_ZH_WORDS = {
    "down": ("下调了", "下调", "降了", "下降了", "下降", "调降", "降低了", "降低", "调低了", "调低",
             "减少了", "减少", "下跌了", "下跌", "降息", "减息", "降"),
    "up": ("上调了", "上调", "涨了", "上涨了", "上涨", "上升了", "上升", "调升", "提高了", "提高",
           "调高了", "调高", "增加了", "增加", "加息", "升息", "升了", "升", "涨"),
    "plus": ("加上", "加", "+", "上浮"),
    "minus": ("减去", "减", "-", "下浮"),
    "to": ("调整为", "调整到", "调整至", "至", "到", "为", "是"),
    "filler": ("在", "的基础上", "基础上", "利率", "年利率", "年化", "收益率", "贷款", "房贷", "了",
               "大约", "左右", "约"),
}
_EN_WORDS = {
    "down": ("down", "cut", "cuts", "cutting", "lower", "lowered", "lowering", "reduce",
             "reduced", "reduction", "decrease", "decreased", "drop", "dropped", "fall", "fell",
             "fallen", "decline", "declined", "trim", "trimmed", "slash", "slashed"),
    "up": ("up", "raise", "raised", "raising", "rise", "rises", "rose", "risen", "increase",
           "increased", "hike", "hiked", "higher", "lift", "lifted", "climb", "climbed"),
    "plus": ("plus", "over", "above", "+"),
    "minus": ("minus", "below", "under", "-"),
    "to": ("to",),
    "filler": ("by", "of", "a", "an", "the", "rate", "rates", "interest", "is", "at", "was",
               "will", "be", "been", "has", "have", "annual", "apr", "about", "around"),
}
_ZH_QUANTITY = re.compile(r"([0-9.,零〇一二两三四五六七八九十百千万点]+)"
                          r"(个基点|基点|bps|bp|个百分点|百分点|%)")
_ZH_PERCENT_OF = re.compile(r"百分之([0-9.零〇一二两三四五六七八九十百千万点]+)")
_EN_TOKEN = re.compile(r"\d[\d,]*(?:\.\d+)?|\.\d+|%|[+-]|[a-z]+(?:-[a-z]+)*")


@dataclass(frozen=True)
class Rate:
    """An interest rate, or a movement of one.

    Attributes:
        percent: the quantity in percent (negative for a cut or a spread below the base).
        basis_points: the same quantity in basis points (``100 * percent``).
        change: True for a movement (``下调25个基点``), False for a level (``3.85%``,
            ``LPR加55个基点``).
        base: the base rate a spread or movement refers to (``LPR``) when the text names one.
    """

    percent: float
    basis_points: float
    change: bool
    base: str | None = None


def parse_rate(text: str) -> Rate:
    """Read a rate, a rate movement or a spread over a base rate.

    Args:
        text: the rate alone (``3.85%``, ``LPR 下调 25 个基点``, ``up 15 basis points``).

    Returns:
        The :class:`Rate`.

    Raises:
        ValueError: no quantity with a unit (%, 基点, bp, percentage points ...), or words
            around it that say nothing about a rate.
    """
    s = clean(text)
    if has_cjk(s):
        bp, words = _chinese(strip_cjk_spaces(s), text)
        roles = _roles(words, _ZH_WORDS, text, chinese=True)
    else:
        bp, tokens = _english(s, text)
        roles = _roles(tokens, _EN_WORDS, text, chinese=False)
    return _rate(bp, roles, text)


def _chinese(s: str, text: str) -> tuple[Decimal, list[str]]:
    """``(basis points, the texts around the quantity)``."""
    m = _ZH_PERCENT_OF.search(s) or _ZH_QUANTITY.search(s)
    if m is None:
        raise ValueError(f"no rate (%, 百分之, 基点, bp) in {text!r}")
    per_unit = 100 if m.re is _ZH_PERCENT_OF else _ZH_UNITS[m.group(2)]
    try:
        value = parse_number(m.group(1))
    except ValueError:
        raise ValueError(f"{m.group(1)!r} in {text!r} is not a number") from None
    return value * per_unit, [s[: m.start()], s[m.end():]]


def _english(s: str, text: str) -> tuple[Decimal, list[str]]:
    """``(basis points, the words around the quantity)``."""
    tokens = _EN_TOKEN.findall(s)
    if "".join(tokens) != s.replace(" ", ""):
        raise ValueError(f"{text!r} holds characters no rate has")
    for i in range(len(tokens)):
        for unit, per_unit in _EN_UNITS.items():
            n = unit.count(" ") + 1
            if " ".join(tokens[i:i + n]) != unit or i == 0:
                continue
            start = i  # the longest run of number words right before the unit
            while start > 0 and (tokens[start - 1] in NUMBER_WORDS
                                 or tokens[start - 1][0].isdigit() or tokens[start - 1][0] == "."
                                 or ("-" in tokens[start - 1] and tokens[start - 1][0].isalpha())):
                start -= 1
            while start < i and tokens[start] in ("a", "an", "and"):
                start += 1  # "a 25bp cut": the article is no number
            if start == i:
                continue
            value = parse_number(" ".join(tokens[start:i]))
            return value * per_unit, tokens[:start] + tokens[i + n:]
    raise ValueError(f"no rate (%, percent, basis points, bp) in {text!r}")


def _roles(pieces: list[str], table: dict[str, tuple[str, ...]], text: str, *,
           chinese: bool) -> list[tuple[str, str]]:
    """``(role, base name)`` of every word around the quantity, in order.

    Roles: ``base`` (a base rate, named), ``up``, ``down``, ``plus``, ``minus``, ``to``,
    ``filler``. Chinese pieces are split greedily, longest word first; English pieces are
    whole words (two-word base names such as ``base rate`` joined first).

    Raises:
        ValueError: a word of no role.
    """
    lexicon = {w: (role, "") for role, ws in table.items() for w in ws}
    lexicon |= {w: ("base", name) for w, name in _BASES.items()}
    by_length = sorted(lexicon, key=len, reverse=True)
    roles: list[tuple[str, str]] = []
    for piece in (pieces if chinese else _join_bases(pieces)):
        while piece:
            word = (next((w for w in by_length if piece.startswith(w)), None) if chinese
                    else piece if piece in lexicon else None)
            if word is None:
                raise ValueError(f"{piece!r} in {text!r} says nothing about a rate")
            roles.append(lexicon[word])
            piece = piece[len(word):]
    return roles


def _join_bases(tokens: list[str]) -> list[str]:
    out: list[str] = []
    for tok in tokens:
        if out and f"{out[-1]} {tok}" in _BASES:
            out[-1] = f"{out[-1]} {tok}"
        else:
            out.append(tok)
    return out


def _rate(bp: Decimal, roles: list[tuple[str, str]], text: str) -> Rate:
    kinds = {role for role, _ in roles if role not in ("filler", "base")}
    bases = [name for role, name in roles if role == "base"]
    if len(set(bases)) > 1:
        raise ValueError(f"{text!r} names two base rates")
    if {"up", "down"} <= kinds or {"plus", "minus"} <= kinds:
        raise ValueError(f"{text!r} says both up and down")
    if "to" in kinds:  # 下调至3.5%: the level reached
        change, sign = False, 1
    elif kinds & {"up", "down"}:
        change, sign = True, -1 if "down" in kinds else 1
    else:
        change, sign = False, -1 if "minus" in kinds else 1
    bp = sign * bp
    return Rate(float(bp / 100), float(bp), change, bases[0] if bases else None)
