"""A saved model as the doctor's frozen feature extractor (``headwise doctor --model``).

Retraining a network once per cross-validation fold would take as long as several full
training runs, so the doctor does what the field does instead: the saved model's encoder
reads every row once, its sentence embeddings (the pooled vectors its head reads) stay
frozen, and only a logistic-regression head is cross-validated on them
(:func:`headwise.intent.training.cleaning.out_of_fold_probs` with ``features``). The same
embeddings, centred and L2-normalised, find near duplicates by cosine similarity. A TF-IDF
model fits in seconds, so its own recipe (its ``C`` and class weights) is refitted in every
fold instead, and near duplicates stay on character n-grams.

The model is loaded by the one loader of saved classifiers,
:func:`headwise.intent.kinds.load_classifier`.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["ModelFeatures", "model_features", "unit_rows"]


@dataclass(frozen=True)
class ModelFeatures:
    """A saved model's features of the rows.

    Attributes:
        values: (rows, d) dense float64 sentence embeddings of a network; None for a
            TF-IDF model, whose recipe is refitted per fold instead.
        source: what they are, in words (the report says it).
        c: the cross-validated logistic regression's ``C``: 1 on standardised embeddings,
            a TF-IDF model's own.
        class_weight: a TF-IDF model's class weights (None otherwise).
    """

    values: np.ndarray | None
    source: str
    c: float = 1.0
    class_weight: str | None = None


def model_features(directory: str | Path, texts: list[str], *, batch_size: int = 64
                   ) -> ModelFeatures:
    """The features ``directory``'s classifier gives ``texts``: the pooled vectors a
    network's (or a compound model's) intent head reads, of texts truncated to its maximum
    length; for a TF-IDF model, its recipe to refit.

    Raises:
        FileNotFoundError, ValueError: as :func:`headwise.intent.kinds.load_classifier`;
            ValueError also for a kind without one encoder (an ensemble), naming what to
            give instead.
    """
    from headwise.intent.kinds import kind_of, load_classifier

    kind = kind_of(directory)
    clf = load_classifier(directory)
    if kind.name == "tfidf":
        c, weight = float(clf.info.get("c", 10.0)), clf.info.get("class_weight")
        return ModelFeatures(None, f"the recipe of the TF-IDF model {directory} (C={c:g}, "
                                   f"class weights {weight})", c, weight)
    if kind.multi_label:
        values = _joint_pooled(clf, texts, batch_size)
    elif callable(getattr(clf, "features_and_logits", None)):
        values, _ = clf.features_and_logits(texts, batch_size=batch_size)
    else:
        raise ValueError(f"{directory} is {kind.description}, which has no single encoder to "
                         f"take sentence embeddings from; give the doctor a single network "
                         f"(for an ensemble, its member-0) or a TF-IDF model")
    return ModelFeatures(np.asarray(values, dtype=np.float64),
                         f"the frozen sentence embeddings (pooled vectors, "
                         f"{values.shape[1]} dimensions) of {kind.description} {directory}")


def _joint_pooled(clf: Any, texts: list[str], batch_size: int) -> np.ndarray:
    """The pooled vectors a compound (joint intent + slot) model's intent head reads, of
    texts truncated to its maximum length, in its predictor's length-bucketed batches."""
    import torch

    from headwise.intent.inference.runtime import pooled_vectors

    predictor = clf.predictor(batch_size=batch_size)
    rows = [item.chunks[0] for item in predictor.encode_truncated(texts)]
    model = clf.model.eval()
    device = next(model.parameters()).device
    out: np.ndarray | None = None
    with torch.inference_mode():
        for group, ids, mask in predictor.padded_batches(rows):
            pooled = pooled_vectors(model, torch.from_numpy(ids).to(device),
                                    torch.from_numpy(mask != 0).to(device))
            if out is None:
                out = np.zeros((len(rows), pooled.shape[1]))
            out[group] = pooled.double().cpu().numpy()
    assert out is not None
    return out


def unit_rows(values: np.ndarray) -> np.ndarray:
    """Embeddings made ready for cosine similarity: centred on their mean (an encoder's
    embeddings share a common direction that makes every pair look alike), L2-normalised."""
    from sklearn.preprocessing import normalize

    return normalize(values - values.mean(axis=0, keepdims=True))
