"""Token categories for the head analysis: negations, numbers and amounts, domain terms.

A :class:`CategoryLexicon` marks which words of a text belong to each category, from
lexicon words (matched as substrings for Chinese, as whole words for other text, longest
first, case-insensitively) and an optional regular expression per category (numbers).
A word is in a category when its characters overlap a match.

Built-in lexicons: :func:`chinese_lexicon` (the demo corpus generator's negation and
domain lexicons, and numbers by the character tokenizer's
:data:`~headwise.text.char_level.NUMBER_PATTERN`) and :func:`english_lexicon` (negations
such as *not, never, don't, cancel*; numbers and amounts; banking terms). A JSON file
replaces them (:meth:`CategoryLexicon.from_json`)::

    {"negation": ["not", "never", "no"],
     "number": {"pattern": "[0-9]+(?:\\\\.[0-9]+)?"},
     "domain": {"words": ["card", "transfer"], "pattern": "top[- ]?up"}}

Where gold annotations exist (the demo corpus's spans), :func:`categories_from_spans`
marks the words from them instead.

A compound (multi-label) model's analysis adds two categories: :data:`JOIN`, the
connectives that join one request to the next (:func:`join_lexicon`: the Chinese ones of the
demo corpus's joins, :data:`CHINESE_JOINS` and :data:`CHINESE_JOIN_PATTERN`, or English
ones, :data:`ENGLISH_JOINS`; a lexicon file's ``"join"`` category replaces them), and
:data:`NUMBER_IN_SECOND`, the number words after the first join (:func:`numbers_after_join`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

import numpy as np

from headwise.text.banking_lexicon import category_lexicon
from headwise.text.char_level import NUMBER_PATTERN, cjk_fraction
from headwise.text.negation_tokens import ENGLISH_NEGATION_WORDS

#: the text layer's negator words, and verbs that refuse or undo (a category for the
#: analysis, wider than the cue tokens of negation-aware heads)
ENGLISH_NEGATIONS = ENGLISH_NEGATION_WORDS + (
    "cancel", "cancelled", "canceled", "refuse", "refused", "decline", "declined", "reject",
    "rejected", "stop", "fail", "failed")
#: digits (with separators, decimals, a currency sign or a percent sign) and number words
ENGLISH_NUMBER_PATTERN = (
    r"[$£€¥₹]?\s?[0-9]+(?:[.,][0-9]+)*\s?%?"
    r"|\b(?:zero|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|fifteen"
    r"|twenty|thirty|forty|fifty|hundred|thousand|million|billion|half|dozen)\b")
ENGLISH_DOMAIN = (
    "card", "account", "transfer", "payment", "balance", "fee", "fees", "charge", "refund",
    "cash", "atm", "pin", "top-up", "top up", "topup", "exchange rate", "currency",
    "deposit", "withdrawal", "withdraw", "loan", "interest", "statement", "transaction",
    "direct debit", "bank", "money", "limit", "verify", "identity", "contactless",
    "virtual card", "apple pay", "google pay")

#: the category of the words that join one request to the next (compound models)
JOIN = "join"
#: the category of the number words after the first join (compound models)
NUMBER_IN_SECOND = "number_in_second"
#: Chinese connectives between requests: the words of the demo corpus's join templates
#: (:data:`headwise.demo.joins.JOIN_FAMILIES`; ``tests/inspect/test_compound_heads.py``
#: checks that they find the join of the corpus's joined messages)
CHINESE_JOINS = ("顺便", "另外", "还有就是", "还有", "然后", "同时", "以及", "不行的话就",
                 "不行的话", "办不了的话", "要是", "如果")
#: the one-character connectives (再, 就, 那, 先), only where a clause ends before them:
#: alone they are common inside a request (再还, 就是说, 那个, 先冻结)
CHINESE_JOIN_PATTERN = (r"(?<=[，,。？?！!\s])(?:那就|就(?!是)|再)"
                        r"|(?<=[？?\s])(?:那先|那(?![个笔张份些])|先)")
#: English connectives between requests
ENGLISH_JOINS = (
    "and", "and then", "then", "also", "and also", "as well as", "plus", "besides",
    "by the way", "in addition", "additionally", "after that", "another thing", "on top of that",
    "while you're at it", "otherwise", "if not", "if so", "or else")


class CategoryLexicon:
    """Category name -> lexicon words and an optional regular expression.

    Args:
        categories: name -> list of words, or ``{"words": [...], "pattern": "regex"}``.
        whole_words: match words only between word boundaries (for space-separated
            languages); None decides per text (substrings for mostly-CJK text).

    Raises:
        ValueError: an empty mapping, a category with neither words nor pattern, or an
            invalid regular expression.
    """

    def __init__(self, categories: Mapping[str, Sequence[str] | Mapping[str, object]], *,
                 whole_words: bool | None = None) -> None:
        if not categories:
            raise ValueError("a category lexicon needs at least one category")
        self.words: dict[str, list[str]] = {}
        self.patterns: dict[str, str | None] = {}
        for name, spec in categories.items():
            if isinstance(spec, Mapping):
                unknown = set(spec) - {"words", "pattern"}
                if unknown:
                    raise ValueError(f"category {name!r}: unknown keys {sorted(unknown)}")
                words, pattern = list(spec.get("words", [])), spec.get("pattern")
            elif isinstance(spec, str):
                raise ValueError(f"category {name!r}: give a list of words, not one string")
            else:
                words, pattern = list(spec), None
            if not words and not pattern:
                raise ValueError(f"category {name!r} has neither words nor a pattern")
            if pattern is not None:
                try:
                    re.compile(str(pattern))
                except re.error as e:
                    raise ValueError(f"category {name!r}: invalid pattern: {e}") from e
            self.words[str(name)] = sorted({str(w) for w in words if str(w).strip()},
                                           key=lambda w: (-len(w), w))
            self.patterns[str(name)] = None if pattern is None else str(pattern)
        self.whole_words = whole_words
        self._compiled: dict[tuple[str, bool], re.Pattern[str]] = {}

    @property
    def names(self) -> list[str]:
        """The category names, in order."""
        return list(self.words)

    @classmethod
    def from_json(cls, path: str | Path) -> CategoryLexicon:
        """Read a JSON object of categories (see the module docstring).

        Raises:
            FileNotFoundError: no such file.
            ValueError: not valid JSON, or not a valid lexicon.
        """
        path = Path(path)
        if not path.is_file():
            raise FileNotFoundError(f"no lexicon file at {path}")
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except json.JSONDecodeError as e:
            raise ValueError(f"{path} is not valid JSON: {e}") from e
        if not isinstance(data, dict):
            raise ValueError(f"{path} must hold a JSON object: category -> words")
        return cls(data)

    def to_dict(self) -> dict[str, dict[str, object]]:
        """A JSON-serialisable description."""
        return {n: {"words": self.words[n], "pattern": self.patterns[n]} for n in self.words}

    def _regex(self, name: str, whole: bool) -> re.Pattern[str]:
        key = (name, whole)
        if key not in self._compiled:
            parts = [re.escape(w) for w in self.words[name]]
            if whole:
                parts = [rf"(?<![\w']){p}(?![\w'])" for p in parts]
            if self.patterns[name]:
                parts.append(f"(?:{self.patterns[name]})")
            self._compiled[key] = re.compile("|".join(parts), re.IGNORECASE)
        return self._compiled[key]

    def spans(self, text: str) -> dict[str, list[tuple[int, int]]]:
        """Character spans of each category's matches in ``text``."""
        whole = self.whole_words
        if whole is None:
            whole = cjk_fraction([text]) < 0.3
        return {name: [m.span() for m in self._regex(name, whole).finditer(text)
                       if m.end() > m.start()] for name in self.words}

    def mark(self, text: str, unit_spans: Sequence[tuple[int, int]],
             special: np.ndarray) -> np.ndarray:
        """(categories, units) bool: which units of ``text`` are in each category."""
        found = self.spans(text)
        return np.stack([_overlaps(found[n], unit_spans, special) for n in self.words])


