"""Label-keeping character noise of the kinds customers type: pinyin-input typos, a dropped
or doubled character, full-width and half-width forms, spaces, punctuation.

:func:`augmented_rows` makes seeded noisy copies of ``(text, label)`` rows, each keeping its
row's label; distillation adds them as extra rows whose soft target is the teacher's on the
noisy text (:mod:`~headwise.intent.training.distillation`). Digits and negation cues (不, 没,
"not", ...) are never touched: they decide intents. The typos come from
:data:`headwise.text.typos.TYPOS`.
"""

from __future__ import annotations

import random
import re
from collections import Counter
from collections.abc import Callable, Sequence

from headwise.text.negation_tokens import ENGLISH_NEGATION_WORDS, NEGATION_CHARACTERS
from headwise.text.typos import TYPOS

__all__ = ["AUGMENTATIONS", "augment_text", "augmented_rows", "check_augmentations"]

#: the augmentation kinds and what each does to a text
AUGMENTATIONS: dict[str, str] = {
    "typo": "a same-sound or same-shape character (the demo corpus's pinyin-input typos, "
            "还款 -> 换款), or two adjacent letters inside a Latin word swapped",
    "drop": "one letter or character dropped",
    "duplicate": "one letter or character doubled",
    "width": "one run of half-width characters made full-width (card -> ｃａｒｄ), or of "
             "full-width ones half-width (，？ -> ,?)",
    "space": "a space put between two characters, or a space doubled",
    "punct": "the final punctuation dropped or repeated, one added, or an inner comma dropped",
}
_ENDINGS = "？?。.！!～~"
_NEGATION_WORDS = re.compile(
    r"(?<![A-Za-z])(?:" + "|".join(re.escape(w) for w in sorted(ENGLISH_NEGATION_WORDS,
                                                                  key=len, reverse=True))
    + r")(?![A-Za-z])", re.IGNORECASE)


def _protected(text: str) -> set[int]:
    """Positions noise never touches: digits and negation cues."""
    keep = {i for i, c in enumerate(text) if c.isdigit() or c in NEGATION_CHARACTERS}
    for m in _NEGATION_WORDS.finditer(text):
        keep.update(range(m.start(), m.end()))
    return keep


def _typo(text: str, rng: random.Random) -> str:
    keep = _protected(text)
    spots: list[tuple[int, int, tuple[str, ...] | None]] = [
        (m.start(), m.end(), forms) for word, forms in TYPOS
        for m in re.finditer(re.escape(word), text)]
    spots += [(m.start(), m.end(), None) for m in re.finditer(r"[A-Za-z]{4,}", text)
              if not keep & set(range(m.start(), m.end()))]
    if not spots:
        return text
    start, end, forms = rng.choice(spots)
    if forms is not None:
        return text[:start] + rng.choice(forms) + text[end:]
    i = rng.randrange(start + 1, end - 2)  # the first and last letters stay
    return text[:i] + text[i + 1] + text[i] + text[i + 2:]


def _letters(text: str) -> list[int]:
    keep = _protected(text)
    return [i for i, c in enumerate(text) if c.isalpha() and i not in keep]


def _drop(text: str, rng: random.Random) -> str:
    spots = _letters(text)
    if len(text) < 3 or not spots:
        return text
    i = rng.choice(spots)
    return text[:i] + text[i + 1:]


def _duplicate(text: str, rng: random.Random) -> str:
    spots = _letters(text)
    if not spots:
        return text
    i = rng.choice(spots)
    return text[:i + 1] + text[i] + text[i + 1:]


def _width(text: str, rng: random.Random) -> str:
    runs = [(m.start(), m.end(), -0xFEE0) for m in re.finditer("[\uff01-\uff5e]+", text)]
    runs += [(m.start(), m.end(), 0xFEE0) for m in re.finditer("[!-~]+", text)]
    if not runs:
        return text
    start, end, shift = rng.choice(runs)
    return text[:start] + "".join(chr(ord(c) + shift) for c in text[start:end]) + text[end:]


