"""Serving a classifier that is not one network: a TF-IDF model or an ensemble.

:class:`ProbabilityEngine` answers with the classifier's own calibrated probabilities
(:meth:`ProbabilityClassifier.predict_proba
<headwise.intent.classifier.ProbabilityClassifier.predict_proba>`), gathered into batches
by the service's micro-batcher like a network's texts; its answers are those of
``classifier.predict``. A TF-IDF model reads a text whole; a network inside an ensemble
truncates it at its own maximum length, as ``predict`` does. So only the ``"truncate"``
long-text policy applies (an answer's ``long_text`` note is always null: the truncation
inside an ensemble's networks is not reported), and there is no ONNX path and no
attention to explain.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from headwise.intent.classifier import ProbabilityClassifier
from headwise.intent.ensemble import EnsembleClassifier
from headwise.intent.tfidf import TfidfClassifier
from headwise.serve.engine import prediction_records

__all__ = ["ClassifierRuntime", "ProbabilityEngine", "TextItem"]


@dataclass(frozen=True)
class TextItem:
    """One text as a :class:`ProbabilityEngine` reads it (whole; ``policy`` is always None,
    as an :class:`~headwise.serve.bucketing.EncodedText` within its limit)."""

    text: str
    policy: str | None = None


@dataclass(frozen=True)
class ClassifierRuntime:
    """What the service reports as the runtime (:func:`runtime_name`): ``"tfidf"``
    (scikit-learn features and numpy) or ``"ensemble"`` (each member on its own path)."""

    name: str


def runtime_name(classifier: ProbabilityClassifier) -> str:
    """``"ensemble"``, ``"tfidf"``, or the class name of any other classifier."""
    if isinstance(classifier, EnsembleClassifier):
        return "ensemble"
    if isinstance(classifier, TfidfClassifier):
        return "tfidf"
    return type(classifier).__name__


class ProbabilityEngine:
    """Turn texts into single-label answers with a classifier's ``predict_proba``.

    Args:
        classifier: a loaded :class:`~headwise.intent.tfidf.TfidfClassifier` or
            :class:`~headwise.intent.ensemble.EnsembleClassifier` (any
            :class:`ProbabilityClassifier` works).
        threads: intra-op threads for the networks of an ensemble (0 keeps PyTorch's
            default; the setting is per process).
    """

    kind = "intent"

    def __init__(self, classifier: ProbabilityClassifier, *, threads: int = 0) -> None:
        if threads > 0:
            torch.set_num_threads(threads)
        self.classifier = classifier
        self.runtime = ClassifierRuntime(runtime_name(classifier))

    @property
    def labels(self) -> list[str]:
        """Intent names, index = class id."""
        return self.classifier.labels

    def encode(self, texts: Sequence[str]) -> list[TextItem]:
        """The texts as items for :meth:`run` (nothing is tokenised ahead)."""
        return [TextItem(t) for t in texts]

    def run(self, items: Sequence[TextItem]) -> list[np.ndarray]:
        """The micro-batcher's call: one calibrated probability row (intents,) per text."""
        return list(self.classifier.predict_proba([item.text for item in items]))

    def answer(self, texts: Sequence[str], items: Sequence[TextItem], probs: np.ndarray,
               *, top_k: int, threshold: float | None = None) -> list[dict]:
        """The response records (``schemas.Prediction`` fields) of texts from their
        probabilities (n, intents), from :meth:`run`; ``threshold`` overrides the
        classifier's out-of-scope threshold."""
        t = self.classifier.threshold if threshold is None else float(threshold)
        return prediction_records(texts, probs, self.labels, top_k=top_k, threshold=t,
                                  notes=[None] * len(texts))

    def predict(self, texts: Sequence[str], *, top_k: int = 3,
                threshold: float | None = None) -> list[dict]:
        """Run and answer in one call (unbatched inference)."""
        items = self.encode(texts)
        return self.answer(texts, items, np.stack(self.run(items)), top_k=top_k,
                           threshold=threshold)

    def warm_up(self, texts: Sequence[str]) -> None:
        """One pass over ``texts`` (first-call costs: feature tables, members' kernels)."""
        self.run(self.encode(texts))
