"""Intents whose rows are near-copies of a template (generated or copy-edited data).

The rule, simple enough to check by hand:

1. A row's *form* is its text in lower case (NFKC), white space collapsed, every run of
   digits (an amount, a date, a card number) written ``#``.
2. Two rows of one intent are *one-span variants* when their forms differ in a single
   stretch only: the common beginning and the common end together cover at least
   :data:`TEMPLATE_OVERLAP` of the longer form ("i lost my card" and "i lost my visa card"
   share "i lost my " and "card": 14 of 19 characters). Their *skeleton* is the common
   beginning, "…", the common end: ``i lost my … card``.
3. Each row is compared with its nearest rows by character n-gram similarity; it is a
   *template copy* when one of them, of the same intent, is a one-span variant of it (or
   has the same form).
4. An intent with at least ``min_rows`` rows is reported when at least ``share`` of its rows
   are template copies, with that share and its most common skeleton as the example.

Such an intent teaches a model the template rather than the ways people ask: accuracy on
rows like it says little about real questions.
"""

from __future__ import annotations

import re
import unicodedata
from collections import Counter, defaultdict
from collections.abc import Hashable, Sequence
from dataclasses import dataclass

import numpy as np

__all__ = ["TEMPLATE_OVERLAP", "Template", "form", "skeleton", "template_intents"]

#: the share of the longer form that the common beginning and end must cover
TEMPLATE_OVERLAP = 0.6
_DIGITS = re.compile(r"\d+(?:[.,:/-]\d+)*")


@dataclass(frozen=True)
class Template:
    """An intent most of whose rows are one-span variants of one another.

    Attributes:
        intent: the intent (an intent set joined by ``+`` for multi-label data).
        rows: its rows.
        copies: those that are template copies.
        share: ``copies / rows``.
        skeleton: the most common skeleton, e.g. ``i lost my … card``.
        example_row: the line of a row with that skeleton.
    """

    intent: str
    rows: int
    copies: int
    share: float
    skeleton: str
    example_row: int


def form(text: str) -> str:
    """The form rows are compared in: NFKC, lower case, white space collapsed, digit runs
    as ``#``."""
    t = " ".join(unicodedata.normalize("NFKC", text).lower().split())
    return _DIGITS.sub("#", t)


def skeleton(a: str, b: str, overlap: float = TEMPLATE_OVERLAP) -> str | None:
    """The skeleton two forms share when they differ in one stretch only (see the module's
    docstring), their common form when they are equal, None otherwise."""
    if a == b:
        return a
    n = min(len(a), len(b))
    pre = 0
    while pre < n and a[pre] == b[pre]:
        pre += 1
    suf = 0
    while suf < n - pre and a[-1 - suf] == b[-1 - suf]:
        suf += 1
    if pre + suf < overlap * max(len(a), len(b)):
        return None
    head, tail = a[:pre], a[len(a) - suf:]
    if " " in a:  # a text of words: the gap between words
        return " ".join(p for p in (head.strip(), "…", tail.strip()) if p)
    return f"{head}…{tail}"


def template_intents(texts: Sequence[str], keys: Sequence[Hashable], names: Sequence[str],
                     lines: Sequence[int], neighbours: np.ndarray, *, share: float = 0.5,
                     min_rows: int = 5) -> list[Template]:
    """The intents that are mostly template copies (the module's rule).

    Args:
        texts: the rows.
        keys: each row's intent (or intent set), compared for equality.
        names: each row's intent as the report names it.
        lines: each row's line in its file.
        neighbours: (rows, k) the indices of each row's most similar rows, most similar
            first (the row itself may be among them).
        share: the share of template copies from which an intent is reported.
        min_rows: smaller intents are not judged.

    Returns:
        The reported intents, largest share first.
    """
    forms = [form(t) for t in texts]
    members: dict[Hashable, list[int]] = defaultdict(list)
    for i, k in enumerate(keys):
        members[k].append(i)
    found: dict[int, str] = {}
    for i in range(len(texts)):
        for j in neighbours[i]:
            j = int(j)
            if j == i or keys[j] != keys[i]:
                continue
            s = skeleton(forms[i], forms[j])
            if s is not None:
                found[i] = s
                break
    out = []
    for rows in members.values():
        copies = [i for i in rows if i in found]
        if len(rows) < min_rows or len(copies) < share * len(rows):
            continue
        (common, _), = Counter(found[i] for i in copies).most_common(1)
        example = next(lines[i] for i in copies if found[i] == common)
        out.append(Template(names[rows[0]], len(rows), len(copies),
                            round(len(copies) / len(rows), 4), common, example))
    return sorted(out, key=lambda t: (-t.share, t.intent))
