"""An ensemble of intent classifiers: their calibrated probabilities averaged.

Several classifiers trained on the same intents -- the same recipe with different seeds
(each also holds out a different validation split), or different kinds of model, such as a
network next to a :class:`~headwise.intent.tfidf.TfidfClassifier` -- make different
mistakes; the mean of their calibrated probabilities is more accurate than any one of them,
at the cost of one forward pass per member. :class:`EnsembleClassifier` has the inference
interface of :class:`~headwise.intent.classifier.IntentClassifier` (``labels``, ``threshold``,
``predict_proba``, ``predict``), so :func:`~headwise.intent.evaluation.evaluate` and
:func:`~headwise.intent.latency.measure_latency` take it as they are.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from headwise.intent.answering import ProbabilityClassifier
from headwise.intent.classifier import IntentClassifier
from headwise.intent.kinds import ENSEMBLE, load_single_label
from headwise.intent.tfidf import TfidfClassifier
from headwise.models.io import write_json_atomically

#: what an ensemble may hold: anything with calibrated ``predict_proba`` over ``labels``
Member = IntentClassifier | TfidfClassifier

__all__ = ["ENSEMBLE_FILE", "EnsembleClassifier", "check_weights"]

#: the file that marks a saved ensemble directory (members in ``member-<i>/``)
ENSEMBLE_FILE = ENSEMBLE.marker  # "ensemble.json"
#: its format version: 2 added the members' ``weights`` (version 1 files: equal shares)
VERSION = 2


class EnsembleClassifier(ProbabilityClassifier):
    """The (weighted) mean of several intent classifiers' calibrated probabilities.

    Args:
        members: classifiers (networks or TF-IDF models) over the same intents, in the
            same order.
        threshold: the out-of-scope threshold on the averaged top probability (default:
            the members' mean threshold).
        info: free-form summary saved with the ensemble.
        weights: each member's share of the mean, non-negative and summing to 1 (default:
            equal shares; :func:`headwise.intent.training.blending.blend_with_tfidf` chooses them on
            validation data).

    Raises:
        ValueError: fewer than two members, members with different intents, a threshold
            outside [0, 1], or weights that are not one non-negative share per member
            summing to 1.
    """

    def __init__(self, members: Sequence[Member], *, threshold: float | None = None,
                 info: dict[str, Any] | None = None,
                 weights: Sequence[float] | None = None) -> None:
        members = list(members)
        if len(members) < 2:
            raise ValueError(f"an ensemble needs at least two members, got {len(members)}")
        self.weights = check_weights(weights, len(members))
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
        """The members' calibrated probabilities (n, intents), averaged with ``weights``."""
        return np.tensordot(self.weights, np.stack(
            [m.predict_proba(texts, batch_size=batch_size) for m in self.members]), axes=1)

    def save(self, directory: str | Path) -> Path:
        """Write each member to ``directory/member-<i>`` and ``ensemble.json`` last."""
        directory = Path(directory)
        for i, m in enumerate(self.members):
            m.save(directory / f"member-{i}")
        write_json_atomically(directory / ENSEMBLE_FILE, {
            "format": "headwise-ensemble", "version": VERSION, "members": len(self.members),
            "threshold": self.threshold, "weights": self.weights.tolist(), "info": self.info})
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
            version = int(meta.get("version", 1))
        except (json.JSONDecodeError, KeyError, TypeError, ValueError) as e:
            raise ValueError(f"{path} is not a valid ensemble file: {e}") from e
        if version > VERSION:
            raise ValueError(f"{path} is an ensemble file of version {version}, newer than "
                             f"this headwise reads ({VERSION}): upgrade headwise")
        members = [load_single_label(directory / f"member-{i}") for i in range(count)]
        return cls(members, threshold=meta.get("threshold"), info=meta.get("info"),
                   weights=meta.get("weights"))  # None in files written before weights

    def __repr__(self) -> str:
        shares = "" if np.allclose(self.weights, self.weights[0]) else \
            ", weights=[" + ", ".join(f"{w:.3g}" for w in self.weights) + "]"
        return (f"EnsembleClassifier({len(self.members)} members, {len(self.labels)} intents, "
                f"threshold={self.threshold:.3g}{shares})")


def check_weights(weights: Sequence[float] | None, members: int) -> np.ndarray:
    """``weights`` as a float64 array of one share per member (equal shares for None).

    Raises:
        ValueError: another count than ``members``, a negative or non-finite share, or a
            sum other than 1 (to 1e-6).
    """
    if weights is None:
        return np.full(members, 1.0 / members)
    w = np.asarray(weights, dtype=np.float64)
    if w.shape != (members,):
        raise ValueError(f"weights must hold one share per member ({members}), got "
                         f"{list(np.atleast_1d(w))}")
    if not np.isfinite(w).all() or (w < 0).any() or abs(w.sum() - 1.0) > 1e-6:
        raise ValueError(f"weights must be non-negative shares summing to 1, got {w.tolist()}")
    return w