def categories_from_spans(spans: Iterable[tuple[int, int, str]], names: Sequence[str],
                          unit_spans: Sequence[tuple[int, int]],
                          special: np.ndarray) -> np.ndarray:
    """(categories, units) bool from gold ``(start, end, category)`` spans."""
    spans = list(spans)
    return np.stack([_overlaps([(s, e) for s, e, c in spans if c == n], unit_spans, special)
                     for n in names])


def _overlaps(found: list[tuple[int, int]], unit_spans: Sequence[tuple[int, int]],
              special: np.ndarray) -> np.ndarray:
    out = np.zeros(len(unit_spans), dtype=bool)
    for i, (s, e) in enumerate(unit_spans):
        if not special[i] and e > s:
            out[i] = any(s < b and a < e for a, b in found)
    return out


def chinese_lexicon() -> CategoryLexicon:
    """The built-in Chinese lexicon: the demo generator's negations and domain terms, and
    numbers by the character tokenizer's number pattern."""
    lex = category_lexicon()
    return CategoryLexicon({"negation": lex["negation"], "number": {"pattern": NUMBER_PATTERN},
                            "domain": lex["domain"]}, whole_words=False)


def english_lexicon() -> CategoryLexicon:
    """The built-in English lexicon: negations, numbers and amounts, banking terms."""
    return CategoryLexicon({"negation": list(ENGLISH_NEGATIONS),
                            "number": {"pattern": ENGLISH_NUMBER_PATTERN},
                            "domain": list(ENGLISH_DOMAIN)}, whole_words=True)


