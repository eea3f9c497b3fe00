"""An ensemble of intent classifiers: their calibrated probabilities averaged.

Several classifiers trained on the same intents -- the same recipe with different seeds
(each also holds out a different validation split), or different kinds of model, such as a
network next to a :class:`~headwise.intent.tfidf.TfidfClassifier` -- make different
mistakes; the mean of their calibrated probabilities is more accurate than any one of them,
at the cost of one forward pass per member. :class:`EnsembleClassifier` has the inference
interface of :class:`~headwise.intent.classifier.IntentClassifier` (``labels``, ``threshold``,
``predict_proba``, ``predict``), so :func:`~headwise.intent.evaluation.evaluate_classifier`
and :func:`~headwise.intent.evaluation.measure_latency` take it as they are.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from headwise.intent.classifier import IntentClassifier, ProbabilityClassifier
from headwise.intent.tfidf import TFIDF_FILE, TfidfClassifier
from headwise.models.io import write_json_atomically

#: what an ensemble may hold: anything with calibrated ``predict_proba`` over ``labels``
Member = IntentClassifier | TfidfClassifier

__all__ = ["ENSEMBLE_FILE", "EnsembleClassifier", "load_classifier"]

#: the file that marks a saved ensemble directory (members in ``member-<i>/``)
ENSEMBLE_FILE = "ensemble.json"


class EnsembleClassifier(ProbabilityClassifier):
    """The mean of several intent classifiers' calibrated probabilities.

    Args:
        members: classifiers (networks or TF-IDF models) over the same intents, in the
            same order.
        threshold: the out-of-scope threshold on the averaged top probability (default:
            the members' mean threshold).
        info: free-form summary saved with the ensemble.

    Raises:
        ValueError: fewer than two members, members with different intents, or a threshold
            outside [0, 1].
    """

    def __init__(self, members: Sequence[Member], *, threshold: float | None = None,
                 info: dict[str, Any] | None = None) -> None:
        members = list(members)
        if len(members) < 2:
            raise ValueError(f"an ensemble needs at least two members, got {len(members)}")
        labels = members[0].labels
        for i, m in enumerate(members[1:], 1):
            if m.labels != labels:
                raise ValueError(f"member {i} has other intents (or another order) than "
                                 f"member 0")
        t = float(np.mean([m.threshold for m in members])) if threshold is None \
            else float(threshold)
        if not 0.0 <= t <= 1.0:
            raise ValueError(f"threshold must be in [0, 1], got {t}")
        self.members = members
        self.labels = list(labels)
        self.threshold = t
        self.info = dict(info or {})

    def predict_proba(self, texts: Sequence[str], *, batch_size: int = 64) -> np.ndarray:
        """The members' calibrated probabilities (n, intents), averaged."""
        return np.mean([m.predict_proba(texts, batch_size=batch_size) for m in self.members],
                       axis=0)

    def save(self, directory: str | Path) -> Path:
        """Write each member to ``directory/member-<i>`` and ``ensemble.json`` last."""
        directory = Path(directory)
        for i, m in enumerate(self.members):
            m.save(directory / f"member-{i}")
        write_json_atomically(directory / ENSEMBLE_FILE, {
            "format": "headwise-ensemble", "version": 1, "members": len(self.members),
            "threshold": self.threshold, "info": self.info})
        return directory

    @classmethod
    def load(cls, directory: str | Path) -> EnsembleClassifier:
        """Load a directory written by :meth:`save`.

        Raises:
            FileNotFoundError: no ``ensemble.json`` or a missing member.
            ValueError: an invalid ``ensemble.json``, or as the constructor.
        """
        directory = Path(directory)
        path = directory / ENSEMBLE_FILE
        if not path.is_file():
            raise FileNotFoundError(f"{directory} has no {ENSEMBLE_FILE}: not a saved ensemble")
        try:
            meta = json.loads(path.read_text(encoding="utf-8"))
            count = int(meta["members"])
        except (json.JSONDecodeError, KeyError, TypeError, ValueError) as e:
            raise ValueError(f"{path} is not a valid ensemble file: {e}") from e
        members = [load_classifier(directory / f"member-{i}") for i in range(count)]
        return cls(members, threshold=meta.get("threshold"), info=meta.get("info"))

    def __repr__(self) -> str:
        return (f"EnsembleClassifier({len(self.members)} members, {len(self.labels)} intents, "
                f"threshold={self.threshold:.3g})")


def load_classifier(directory: str | Path
                    ) -> IntentClassifier | TfidfClassifier | EnsembleClassifier:
    """Whatever single-label classifier ``directory`` holds: an ensemble (``ensemble.json``),
    a TF-IDF classifier (``tfidf.json``) or a network (``intent.json``).

    Raises:
        FileNotFoundError, ValueError: as the matching ``load``.
    """
    directory = Path(directory)
    if (directory / ENSEMBLE_FILE).is_file():
        return EnsembleClassifier.load(directory)
    if (directory / TFIDF_FILE).is_file():
        return TfidfClassifier.load(directory)
    return IntentClassifier.load(directory)
