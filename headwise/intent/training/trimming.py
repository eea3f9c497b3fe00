"""Which vocabulary rows an intent task keeps when a pretrained encoder is trimmed.

:func:`~headwise.models.vocab_trim.trim_vocabulary` keeps the token rows it is given;
:func:`kept_token_ids` chooses them for a task: every id the training (and validation)
texts use, the special tokens, and a reserve of the checkpoint's most frequent pieces so
that a word first seen in production still has its own vector. For a SentencePiece-Unigram
vocabulary (XLM-R, e5) the most frequent pieces are those with the highest log-probability
scores; for WordPiece and BPE, whose files carry no frequencies, the reserve is the
lowest ids (BPE numbers its merges in the order they were learnt, most frequent first).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import numpy as np
from torch import nn

from headwise.models.vocab_trim import trim_vocabulary
from headwise.text.tokenizer import Tokenizer

__all__ = ["DEFAULT_RESERVE", "TRIM_ABOVE", "kept_token_ids", "trim_for_task"]

#: pieces kept beyond the task's own when trimming (``"auto"``)
DEFAULT_RESERVE = 20000
#: ``"auto"`` trims vocabularies larger than this (multilingual ones), not BERT's 21-30k
TRIM_ABOVE = 60000


def _frequency_order(tokenizer: Tokenizer) -> np.ndarray:
    """Token ids, most frequent first (Unigram scores; otherwise id order)."""
    model = json.loads(tokenizer.backend.to_str()).get("model") or {}
    if model.get("type") == "Unigram":
        scores = np.array([float(score) for _, score in model["vocab"]], dtype=np.float64)
        return np.argsort(-scores, kind="stable")
    return np.arange(tokenizer.vocab_size)


def kept_token_ids(tokenizer: Tokenizer, texts: Sequence[str], *, reserve: int) -> list[int]:
    """The ids a task keeps: those ``texts`` tokenize to (special tokens and an input
    prefix included), every added token, and the ``reserve`` most frequent pieces.

    Raises:
        ValueError: a negative reserve.
    """
    if reserve < 0:
        raise ValueError(f"reserve must be >= 0, got {reserve}")
    keep: set[int] = set()
    for start in range(0, len(texts), 4096):
        for e in tokenizer.backend.encode_batch(list(texts[start:start + 4096])):
            keep.update(e.ids)
    keep.update(tokenizer.backend.get_added_tokens_decoder())
    for role in ("pad", "unk", "cls", "sep", "mask", "num"):
        token = tokenizer.special_tokens.get(role)
        token_id = tokenizer.token_to_id(token) if token else None
        if token_id is not None:
            keep.add(token_id)
    order = _frequency_order(tokenizer)
    keep.update(int(i) for i in order[:reserve])
    return sorted(i for i in keep if 0 <= i < tokenizer.vocab_size)


def trim_for_task(model: nn.Module, tokenizer: Tokenizer, texts: Sequence[str], *,
                  reserve: int = DEFAULT_RESERVE) -> tuple[nn.Module, dict[str, Any]]:
    """Trim a pretrained encoder's vocabulary to what ``texts`` use plus ``reserve``.

    Returns:
        ``(trimmed model, info)``; ``info`` has ``vocab_size``, ``kept``, ``reserve`` and
        the parameter counts before and after.
    """
    keep = kept_token_ids(tokenizer, texts, reserve=reserve)
    before = sum(p.numel() for p in model.parameters())
    trimmed = trim_vocabulary(model, keep, unk_id=tokenizer.unk_token_id)
    after = sum(p.numel() for p in trimmed.parameters())
    return trimmed, {"vocab_size": tokenizer.vocab_size, "kept": len(keep),
                     "reserve": reserve, "parameters_before": before,
                     "parameters_after": after}
