"""Amounts of money: a number and, when the text states one, its currency.

``parse_amount("三千五百元")`` is ``Amount(3500.0, "CNY")``; likewise ``两万块``, ``1.5万``
(no currency stated: ``None``), ``3万5``, ``¥3,500``, ``3,500.00元``, ``三块五`` (3.5 yuan),
``$20``, ``£50``, ``20 pounds``, ``EUR 1,200``, ``3.5k``, ``1.5w`` and ``2w块`` (``w`` is 万,
ten thousand, as Chinese customers type it), ``5000元整`` (整: "exactly", as written on
forms), ``a grand`` (1000), ``five hundred dollars``, ``1.2m``. Currencies are ISO 4217
codes: CNY, USD, GBP, EUR. ``¥`` is read as the yuan (this package serves Chinese banks),
``$`` as the US dollar.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from decimal import Decimal

from headwise.slots.numbers import clean, has_cjk, parse_number, strip_cjk_spaces
from headwise.text.chinese_numerals import parse_numeral

CURRENCIES = ("CNY", "USD", "GBP", "EUR")

#: written before the number (longest first when matching)
_PREFIXES = {"us$": "USD", "usd": "USD", "$": "USD", "¥": "CNY", "rmb": "CNY", "cny": "CNY",
             "人民币": "CNY", "£": "GBP", "gbp": "GBP", "€": "EUR", "eur": "EUR"}
#: written after the number
_SUFFIXES = {"元人民币": "CNY", "块钱": "CNY", "元钱": "CNY", "元": "CNY", "块": "CNY",
             "圆": "CNY", "人民币": "CNY", "美元": "USD", "美金": "USD", "英镑": "GBP",
             "镑": "GBP", "欧元": "EUR", "rmb": "CNY", "cny": "CNY", "yuan": "CNY",
             "renminbi": "CNY", "usd": "USD", "dollars": "USD", "dollar": "USD",
             "bucks": "USD", "buck": "USD", "$": "USD", "gbp": "GBP", "pounds sterling": "GBP",
             "pounds": "GBP", "pound": "GBP", "quid": "GBP", "£": "GBP", "eur": "EUR",
             "euros": "EUR", "euro": "EUR", "€": "EUR", "¥": "CNY"}
#: 1.5w, 2W: w stands for 万 (wan, ten thousand) in typed Chinese
_WAN = re.compile(r"(\d[\d,]*(?:\.\d+)?|\.\d+)\s*w")
_CENTS = {"USD": ("cents", "cent"), "EUR": ("cents", "cent"), "GBP": ("pence", "p")}
_ZH_DIGIT = r"[0-9零〇一二两三四五六七八九]"
#: 三块五, 3元5角, 三块五毛, 12元3角4分 (after the 元/块 come 角 and 分, tenths and hundredths)
_YUAN_JIAO = re.compile(rf"(.+?)(?:元|块)(?:({_ZH_DIGIT})(?:角|毛)?)?(?:({_ZH_DIGIT})分)?")
_JIAO_ONLY = re.compile(rf"({_ZH_DIGIT})(?:角|毛)(?:({_ZH_DIGIT})分)?|({_ZH_DIGIT})分")


@dataclass(frozen=True)
class Amount:
    """An amount of money.

    Attributes:
        value: the amount in units of the currency (yuan, dollars ...).
        currency: an ISO 4217 code (``CNY``, ``USD``, ``GBP``, ``EUR``), None when unstated.
    """

    value: float
    currency: str | None = None


def parse_amount(text: str) -> Amount:
    """Read an amount of money.

    Args:
        text: the amount alone (``3,500.00元``, ``$20``, ``five hundred dollars``).

    Returns:
        The :class:`Amount`; ``currency`` None when the text names none (``1.5万``, ``3.5k``).

    Raises:
        ValueError: not an amount, or two different currencies (``$20 euros``).
    """
    s = clean(text)
    if has_cjk(s):
        s = strip_cjk_spaces(s)
    if s.endswith("钱") and not s.endswith("块钱") and not s.endswith("元钱"):
        s = s[:-1]  # 三块五毛钱
    if s.endswith("整") and len(s) > 1:
        s = s[:-1]  # 5000元整, 三千元整: "exactly"
    prefix, s = _take(s, _PREFIXES, at_start=True)
    zh = _chinese_yuan(s)
    if zh is not None:
        return _amount(zh, _agree(prefix, "CNY", text), text)
    cents = _cents(s)
    if cents is not None:
        value, currency = cents
        return _amount(value, _agree(prefix, currency, text), text)
    suffix, s = _take(s, _SUFFIXES, at_start=False)
    currency = _agree(prefix, suffix, text)
    if not s:
        raise ValueError(f"no number in the amount {text!r}")
    wan = _WAN.fullmatch(s)
    if wan is not None:
        return _amount(Decimal(wan.group(1).replace(",", "")) * 10_000, currency, text)
    try:
        value = parse_number(s)
    except ValueError:
        raise ValueError(f"{text!r} is not an amount of money") from None
    return _amount(value, currency, text)


def _amount(value: Decimal, currency: str | None, text: str) -> Amount:
    if value < 0:
        raise ValueError(f"{text!r} is a negative amount")
    return Amount(float(value), currency)


def _take(s: str, table: dict[str, str], *, at_start: bool) -> tuple[str | None, str]:
    """``(currency, rest)``: the longest currency word of ``table`` at one end of ``s``."""
    for word in sorted(table, key=len, reverse=True):
        if at_start and s.startswith(word):
            rest = s[len(word):]
            if word.isalpha() and word.isascii() and rest[:1].isalpha():
                continue  # "usdollars" is no prefix "usd"
            return table[word], rest.strip()
        if not at_start and s.endswith(word):
            rest = s[: len(s) - len(word)]
            if word.isalpha() and word.isascii() and rest[-1:].isalpha():
                continue  # "a grand" does not end in the currency "d"
            return table[word], rest.strip()
    return None, s


def _agree(first: str | None, second: str | None, text: str) -> str | None:
    if first and second and first != second:
        raise ValueError(f"{text!r} names two currencies, {first} and {second}")
    return first or second


def _chinese_yuan(s: str) -> Decimal | None:
    """The yuan of ``三块五`` (3.5), ``12元3角4分`` (12.34), ``五毛`` (0.5); else None."""
    m = _JIAO_ONLY.fullmatch(s)
    if m is not None:
        jiao, fen = (m.group(1), m.group(2)) if m.group(3) is None else (None, m.group(3))
        return _digit(jiao) / 10 + _digit(fen) / 100
    m = _YUAN_JIAO.fullmatch(s)
    if m is None or (m.group(2) is None and m.group(3) is None):
        return None
    return parse_numeral(m.group(1)) + _digit(m.group(2)) / 10 + _digit(m.group(3)) / 100


def _digit(ch: str | None) -> Decimal:
    return Decimal(0) if ch is None else parse_numeral(ch)


def _cents(s: str) -> tuple[Decimal, str] | None:
    """``five dollars and fifty cents``, ``50 cents``, ``50p``: (value, currency), else None."""
    for currency, words in _CENTS.items():
        for word in words:
            if not s.endswith(word) or (word == "p" and not re.search(r"\dp$", s)):
                continue
            head = s[: len(s) - len(word)].strip()
            whole = Decimal(0)
            for unit, code in _SUFFIXES.items():
                if code == currency and unit.isalpha() and unit.isascii() and f"{unit} " in head:
                    first, _, head = head.partition(f"{unit} ")
                    whole = parse_number(first)
                    head = head.removeprefix("and ").strip()
                    break
            try:
                cents = parse_number(head)
            except ValueError:
                return None
            if cents >= 100 or cents != cents.to_integral_value():
                return None
            return whole + cents / 100, currency
    return None
