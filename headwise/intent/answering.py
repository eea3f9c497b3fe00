"""How a single-label classifier answers: the shared logic of networks, TF-IDF models and
ensembles.

:class:`ProbabilityClassifier` builds :meth:`~ProbabilityClassifier.predict` (the top
intents, out-of-scope below the threshold, or where an out-of-scope detector says so) on a
subclass's calibrated probabilities; :class:`CalibratedClassifier` gives those
probabilities from raw logits and a temperature. :func:`answers_from_probs` turns
probabilities into :class:`IntentPrediction` answers (the service's engines call it too);
:func:`check_answer_options` and :func:`check_texts` refuse bad calls the same way
everywhere.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from headwise.intent.decision.temperature import calibrated_probs

if TYPE_CHECKING:
    from headwise.intent.decision.ood import OodDetector

__all__ = ["OUT_OF_SCOPE", "CalibratedClassifier", "IntentPrediction", "ProbabilityClassifier",
           "answers_from_probs", "check_answer_options", "check_texts"]

#: what ``predict`` answers when the top confidence is below the threshold
OUT_OF_SCOPE = "out_of_scope"


@dataclass(frozen=True)
class IntentPrediction:
    """One answer of :meth:`IntentClassifier.predict`.

    Attributes:
        text: the input text.
        intent: the top intent, or :data:`OUT_OF_SCOPE` when out-of-scope.
        confidence: calibrated probability of the top intent (even when out-of-scope).
        top_k: ``[(intent, probability), ...]`` best first.
        out_of_scope: whether the confidence fell below the threshold (or, for a
            classifier with an out-of-scope detector, the detector's score below its own).
    """

    text: str
    intent: str
    confidence: float
    top_k: list[tuple[str, float]] = field(default_factory=list)
    out_of_scope: bool = False

    def to_dict(self) -> dict[str, Any]:
        """A JSON-serialisable dict (``top_k`` as a list of ``{"intent", "confidence"}``)."""
        return {"text": self.text, "intent": self.intent,
                "confidence": round(self.confidence, 6), "out_of_scope": self.out_of_scope,
                "top_k": [{"intent": k, "confidence": round(p, 6)} for k, p in self.top_k]}


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
                ) -> list[IntentPrediction]:
        """Top intents of each text, answering out-of-scope below the threshold.

        Args:
            texts: one text or a list.
            top_k: how many intents to list per text (capped at the number of intents).
            threshold: override the saved threshold (0 never answers out-of-scope).
            batch_size: texts per forward pass.

        Returns:
            One :class:`IntentPrediction` per text, in input order.

        Raises:
            ValueError: an empty list or text, ``top_k < 1``, a threshold outside [0, 1].
            TypeError: a non-string item.
        """
        texts = [texts] if isinstance(texts, str) else texts
        t = check_answer_options(top_k, self.threshold if threshold is None else threshold)
        probs, rejected = self.predict_proba_and_reject(texts, threshold=threshold,
                                                        batch_size=batch_size)
        return answers_from_probs(texts, probs, self.labels, top_k=top_k, threshold=t,
                                  out_of_scope=rejected)

    def predict_proba_and_reject(self, texts: Sequence[str], *,
                                 threshold: float | None = None, batch_size: int = 64
                                 ) -> tuple[np.ndarray, np.ndarray]:
        """Calibrated probabilities (n, intents) and whether each text is out-of-scope
        (n,) bool: the top probability below ``threshold`` (default: the saved one).
        :class:`IntentClassifier` uses its detector instead when it has one and no
        ``threshold`` is given.

        Raises:
            ValueError: a threshold outside [0, 1], an empty list or text; TypeError: a
                non-string item.
        """
        t = check_answer_options(1, self.threshold if threshold is None else threshold)
        probs = self.predict_proba(texts, batch_size=batch_size)
        return probs, probs.max(1) < t


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
                       top_k: int, threshold: float, out_of_scope: np.ndarray | None = None
                       ) -> list[IntentPrediction]:
    """One :class:`IntentPrediction` per text from its calibrated probabilities (n, intents):
    the ``top_k`` intents best first, out-of-scope when the best is below ``threshold`` or,
    when ``out_of_scope`` (n,) bool is given (an out-of-scope detector's decision), where
    it is True (``threshold`` is then not used).

    Raises:
        ValueError: ``out_of_scope`` of another length than the texts.
    """
    k = min(top_k, len(labels))
    if out_of_scope is not None:
        out_of_scope = np.asarray(out_of_scope, dtype=bool)
        if out_of_scope.shape != (len(texts),):
            raise ValueError(f"out_of_scope must be ({len(texts)},) bool, got shape "
                             f"{out_of_scope.shape}")
    answers = []
    for i, (text, p) in enumerate(zip(texts, probs, strict=True)):
        best = np.argsort(-p, kind="stable")[:k]
        conf = float(p[best[0]])
        oos = conf < threshold if out_of_scope is None else bool(out_of_scope[i])
        answers.append(IntentPrediction(
            text=text, intent=OUT_OF_SCOPE if oos else labels[best[0]], confidence=conf,
            top_k=[(labels[j], float(p[j])) for j in best], out_of_scope=oos))
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
