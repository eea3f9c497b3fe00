"""From sub-word or character pieces to words: which token positions make up each word.

The head statistics are computed on words, not pieces: a WordPiece tokenizer splits
``cancellation`` into ``cancel ##l ##ation``, and a character tokenizer reads Chinese one
character (or one whole number, ``3,500`` or ``三千五百``) at a time. A :class:`Segmented`
text lists its *units* in sequence order: the special tokens (``[CLS]``, ``[SEP]``), each
its own unit, and the words in between. Words are the tokenizer's own pre-tokenization
words (``tokenizers``' ``word_ids``): for the character tokenizer that is a character, a
run of letters or a number unit; for WordPiece a whitespace/punctuation word.

Attention is carried to words by :func:`to_units`: the attention *to* a word is the sum
over its pieces (it is a share of the query's mass) and the attention *from* a word is the
mean over its pieces (each piece's row is a distribution; their mean is one too).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from headwise.text.tokenizer import Tokenizer


@dataclass(frozen=True)
class Segmented:
    """One text as the model saw it, grouped into units.

    Attributes:
        text: the input text.
        tokens: the model's token strings, special tokens included, after truncation.
        units: the text of each unit (a word, or the special token's string).
        spans: ``(start, end)`` character span of each unit in ``text`` (``(0, 0)`` for
            special tokens).
        special: (units,) bool, True for special tokens.
        starts: (units,) first token position of each unit (units are contiguous runs).
    """

    text: str
    tokens: tuple[str, ...]
    units: tuple[str, ...]
    spans: tuple[tuple[int, int], ...]
    special: np.ndarray
    starts: np.ndarray

    @property
    def num_tokens(self) -> int:
        """Token positions (special tokens included)."""
        return len(self.tokens)

    @property
    def sizes(self) -> np.ndarray:
        """Pieces per unit."""
        return np.diff(np.append(self.starts, self.num_tokens))

    def token_unit(self) -> np.ndarray:
        """(tokens,) the unit index of each token position."""
        return np.repeat(np.arange(len(self.units)), self.sizes)

    @property
    def words(self) -> np.ndarray:
        """Indices of the units that are words (not special tokens)."""
        return np.flatnonzero(~self.special)


def segment(tokenizer: Tokenizer, text: str, max_length: int | None) -> Segmented:
    """Group the model's tokens of ``text`` into units (special tokens and words).

    The model input is ``[CLS] pieces [SEP]`` (BERT's template, which every headwise
    tokenizer uses), with the pieces cut to ``max_length`` tokens in all; a tokenizer's
    input prefix (:meth:`~headwise.text.tokenizer.Tokenizer.with_prefix`, e5's
    ``"query: "``) sits after ``[CLS]`` as one special unit.

    Args:
        tokenizer: the classifier's tokenizer.
        text: one text.
        max_length: the classifier's longest input (special tokens included).

    Returns:
        The :class:`Segmented` text.

    Raises:
        ValueError: a tokenizer whose input is not ``[CLS] pieces [SEP]``.
    """
    enc = tokenizer.backend.encode(text, add_special_tokens=False)
    ids = tokenizer([text], max_length=max_length)["input_ids"][0].tolist()
    prefix = tuple(tokenizer.prefix_ids)  # e5's "query: ": one special unit after [CLS]
    n_pieces = len(ids) - 2 - len(prefix)
    if n_pieces < 0 or ids[0] != tokenizer.cls_token_id or ids[-1] != tokenizer.sep_token_id \
            or tuple(ids[1:1 + len(prefix)]) != prefix or n_pieces > len(enc.ids):
        raise ValueError("the head analysis needs a tokenizer that writes [CLS] pieces [SEP] "
                         "(with its input prefix after [CLS])")
    pieces = tokenizer.tokenize(text)[:n_pieces]
    word_ids = list(enc.word_ids[:n_pieces])
    offsets = list(enc.offsets[:n_pieces])
    cls, sep = tokenizer.special_tokens["cls"], tokenizer.special_tokens["sep"]
    units, spans, special, starts = [cls], [(0, 0)], [True], [0]
    if prefix:
        units.append(tokenizer.input_prefix.strip())
        spans.append((0, 0))
        special.append(True)
        starts.append(1)
    previous = object()
    for pos, (word, (start, end)) in enumerate(zip(word_ids, offsets, strict=True),
                                               1 + len(prefix)):
        if word is None or word != previous:  # a new word (None: a piece of its own)
            units.append("")
            spans.append((start, end))
            special.append(False)
            starts.append(pos)
        s0 = spans[-1][0]
        spans[-1] = (min(s0, start), max(spans[-1][1], end))
        units[-1] = text[spans[-1][0]:spans[-1][1]]
        previous = word
    units.append(sep)
    spans.append((0, 0))
    special.append(True)
    starts.append(n_pieces + 1 + len(prefix))
    prefix_tokens = [tokenizer.backend.id_to_token(i) or "" for i in prefix]
    return Segmented(text, (cls, *prefix_tokens, *pieces, sep), tuple(units), tuple(spans),
                     np.array(special, dtype=bool), np.array(starts, dtype=np.int64))


def to_units(weights: np.ndarray, seg: Segmented) -> np.ndarray:
    """Attention over tokens -> attention over units.

    Args:
        weights: (..., tokens, tokens) attention weights of one text (rows = queries), at
            least the text's real tokens (padding beyond them is dropped).
        seg: the text's :class:`Segmented` form.

    Returns:
        (..., units, units) float64: columns summed over each unit's pieces, rows averaged
        over them, so a row that summed to one still does.
    """
    n = seg.num_tokens
    w = np.asarray(weights, dtype=np.float64)[..., :n, :n]
    if len(seg.units) == n:  # one piece per unit (character tokenizers): nothing to group
        return w
    cols = np.add.reduceat(w, seg.starts, axis=-1)
    rows = np.add.reduceat(cols, seg.starts, axis=-2)
    return rows / seg.sizes[:, None]


def words_only(unit_weights: np.ndarray, special: np.ndarray) -> np.ndarray:
    """Word-to-word attention: special-token rows and columns removed, rows renormalised.

    Args:
        unit_weights: (..., units, units) from :func:`to_units`.
        special: (units,) bool.

    Returns:
        (..., words, words); a row with no mass left on words stays all zeros.
    """
    keep = ~np.asarray(special, dtype=bool)
    w = unit_weights[..., keep, :][..., :, keep]
    total = w.sum(-1, keepdims=True)
    return np.divide(w, total, out=np.zeros_like(w), where=total > 0)
