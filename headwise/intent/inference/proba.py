"""The predictor of a classifier that is not one network: a TF-IDF model or an ensemble.

:class:`ProbabilityPredictor` answers with the classifier's own calibrated probabilities
(:meth:`ProbabilityClassifier.predict_proba
<headwise.intent.answering.ProbabilityClassifier.predict_proba>`), gathered into batches
by the service's micro-batcher like a network's texts; ``classifier.predict`` is this
predictor's answers. A TF-IDF model reads a text whole; a network inside an ensemble
truncates it at its own maximum length, as ``predict`` does. So only the ``"truncate"``
long-text policy applies: an answer's ``long_text`` note reports a text that a network of
the ensemble cut (its token count and maximum length; the network that cut the most when
several did), and is null for a TF-IDF model. There is no ONNX path and no attention to
explain.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from headwise.intent.inference.bucketing import long_text_note
from headwise.intent.inference.predictor import Predictor
from headwise.intent.prediction import OutOfScopeScores, Prediction, answers_from_probs

__all__ = ["ClassifierRuntime", "ProbabilityPredictor", "TextItem", "runtime_name"]


@dataclass(frozen=True)
class TextItem:
    """One text as a :class:`ProbabilityPredictor` reads it: the text whole, and, when a network
    of an ensemble truncates it, ``policy`` ``"truncated"`` with that network's token count
    (special tokens included) and maximum length (as in an
    :class:`~headwise.intent.inference.bucketing.EncodedText`)."""

    text: str
    policy: str | None = None
    tokens: int = 0
    max_length: int = 0

    def note(self) -> dict | None:
        """The response's ``long_text`` record (None when no network cut the text)."""
        return long_text_note(self.policy, self.tokens, self.max_length, 1)


@dataclass(frozen=True)
class ClassifierRuntime:
    """What the service reports as the runtime (:func:`runtime_name`): ``"tfidf"``
    (scikit-learn features and numpy) or ``"ensemble"`` (each member on its own path)."""

    name: str


def runtime_name(classifier: Any) -> str:
    """The name of the classifier's kind (``"ensemble"``, ``"tfidf"``, a registered kind's
    name; :mod:`headwise.intent.kinds`), or its class name when it is of no registered
    kind."""
    from headwise.intent.kinds import kind_of_classifier

    try:
        return kind_of_classifier(classifier).name
    except TypeError:
        return type(classifier).__name__


class ProbabilityPredictor(Predictor):
    """Turn texts into single-label answers with a classifier's ``predict_proba``.

    Args:
        classifier: a loaded :class:`~headwise.intent.tfidf.TfidfClassifier` or
            :class:`~headwise.intent.ensemble.EnsembleClassifier` (any
            :class:`~headwise.intent.answering.ProbabilityClassifier` works).
        threads: intra-op threads for the networks of an ensemble (0 keeps PyTorch's
            default; the setting is per process).
        batch_size: texts per forward pass of the networks of an ensemble.
    """

    task = "single_label"

    def __init__(self, classifier: Any, *, threads: int = 0, batch_size: int = 64) -> None:
        if batch_size < 1:
            raise ValueError(f"batch_size must be at least 1, got {batch_size}")
        self.batch_size = batch_size
        if threads > 0:
            torch.set_num_threads(threads)
        self.classifier = classifier
        self.runtime = ClassifierRuntime(runtime_name(classifier))
        # the networks of an ensemble: the members that tokenize (and so truncate) texts
        self._networks = [m for m in getattr(classifier, "members", [])
                          if hasattr(m, "tokenizer") and hasattr(m, "max_length")]

    @property
    def labels(self) -> list[str]:
        """Intent names, index = class id."""
        return self.classifier.labels

    def encode(self, texts: Sequence[str]) -> list[TextItem]:
        """The texts as items for :meth:`run`; each network of an ensemble counts the
        tokens of each text, and a text over a network's maximum length is marked
        ``"truncated"`` (the network with the largest excess names the counts)."""
        texts = list(texts)
        items = [TextItem(t) for t in texts]
        for net in self._networks:
            for i, n in enumerate(net.tokenizer.lengths(texts)):
                old = items[i]
                if n > net.max_length and (old.policy is None
                                           or n - net.max_length > old.tokens - old.max_length):
                    items[i] = TextItem(texts[i], "truncated", int(n), net.max_length)
        return items

    def run(self, items: Sequence[TextItem]) -> list[np.ndarray]:
        """The micro-batcher's call: one calibrated probability row (intents,) per text."""
        return list(self.classifier.predict_proba([item.text for item in items],
                                                  batch_size=self.batch_size))

    def note(self, item: TextItem, row: Any = None) -> dict | None:
        """The ``long_text`` note of an item (:meth:`TextItem.note`; ``row`` is not
        read)."""
        return item.note()

    def probs_and_scores(self, rows: Any, *, threshold: float | None = None
                         ) -> tuple[np.ndarray, OutOfScopeScores]:
        """The probabilities (n, intents) of :meth:`run`'s rows and the out-of-scope
        scores that decide: the top probability against ``threshold`` (default: the
        classifier's)."""
        probs = np.asarray(rows, dtype=np.float64)
        t = self.classifier.threshold if threshold is None else float(threshold)
        return probs, OutOfScopeScores.top_probability(probs, t)

    def decide(self, texts: Sequence[str], items: Sequence[TextItem], rows: Any, *,
               top_k: int, threshold: float | None, **options: Any) -> list[Prediction]:
        """Single-label answers from :meth:`run`'s probability rows (out of scope as
        :meth:`probs_and_scores` decides)."""
        probs, scores = self.probs_and_scores(rows, threshold=threshold)
        return answers_from_probs(texts, probs, self.labels, top_k=top_k, scores=scores)
