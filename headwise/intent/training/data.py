"""Preparing labelled texts for training: pairs, in-scope rows, the validation split, ids."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

from sklearn.model_selection import train_test_split

from headwise.text.labels import is_oos_label
from headwise.text.tokenizer import Tokenizer

__all__ = ["encode_texts", "in_scope", "texts_and_labels", "validation_split"]


def texts_and_labels(data: Any) -> tuple[list[str], list[str | None]]:
    """``(texts, labels)`` from a reader Dataset (``.texts``/``.labels``) or (text, label)
    pairs."""
    if hasattr(data, "texts") and hasattr(data, "labels"):
        return list(data.texts), list(data.labels)
    pairs = list(data)
    return [p[0] for p in pairs], [p[1] for p in pairs]


def encode_texts(tokenizer: Tokenizer, texts: Sequence[str], max_length: int,
                 chunk: int = 512) -> list[list[int]]:
    """Token ids (special tokens included, no padding) of every text."""
    ids: list[list[int]] = []
    for start in range(0, len(texts), chunk):
        batch = tokenizer(list(texts[start:start + chunk]), max_length=max_length)
        for row, mask in zip(batch["input_ids"], batch["attention_mask"], strict=True):
            ids.append(row[: int(mask.sum())].tolist())
    return ids


def in_scope(texts: list[str], labels: list[str | None], what: str,
             oos_labels: Sequence[str] = ()) -> tuple[list[str], list[str]]:
    """The rows whose label is not out-of-scope (``oos``, ... or one of ``oos_labels``);
    ValueError on unlabelled rows of the ``what`` data."""
    keep = [(t, y) for t, y in zip(texts, labels, strict=True)
            if not is_oos_label(y, oos_labels)]
    if any(y is None for _, y in keep):
        raise ValueError(f"the {what} data has unlabelled rows")
    return [t for t, _ in keep], [str(y) for _, y in keep]


def validation_split(texts: list[str], labels: list[str], fraction: float, seed: int
                     ) -> tuple[list[str], list[str], list[str], list[str]]:
    """``(train_texts, valid_texts, train_labels, valid_labels)``: a seeded ``fraction``
    held out, stratified by intent when every intent has two examples or more; a
    ``fraction`` of 0 holds nothing out (empty validation lists)."""
    if fraction == 0:
        return list(texts), [], list(labels), []
    stratify = labels if min(Counter(labels).values()) >= 2 else None
    return train_test_split(texts, labels, test_size=fraction,
                            random_state=seed, stratify=stratify)
