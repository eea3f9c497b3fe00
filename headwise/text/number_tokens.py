"""Which vocabulary entries are numbers: the keys that number-aware heads look at.

A token counts as a number when, after dropping WordPiece's ``##``, it is made of digits
and number punctuation (``3``, ``##500``, ``3,500.00``, ``25%``), of Chinese numerals
(``三千五百``, ``两``, ``十二``), or is the tokenizer's ``[NUM]`` placeholder. Units
(``元``, ``bp``) and words such as "one"/"twice" are not numbers here: the point is a
lexical cue the model cannot get from the embedding of one word, not a parser.
"""

from __future__ import annotations

import re

from headwise.text.char_level import CN_DIGITS, CN_MAGNITUDES
from headwise.text.tokenizer import Tokenizer

__all__ = ["is_number_piece", "number_token_ids"]

_NUMBER_PIECE = re.compile(
    rf"(?:[0-9][0-9.,%]*|[.,][0-9][0-9.,%]*|[{CN_DIGITS}{CN_MAGNITUDES}点]*[{CN_DIGITS}十]"
    rf"[{CN_DIGITS}{CN_MAGNITUDES}点]*)")


def is_number_piece(token: str) -> bool:
    """Whether one vocabulary entry is a number (``##`` continuation prefix ignored).

    >>> [is_number_piece(t) for t in ["3,500", "##00", "三千", "元", "bp", "一"]]
    [True, True, True, False, False, True]
    """
    piece = token[2:] if token.startswith("##") else token
    return bool(piece) and _NUMBER_PIECE.fullmatch(piece) is not None


def number_token_ids(tokenizer: Tokenizer) -> list[int]:
    """Sorted ids of the vocabulary entries that are numbers, plus ``[NUM]`` if present."""
    vocab = tokenizer.backend.get_vocab()
    ids = {i for token, i in vocab.items() if is_number_piece(token)}
    if tokenizer.number_token_id is not None:
        ids.add(tokenizer.number_token_id)
    return sorted(ids)