def _space(text: str, rng: random.Random) -> str:
    keep = _protected(text)
    spaces = [i for i, c in enumerate(text) if c == " "]
    if spaces and rng.random() < 0.5:
        i = rng.choice(spaces)
        return text[:i] + " " + text[i:]
    gaps = [i for i in range(1, len(text)) if not text[i - 1].isspace()
            and not text[i].isspace() and i - 1 not in keep and i not in keep]
    if not gaps:
        return text
    i = rng.choice(gaps)
    return text[:i] + " " + text[i:]


def _punct(text: str, rng: random.Random) -> str:
    body = text.rstrip(_ENDINGS)
    commas = [i for i, c in enumerate(body) if c in "，,、" and 0 < i < len(body) - 1]
    choices = ["comma"] if commas else []
    choices += ["drop", "repeat"] if body != text and body.strip() else ["add"]
    how = rng.choice(choices)
    if how == "comma":
        i = rng.choice(commas)
        return text[:i] + text[i + 1:]
    if how == "drop":
        return body
    if how == "repeat":
        return text + text[-1]
    return text + rng.choice("？?。!~")


_NOISE: dict[str, Callable[[str, random.Random], str]] = {
    "typo": _typo, "drop": _drop, "duplicate": _duplicate, "width": _width, "space": _space,
    "punct": _punct}


def check_augmentations(kinds: Sequence[str]) -> list[str]:
    """The kinds, checked (``"all"``: every one of :data:`AUGMENTATIONS`), without repeats.

    Raises:
        ValueError: an unknown kind (named, with the known ones).
    """
    out: list[str] = []
    for kind in kinds:
        names = list(AUGMENTATIONS) if kind == "all" else [kind]
        if kind != "all" and kind not in AUGMENTATIONS:
            raise ValueError(f"unknown augmentation {kind!r}; known: "
                             f"{', '.join(AUGMENTATIONS)} or all")
        out += [n for n in names if n not in out]
    return out


def augment_text(text: str, kinds: Sequence[str], rng: random.Random
                 ) -> tuple[str, str] | None:
    """One noisy copy of ``text``: the kinds are tried in a random order and the first that
    changes the text wins. Returns ``(copy, kind)``, or None when none applies.

    Raises:
        ValueError: an unknown kind.
    """
    order = check_augmentations(kinds)
    rng.shuffle(order)
    for kind in order:
        new = _NOISE[kind](text, rng).strip()
        if new and new != text:
            return new, kind
    return None


def augmented_rows(rows: Sequence[tuple[str, str | None]], kinds: Sequence[str], *,
                   copies: int = 1, seed: int = 0, exclude: set[str] | frozenset[str] = frozenset()
                   ) -> tuple[list[tuple[str, str | None]], dict[str, int]]:
    """Noisy copies of ``(text, label)`` rows, each keeping its row's label (None stays
    None): ``copies`` per row, each drawn from a generator seeded by ``(seed, copy, text)``
    (the same whatever the row order or the process); copies equal to a text of
    ``exclude`` or to an earlier copy are left out.

    Returns:
        ``(rows, per_kind)``: the copies, and how many each kind made.

    Raises:
        ValueError: ``copies`` below 1, or an unknown kind.
    """
    if copies < 1:
        raise ValueError(f"augment copies must be at least 1, got {copies}")
    kinds = check_augmentations(kinds)
    seen, out, per_kind = set(exclude), [], Counter()
    for copy in range(copies):
        for text, label in rows:
            got = augment_text(text, kinds, random.Random(f"{seed}:{copy}:{text}"))
            if got is not None and got[0] not in seen:
                seen.add(got[0])
                out.append((got[0], label))
                per_kind[got[1]] += 1
    return out, dict(sorted(per_kind.items()))
