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

__all__ = ["is_number_piece", "number_token_ids", "whole_number_ids"]

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


def whole_number_ids(tokenizer: Tokenizer) -> list[int]:
    """Sorted ids of the vocabulary entries that the tokenizer's ``number_pattern`` reads as
    one whole number (``3``, ``3,500``, ``三千五百``): the pieces of which an unseen one is
    encoded as ``[NUM]``. Empty for a tokenizer without a ``number_pattern`` (WordPiece, a
    pretrained checkpoint's). Special tokens are never among them.
    """
    if tokenizer.number_pattern is None:
        return []
    pattern = re.compile(tokenizer.number_pattern)
    special = set(tokenizer.special_tokens.values())
    return sorted(i for token, i in tokenizer.backend.get_vocab().items()
                  if token not in special and pattern.fullmatch(token) is not None)
