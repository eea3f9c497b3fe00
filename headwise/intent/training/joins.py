"""Compound rows made by joining two training rows: concatenation augmentation for
multi-intent training.

A multi-label model learns that one message can carry several requests only from the
compound rows its data holds, and those join few pairs of intents: a pair that never
co-occurs in training is then read as one intent (the second request missed). Joining two
training rows, the text of one after the other's and the union of their intents, is how the
multi-intent benchmarks MixATIS and MixSNIPS were built from single-intent data (Qin et al.,
2020, "AGIF"); ``task.compound_joins`` adds such rows to a multi-label run's training data::

    pairs = joined_pairs(train, share=0.5, seed=0, fits=tokenizer.lengths, max_length=64)
    extra = [join_two(train[i], train[j], c) for i, j, c in pairs]

The join is plain punctuation (a full-width comma or full stop between Chinese texts, a comma
or full stop between others, nothing more after a text that already ends in a question mark
or full stop): the connecting words of a data set's own compound rows stay its own, and no
list of join words is borrowed from any evaluation set. Slot spans of the second text move by
the first text's length and the connector's, so the slot tagger trains on the joined rows
too. Rows without intents (out of scope) may be one side of a join, which then carries the
other side's intents: a request after or before a question out of scope. Whether joins help,
and how many, is measured in BENCHMARKS.md, ``compound:cpu``.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence

from headwise.text.dataset import Example, SlotSpan

__all__ = ["join_two", "joined_pairs"]

#: punctuation that already ends a sentence: the next text follows it without a connector
_ENDINGS = "？?。.！!～~"
#: the connectors between two texts, by whether the first text holds CJK characters
_CJK_CONNECTORS = ("，", "。")
_OTHER_CONNECTORS = (", ", ". ")
#: how many rounds of drawing the rows still missing before giving up
_TRIES = 20


def _is_cjk(text: str) -> bool:
    return any("\u4e00" <= c <= "\u9fff" for c in text)


def _connector(first: str, rng: random.Random) -> str:
    """What goes between ``first`` and ``second``."""
    cjk = _is_cjk(first)
    end = first.rstrip()
    if end and end[-1] in _ENDINGS:
        return "" if cjk else " "
    return rng.choice(_CJK_CONNECTORS if cjk else _OTHER_CONNECTORS)


def join_two(first: Example, second: Example, connector: str) -> Example:
    """``first`` and ``second`` as one row: the texts joined by ``connector`` (``first``'s
    trailing whitespace dropped), the intents of both in order (each once), ``first``'s spans
    and ``second``'s moved to where its text now starts."""
    head = first.text.rstrip()
    offset = len(head) + len(connector)
    intents = tuple(dict.fromkeys(first.intents + second.intents))
    spans = tuple(s for s in first.slots if s.end <= len(head)) + tuple(
        SlotSpan(s.name, s.start + offset, s.end + offset, s.text, s.value)
        for s in second.slots)
    return Example(head + connector + second.text, intents, spans, first.line)


def joined_pairs(examples: Sequence[Example], share: float, seed: int,
                 fits: Callable[[list[str]], list[int]] | None = None,
                 max_length: int | None = None) -> list[tuple[int, int, str]]:
    """Which rows to join for ``round(share * len(examples))`` compound rows: ``(first,
    second, connector)``, indices into ``examples`` (a distillation teacher's targets of a
    joined row are made from its two parts').

    Each row joins two rows drawn at random (seeded) whose intent sets do not overlap, not
    both without intents, with at most as many intents together as the most any training
    row has (at least two); a join whose text does not fit the model (``fits``' token count
    above ``max_length``) is drawn again, up to a fixed number of rounds.

    Args:
        examples: the training rows.
        share: how many rows to make, as a share of ``examples`` (0: none).
        seed: the random seed.
        fits: the token count of each text (``Tokenizer.lengths``); None: no length check.
        max_length: the model's longest input, with ``fits``.

    Returns:
        The pairs (fewer when too few qualify: two rows with intents are needed).

    Raises:
        ValueError: a negative ``share``, or ``fits`` without ``max_length``.
    """
    if share < 0:
        raise ValueError(f"the share of joined rows must be >= 0, got {share}")
    if fits is not None and max_length is None:
        raise ValueError("a length check (fits) needs the model's max_length")
    wanted = round(share * len(examples))
    labelled = [k for k, e in enumerate(examples) if e.intents]
    if wanted == 0 or len(labelled) < 2:
        return []
    most = max(2, max(len(e.intents) for e in examples))
    rng = random.Random(seed)
    pool = range(len(examples))
    out: list[tuple[int, int, str]] = []
    for _ in range(_TRIES):
        need = wanted - len(out)
        if need == 0:
            break
        drawn = []
        for _ in range(need):
            i, j = rng.choice(pool), rng.choice(labelled)
            if rng.random() < 0.5:
                i, j = j, i
            first, second = examples[i], examples[j]
            union = set(first.intents) | set(second.intents)
            if i == j or set(first.intents) & set(second.intents) or len(union) > most:
                continue
            drawn.append((i, j, _connector(first.text, rng)))
        if fits is not None and drawn:
            lengths = fits([join_two(examples[i], examples[j], c).text for i, j, c in drawn])
            drawn = [d for d, n in zip(drawn, lengths, strict=True) if n <= max_length]
        out.extend(drawn)
    return out
