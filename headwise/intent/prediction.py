"""The one answer of every classifier kind: :class:`Prediction`.

A single-label model (a network, a TF-IDF model, an ensemble, a soup, a distilled student)
and a compound model (several intents and slots) answer a text the same way:

* ``intents``: the intents it answers, best first, each with its calibrated confidence:
  one for a single-label model, zero or more for a multi-label one, none when the text is
  out of scope;
* ``out_of_scope``: whether it rejected the text;
* ``decision``: which score decided that (the top probability, an out-of-scope detector's
  score, or the intents' own thresholds), its value and the threshold below which it
  rejects, so that a rejection can be understood;
* ``slots``: the slot spans with normalised values (empty where the model has no slot head);
* ``top_k``: the most probable intents whether answered or not.

``headwise predict --json``, the file stream and ``/v1/predict`` write
:meth:`Prediction.to_dict`. :func:`answers_from_probs` builds a single-label model's
answers from its calibrated probabilities; :func:`check_answer_options` and
:func:`check_texts` refuse bad calls the same way everywhere.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from headwise.text.dataset import SlotSpan

__all__ = ["OUT_OF_SCOPE", "OutOfScopeDecision", "OutOfScopeScores", "Prediction",
           "answers_from_probs", "check_answer_options", "check_texts"]

#: what :attr:`Prediction.intent` names when the text is out of scope
OUT_OF_SCOPE = "out_of_scope"

#: the score of a compound model's decision: the most probable intent relative to its own
#: threshold (out of scope when no intent reaches its threshold)
INTENT_THRESHOLD = "intent_threshold"
#: the score of the top-probability rule
MAX_PROB = "max_prob"


def _round(x: float, digits: int | None) -> float:
    return float(x) if digits is None else round(float(x), digits)


@dataclass(frozen=True)
class OutOfScopeDecision:
    """The score that decided whether one text is out of scope.

    Attributes:
        score: its name: ``"max_prob"`` (the top calibrated probability), an out-of-scope
            detector's name (``"energy"``, ``"mahalanobis"``, ``"knn:5"`` ...), or
            ``"intent_threshold"`` (a multi-label model: the intent nearest to its own
            threshold, whose probability and threshold are ``value`` and ``threshold``).
        value: the text's score (higher means more in scope).
        threshold: the text is out of scope when ``value < threshold``.
    """

    score: str
    value: float
    threshold: float

    @property
    def rejects(self) -> bool:
        """Whether this decision makes the text out of scope."""
        return self.value < self.threshold

    def to_dict(self, digits: int | None = 6) -> dict[str, Any]:
        """``{"score", "value", "threshold"}``, numbers rounded to ``digits`` (None: not)."""
        return {"score": self.score, "value": _round(self.value, digits),
                "threshold": _round(self.threshold, digits)}


@dataclass(frozen=True)
class OutOfScopeScores:
    """One score for a batch of texts and its threshold: what decides out-of-scope.

    Attributes:
        score: the score's name (as :attr:`OutOfScopeDecision.score`).
        values: (n,) float64, one per text, higher = more in scope.
        threshold: a text is out of scope when its value is below it.
    """

    score: str
    values: np.ndarray
    threshold: float

    @classmethod
    def top_probability(cls, probs: np.ndarray, threshold: float) -> OutOfScopeScores:
        """The top-probability rule over calibrated probabilities (n, intents)."""
        probs = np.asarray(probs, dtype=np.float64)
        values = probs.max(1) if probs.shape[0] else np.zeros(0)
        return cls(MAX_PROB, values, float(threshold))

    @classmethod
    def of_detector(cls, detector: Any, features: np.ndarray | None,
                    logits: np.ndarray | None) -> OutOfScopeScores:
        """An out-of-scope detector's scores (:mod:`headwise.intent.decision.ood`) of
        the rows it reads (pooled ``features`` where it needs them, and ``logits``), at
        its chosen threshold.

        Raises:
            RuntimeError: the detector has no threshold yet.
        """
        if detector.threshold is None:
            raise RuntimeError(f"the {detector.name} detector has no threshold yet: choose "
                               f"one on validation data (choose_score_threshold)")
        values = detector.score(features if detector.needs_features else None, logits)
        return cls(detector.name, np.asarray(values, dtype=np.float64),
                   float(detector.threshold))

    @property
    def rejected(self) -> np.ndarray:
        """(n,) bool: which texts are out of scope."""
        return np.asarray(self.values) < self.threshold

    def decision(self, i: int) -> OutOfScopeDecision:
        """The decision for text ``i``."""
        return OutOfScopeDecision(self.score, float(self.values[i]), self.threshold)


@dataclass(frozen=True)
class Prediction:
    """One answer of any classifier kind (see the module's docstring).

    Attributes:
        text: the input text.
        intents: ``(intent, confidence)`` of every answered intent, best first; empty when
            out of scope.
        top_k: ``(intent, confidence)`` of the most probable intents, answered or not.
        out_of_scope: whether the text was rejected.
        slots: slot spans in text order, with normalised values (None where a span does
            not parse as its slot's kind); empty for a model without a slot head.
        decision: the score that decided ``out_of_scope``; None only for a model that
            has no out-of-scope rule.
    """

    text: str
    intents: list[tuple[str, float]]
    top_k: list[tuple[str, float]]
    out_of_scope: bool
    slots: list[SlotSpan] = field(default_factory=list)
    decision: OutOfScopeDecision | None = None

    @property
    def intent(self) -> str:
        """The best answered intent, or :data:`OUT_OF_SCOPE`."""
        return self.intents[0][0] if self.intents else OUT_OF_SCOPE

    @property
    def confidence(self) -> float:
        """The calibrated confidence of the most probable intent (answered or not)."""
        return self.top_k[0][1] if self.top_k else 0.0

    def to_dict(self, digits: int | None = 6) -> dict[str, Any]:
        """The JSON answer: ``text``, ``intents`` and ``top_k`` (lists of ``{"intent",
        "confidence"}``), ``out_of_scope``, ``slots`` (``{"name", "start", "end", "text",
        "value"}``) and ``decision`` (``{"score", "value", "threshold"}`` or None);
        confidences rounded to ``digits`` (None: not rounded)."""
        return {
            "text": self.text,
            "intents": [{"intent": k, "confidence": _round(p, digits)} for k, p in self.intents],
            "out_of_scope": self.out_of_scope,
            "slots": [{"name": s.name, "start": s.start, "end": s.end, "text": s.text,
                       "value": s.value} for s in self.slots],
            "top_k": [{"intent": k, "confidence": _round(p, digits)} for k, p in self.top_k],
            "decision": None if self.decision is None else self.decision.to_dict(digits),
        }


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
