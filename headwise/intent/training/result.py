"""What a training run returns, for every task: :class:`TrainedIntent`."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from headwise.intent.compound.thresholds import Thresholds
from headwise.intent.decision.oos import ThresholdChoice

__all__ = ["TrainedIntent"]


@dataclass
class TrainedIntent:
    """What :func:`~headwise.intent.training.pipeline.train_intent_classifier` returns.

    Attributes:
        classifier: the trained, calibrated classifier (also saved in ``directory``): with
            ``blend="tfidf"`` the network's weighted ensemble with a TF-IDF model, unless
            validation chose the network alone; a compound classifier for a multi-label
            recipe.
        directory: where it was saved.
        threshold: how the classifier decides out of scope: for a single-label one, the
            out-of-scope threshold and its effect on validation data (the stored detector's,
            its ``score``, when one decides, else the top probability's); for a multi-label
            one, the tuned per-intent :class:`~headwise.intent.compound.thresholds.Thresholds`.
        valid_metrics: validation metrics: accuracy and macro-F1 (in-scope, no threshold)
            for a single-label classifier; intent micro/macro-F1 and exact match with the
            thresholds for a multi-label one.
        history: the Trainer's evaluation history.
        train_seconds: wall time of training (calibration excluded).
    """

    classifier: Any
    directory: Path
    threshold: ThresholdChoice | Thresholds
    valid_metrics: dict[str, Any]
    history: list[dict[str, Any]]
    train_seconds: float
