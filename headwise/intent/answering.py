"""How a single-label classifier answers: the shared logic of networks, TF-IDF models and
ensembles.

:class:`ProbabilityClassifier` builds :meth:`~ProbabilityClassifier.predict` (the top
intents, out-of-scope below the threshold, or where an out-of-scope detector says so) on a
subclass's calibrated probabilities, through the predictor every path runs
(:class:`~headwise.intent.inference.proba.ProbabilityPredictor`; a network's own,
:class:`~headwise.intent.inference.single.SingleLabelPredictor`, for
:class:`~headwise.intent.classifier.IntentClassifier`); :class:`CalibratedClassifier`
gives those probabilities from raw logits and a temperature.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from headwise.intent.decision.temperature import calibrated_probs
from headwise.intent.inference.proba import ProbabilityPredictor
from headwise.intent.prediction import OutOfScopeScores, Prediction, check_answer_options

if TYPE_CHECKING:
    from headwise.intent.decision.ood import OodDetector

__all__ = ["CalibratedClassifier", "ProbabilityClassifier"]


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
        return ProbabilityPredictor(self, batch_size=batch_size).predictions(
            texts, top_k=top_k, threshold=threshold)[0]

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
        check_answer_options(1, self.threshold if threshold is None else threshold)
        predictor = ProbabilityPredictor(self, batch_size=batch_size)
        return predictor.probs_and_scores(predictor.run(predictor.encode(texts)),
                                          threshold=threshold)


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
