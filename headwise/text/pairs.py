"""Parallel sentence pairs: a TSV reader and a deterministic, leak-free split.

A pairs file has one pair a line: ``source<TAB>target``, optionally followed by more
tab-separated columns, the first of which is kept as the pair's ``attribution`` (the
Tatoeba / ManyThings.org layout is ``english<TAB>chinese<TAB>attribution``)::

    pairs = read_pairs("cmn.txt")
    splits = split_pairs(pairs)            # {"train": [...], "valid": [...], "test": [...]}

The split hashes a normalised form of the *source* side (:func:`split_key`) with SHA-256,
so it is the same on every machine and in every process (unlike Python's salted
``hash()``), and every pair with the same source sentence ("Hi." -> "嗨。" and
"Hi." -> "你好。") lands in the same split: the test sources are truly unseen in training.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

#: the default split: 90 % train, 5 % validation, 5 % test
DEFAULT_SPLIT: dict[str, float] = {"train": 0.90, "valid": 0.05, "test": 0.05}
_NOT_WORD = re.compile(r"[\W_]+")


class PairFormatError(ValueError):
    """A malformed line of a pairs file; the message names the file and line."""


@dataclass(frozen=True)
class SentencePair:
    """One source sentence and its translation.

    Attributes:
        source: the source-language sentence.
        target: its translation.
        attribution: the licence / authorship column ("" when the file has none).
        line: 1-based line number in the file it was read from (0 when made in code).
    """

    source: str
    target: str
    attribution: str = ""
    line: int = 0


def read_pairs(path: str | Path, *, encoding: str = "utf-8") -> list[SentencePair]:
    """Read a tab-separated pairs file (module docstring); blank lines are skipped.

    Args:
        path: the file.
        encoding: its text encoding.

    Returns:
        The pairs in file order, both sides stripped of surrounding whitespace.

    Raises:
        FileNotFoundError: no such file.
        PairFormatError: a line with fewer than two columns or an empty side.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no pairs file at {path}")
    pairs = []
    with path.open(encoding=encoding, newline="") as f:
        for number, raw in enumerate(f, start=1):
            line = raw.rstrip("\r\n")
            if not line.strip():
                continue
            cols = line.split("\t")
            if len(cols) < 2:
                raise PairFormatError(f"{path}:{number}: expected source<TAB>target, got "
                                      f"{len(cols)} column: {line[:80]!r}")
            source, target = cols[0].strip(), cols[1].strip()
            if not source or not target:
                side = "source" if not source else "target"
                raise PairFormatError(f"{path}:{number}: empty {side} side")
            pairs.append(SentencePair(source, target, cols[2].strip() if len(cols) > 2 else "",
                                      number))
    return pairs


def split_key(text: str) -> str:
    """The form of a sentence that decides its split: NFKC, case-folded, every run of
    characters other than letters and digits made one space, trimmed. So "Wait!",
    "wait." and " WAIT " share a key (and a split)."""
    folded = unicodedata.normalize("NFKC", text).casefold()
    return _NOT_WORD.sub(" ", folded).strip()


def split_of(key: str, fractions: Mapping[str, float] = DEFAULT_SPLIT, *,
             salt: str = "") -> str:
    """The split a key falls in: the first 8 bytes of ``sha256(salt + "\\0" + key)`` read
    as a number in [0, 1), compared with the cumulative ``fractions`` in their order.

    Args:
        key: the (normalised) text to place, e.g. :func:`split_key` of a source.
        fractions: split name -> share; positive, summing to 1.
        salt: another salt gives another, equally deterministic split.

    Returns:
        One of the names of ``fractions``.

    Raises:
        ValueError: no fractions, one that is not positive, or a sum other than 1.
    """
    _check_fractions(fractions)
    digest = hashlib.sha256(f"{salt}\0{key}".encode()).digest()
    u = int.from_bytes(digest[:8], "big") / 2.0**64
    total = 0.0
    for name, share in fractions.items():
        total += share
        if u < total:
            return name
    return next(reversed(list(fractions)))  # u within rounding of 1.0


def split_pairs(pairs: Iterable[SentencePair], fractions: Mapping[str, float] = DEFAULT_SPLIT,
                *, salt: str = "", key: Callable[[str], str] = split_key
                ) -> dict[str, list[SentencePair]]:
    """Split pairs deterministically by their source side (:func:`split_of` of
    ``key(pair.source)``); each split keeps the input order.

    Args:
        pairs: the pairs.
        fractions: split name -> share (default 90/5/5 train/valid/test).
        salt: see :func:`split_of`.
        key: the normalisation applied to the source before hashing.

    Returns:
        Split name -> its pairs, with every name of ``fractions`` present (maybe empty).

    Raises:
        ValueError: bad ``fractions``.
    """
    _check_fractions(fractions)
    out: dict[str, list[SentencePair]] = {name: [] for name in fractions}
    for pair in pairs:
        out[split_of(key(pair.source), fractions, salt=salt)].append(pair)
    return out


def _check_fractions(fractions: Mapping[str, float]) -> None:
    if not fractions:
        raise ValueError("fractions must name at least one split")
    bad = {k: v for k, v in fractions.items() if not v > 0}
    if bad:
        raise ValueError(f"split fractions must be positive, got {bad}")
    if abs(sum(fractions.values()) - 1.0) > 1e-9:
        raise ValueError(f"split fractions must sum to 1, got {sum(fractions.values())}")
