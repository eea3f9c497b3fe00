"""A deterministic WordPiece vocabulary builder.

It exists because the ``tokenizers`` library's ``WordPieceTrainer`` is not reproducible:
it numbers the ``##`` pieces in hash-map order and breaks ties between equally frequent
merges by those numbers, so the same texts give other ids, and even another set of
tokens, in every process (huggingface/tokenizers#1794; the fix, PR #2066, is not released).
:meth:`Tokenizer.train_wordpiece <headwise.text.tokenizer.Tokenizer.train_wordpiece>`
learns its vocabulary here and hands it to the library's ``WordPiece`` model, which does
the encoding as before.

The algorithm is the library's (BPE merges on word counts, as its WordPiece trainer runs
them): the vocabulary starts with the special tokens, then every character of the words
(sorted by code point), then every character that continues a word with the ``##`` prefix
(sorted likewise); then, while it is smaller than ``vocab_size``, the most frequent pair of
adjacent pieces is merged into a new token (``a`` + ``##b`` -> ``ab``, ``##a`` + ``##b``
-> ``##ab``). Ties go to the pair of smaller ids, as in the library, but the ids are now
fixed: the result depends only on the word counts and the settings.
"""

from __future__ import annotations

import heapq
from collections import defaultdict
from collections.abc import Mapping, Sequence

__all__ = ["learn_wordpiece_vocab"]


def learn_wordpiece_vocab(word_counts: Mapping[str, int], vocab_size: int, *,
                          special_tokens: Sequence[str], min_frequency: int = 2,
                          prefix: str = "##") -> list[str]:
    """Learn a WordPiece vocabulary from word counts, the same for the same input.

    Args:
        word_counts: each pre-tokenized (normalized) word -> how often it occurs; words
            with a count below 1 and empty words are ignored.
        vocab_size: the vocabulary size at which merging stops. The special tokens, the
            characters and their ``##`` forms are always kept (so every training word can
            be encoded), even when they alone are more.
        special_tokens: the first tokens, in this order.
        min_frequency: the fewest occurrences for a merge to be learnt (below 1 reads as 1).
        prefix: the prefix of a piece that continues a word.

    Returns:
        The tokens in id order: special tokens, characters, ``##`` characters, then the
        merged tokens in the order they were learnt.
    """
    tokens: list[str] = []  # id -> token
    ids: dict[str, int] = {}  # token -> id

    def add(token: str) -> int:
        if token not in ids:
            ids[token] = len(tokens)
            tokens.append(token)
        return ids[token]

    for token in special_tokens:
        add(token)
    words = sorted((w, int(c)) for w, c in word_counts.items() if w and c > 0)
    for ch in sorted({ch for w, _ in words for ch in w}):
        add(ch)
    for ch in sorted({ch for w, _ in words for ch in w[1:]}):
        add(prefix + ch)
    pieces = [[ids[w[0]], *(ids[prefix + ch] for ch in w[1:])] for w, _ in words]
    counts = [c for _, c in words]
    pair_counts: dict[tuple[int, int], int] = defaultdict(int)
    where: dict[tuple[int, int], set[int]] = defaultdict(set)  # pair -> words that may hold it
    for i, (word, count) in enumerate(zip(pieces, counts, strict=True)):
        for pair in zip(word, word[1:], strict=False):
            pair_counts[pair] += count
            where[pair].add(i)
    # a max-heap on the count, ties to the pair of smaller ids (the library's rule, on ids
    # that are now fixed); an entry whose count is stale is pushed back with the current one
    heap = [(-n, a, b) for (a, b), n in pair_counts.items()]
    heapq.heapify(heap)
    floor = max(min_frequency, 1)
    while len(tokens) < vocab_size and heap:
        stored, a, b = heapq.heappop(heap)
        count = pair_counts.get((a, b), 0)
        if -stored != count:
            if count > 0:
                heapq.heappush(heap, (-count, a, b))
            continue
        if count < floor:
            break
        second = tokens[b]
        merged = add(tokens[a] + (second[len(prefix):] if second.startswith(prefix) else second))
        delta: dict[tuple[int, int], int] = defaultdict(int)
        for i in where.pop((a, b)):
            old = pieces[i]
            new = _merge(old, a, b, merged)
            if len(new) == len(old):
                continue
            for pair in zip(old, old[1:], strict=False):
                delta[pair] -= counts[i]
            for pair in zip(new, new[1:], strict=False):
                delta[pair] += counts[i]
                where[pair].add(i)
            pieces[i] = new
        for pair, change in delta.items():
            pair_counts[pair] += change
            if change > 0:
                heapq.heappush(heap, (-pair_counts[pair], *pair))
            if pair_counts[pair] <= 0:
                del pair_counts[pair]
                where.pop(pair, None)
    return tokens


def _merge(word: list[int], a: int, b: int, token: int) -> list[int]:
    """``word`` with each ``a b`` (left to right, not overlapping) made ``token``."""
    out: list[int] = []
    i = 0
    while i < len(word):
        if i + 1 < len(word) and word[i] == a and word[i + 1] == b:
            out.append(token)
            i += 2
        else:
            out.append(word[i])
            i += 1
    return out
