"""How a single-label classifier answers: the shared logic of networks, TF-IDF models and
ensembles.

:class:`ProbabilityClassifier` builds :meth:`~ProbabilityClassifier.predict` (the top
intents, out-of-scope below the threshold, or where an out-of-scope detector says so) on a
subclass's calibrated probabilities; :class:`CalibratedClassifier` gives those
probabilities from raw logits and a temperature. :func:`answers_from_probs` turns
probabilities into :class:`~headwise.intent.prediction.Prediction` answers (the service's
engines call it too);
:func:`check_answer_options` and :func:`check_texts` refuse bad calls the same way
everywhere.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from headwise.intent.decision.temperature import calibrated_probs
from headwise.intent.prediction import OutOfScopeScores, Prediction

if TYPE_CHECKING:
    from headwise.intent.decision.ood import OodDetector

__all__ = ["CalibratedClassifier", "ProbabilityClassifier", "answers_from_probs",
           "check_answer_options", "check_texts"]


class ProbabilityClassifier(ABC):
    """What every single-label classifier shares (networks, TF-IDF models, ensembles):
    ``labels``, an out-of-scope ``threshold``, ``info``, and :meth:`predict` built on the
    subclass's :meth:`predict_proba` (an abstract base: it is not instantiated itself).
    ``ood`` is the out-of-scope detector; None here (the top-probability rule): only a
    network (:class:`IntentClassifier`) can hold another."""

    labels: list[str]
    threshold: float
    info: dict[str, Any]
    ood: OodDetector | None = None

    @abstractmethod
    def predict_proba(self, texts: Sequence[str], *, batch_size: int = 64) -> np.ndarray:
        """Calibrated probabilities (n, intents)."""

    def predict(self, texts: Sequence[str] | str, *, top_k: int = 3,
                threshold: float | None = None, batch_size: int = 64
                ) -> list[Prediction]:
        """Top intents of each text, answering out-of-scope below the threshold.

        Args:
            texts: one text or a list.
            top_k: how many intents to list per text (capped at the number of intents).
            threshold: decide out-of-scope by the top probability at this threshold
                instead of the saved rule (0 never answers out-of-scope); each answer's
                ``decision`` names the score that decided.
            batch_size: texts per forward pass.

        Returns:
            One :class:`~headwise.intent.prediction.Prediction` per text, in input order.

        Raises:
            ValueError: an empty list or text, ``top_k < 1``, a threshold outside [0, 1].
            TypeError: a non-string item.
        """
        texts = [texts] if isinstance(texts, str) else texts
        check_answer_options(top_k, self.threshold if threshold is None else threshold)
        probs, scores = self.predict_proba_and_scores(texts, threshold=threshold,
                                                      batch_size=batch_size)
        return answers_from_probs(texts, probs, self.labels, top_k=top_k, scores=scores)

    def predict_proba_and_scores(self, texts: Sequence[str], *,
                                 threshold: float | None = None, batch_size: int = 64
                                 ) -> tuple[np.ndarray, OutOfScopeScores]:
        """Calibrated probabilities (n, intents) and the out-of-scope score that decides
        for each text: here the top probability against ``threshold`` (default: the saved
        one). :class:`IntentClassifier` uses its detector instead when it has one and no
        ``threshold`` is given.

        Raises:
            ValueError: a threshold outside [0, 1], an empty list or text; TypeError: a
                non-string item.
        """
        t = check_answer_options(1, self.threshold if threshold is None else threshold)
        probs = self.predict_proba(texts, batch_size=batch_size)
        return probs, OutOfScopeScores.top_probability(probs, t)


class CalibratedClassifier(ProbabilityClassifier):
    """A classifier with raw :meth:`logits` and a softmax ``temperature`` (calibration):
    :meth:`predict_proba` is ``softmax(logits / temperature)`` (abstract: subclasses give
    :meth:`logits`)."""

    temperature: float

    def _set_calibration(self, labels: Sequence[str], temperature: float,
                         threshold: float, info: dict[str, Any] | None) -> None:
        """Check and set ``labels`` (unique, as strings), ``temperature`` (> 0),
        ``threshold`` (in [0, 1]) and ``info``; ValueError otherwise."""
        labels = [str(x) for x in labels]
        if len(set(labels)) != len(labels):
            raise ValueError("intent labels must be unique")
        if not temperature > 0:
            raise ValueError(f"temperature must be positive, got {temperature}")
        if not 0.0 <= threshold <= 1.0:
            raise ValueError(f"threshold must be in [0, 1], got {threshold}")
        self.labels = labels
        self.temperature = float(temperature)
        self.threshold = float(threshold)
        self.info = dict(info or {})

    @abstractmethod
    def logits(self, texts: Sequence[str], *, batch_size: int = 64) -> np.ndarray:
        """Raw (uncalibrated) logits (n, intents) as float64."""

    def predict_proba(self, texts: Sequence[str], *, batch_size: int = 64) -> np.ndarray:
        """Calibrated probabilities (n, intents)."""
        return calibrated_probs(self.logits(texts, batch_size=batch_size), self.temperature)


def check_answer_options(top_k: int, threshold: float) -> float:
    """The threshold as a float, after checking ``top_k >= 1`` and ``0 <= threshold <= 1``.

    Raises:
        ValueError: either out of range.
    """
    if top_k < 1:
        raise ValueError(f"top_k must be at least 1, got {top_k}")
    t = float(threshold)
    if not 0.0 <= t <= 1.0:
        raise ValueError(f"threshold must be in [0, 1], got {t}")
    return t


def answers_from_probs(texts: Sequence[str], probs: np.ndarray, labels: Sequence[str], *,
                       top_k: int, scores: OutOfScopeScores) -> list[Prediction]:
    """One :class:`~headwise.intent.prediction.Prediction` per text from its calibrated
    probabilities (n, intents): the ``top_k`` intents best first, the top one answered
    unless ``scores`` (the top probability's or a detector's, with its threshold) rejects
    the text.

    Raises:
        ValueError: ``scores`` of another length than the texts.
    """
    k = min(top_k, len(labels))
    values = np.asarray(scores.values)
    if values.shape != (len(texts),):
        raise ValueError(f"scores must be ({len(texts)},), got shape {values.shape}")
    rejected = scores.rejected
    answers = []
    for i, (text, p) in enumerate(zip(texts, probs, strict=True)):
        best = np.argsort(-p, kind="stable")[:k]
        ranked = [(labels[j], float(p[j])) for j in best]
        oos = bool(rejected[i])
        answers.append(Prediction(text=text, intents=[] if oos else ranked[:1], top_k=ranked,
                                  out_of_scope=oos, decision=scores.decision(i)))
    return answers


def check_texts(texts: Sequence[str]) -> list[str]:
    """The texts as a list, checked: not empty, every item a non-blank string.

    Raises:
        ValueError: no texts, or a blank text; TypeError: a non-string item.
    """
    texts = list(texts)
    if not texts:
        raise ValueError("no texts given")
    for i, t in enumerate(texts):
        if not isinstance(t, str):
            raise TypeError(f"texts[{i}] is {type(t).__name__}, not str")
        if not t.strip():
            raise ValueError(f"texts[{i}] is empty")
    return texts