def default_lexicon(texts: Iterable[str]) -> CategoryLexicon:
    """The Chinese lexicon for mostly-CJK texts, else the English one."""
    return chinese_lexicon() if cjk_fraction(texts) >= 0.3 else english_lexicon()


def join_lexicon(texts: Iterable[str]) -> CategoryLexicon:
    """The built-in :data:`JOIN` lexicon: the Chinese connectives (:data:`CHINESE_JOINS`,
    :data:`CHINESE_JOIN_PATTERN`) for mostly-CJK texts, else the English ones
    (:data:`ENGLISH_JOINS`, whole words)."""
    if cjk_fraction(texts) >= 0.3:
        return CategoryLexicon({JOIN: {"words": list(CHINESE_JOINS),
                                       "pattern": CHINESE_JOIN_PATTERN}}, whole_words=False)
    return CategoryLexicon({JOIN: list(ENGLISH_JOINS)}, whole_words=True)


def numbers_after_join(joins: np.ndarray, numbers: np.ndarray, special: np.ndarray
                       ) -> np.ndarray:
    """(units,) bool: the number units after the first join of a text (the numbers of its
    second and later requests).

    The first join is the first run of join units, leaving out one that opens the text
    (要是……就……, "if ..., then ...": a connective before the first request does not end
    it). A text without such a join has none.

    Args:
        joins: (units,) bool, the :data:`JOIN` units.
        numbers: (units,) bool, the number units.
        special: (units,) bool, the special tokens.
    """
    joins, numbers = np.asarray(joins, dtype=bool), np.asarray(numbers, dtype=bool)
    words = np.flatnonzero(~np.asarray(special, dtype=bool))
    out = np.zeros(len(numbers), dtype=bool)
    k = 0
    while k < len(words):
        if not joins[words[k]]:
            k += 1
            continue
        end = k
        while end + 1 < len(words) and joins[words[end + 1]]:
            end += 1
        if k > 0:  # the first run of join words that does not open the text
            after = words[end + 1:]
            out[after] = numbers[after]
            return out
        k = end + 1
    return out
