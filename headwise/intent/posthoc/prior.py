"""Prior correction (logit adjustment): decisions for macro-averaged scores.

A classifier trained with cross-entropy estimates P(intent | text), and that carries the
training prior P(intent): on imbalanced intents it leans towards the frequent ones, and
strong regularisation (what noisy labels call for) leans further. Macro-F1, the usual score
of intent benchmarks such as DataCLUE CIC, weighs every intent equally. Subtracting
``tau * log P(intent)`` from the logits (Menon et al. 2021, "Long-tail learning via logit
adjustment") moves the decisions towards the rare intents: ``tau = 1`` is the optimum for
the balanced error under a clean prior; for macro-F1 and noisy labels :func:`choose_tau`
picks ``tau`` on held-out predictions.

:func:`apply_prior_correction` folds the adjustment into the classifier's own bias (the
TF-IDF model's intercept, the network head's bias), so every path that reads the logits
(``predict``, the ONNX export, serving, ensembles) makes the corrected decisions, and the
temperature calibrated afterwards calibrates the corrected logits.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from headwise.intent.classifier import IntentClassifier
from headwise.intent.tfidf import TfidfClassifier

__all__ = ["TAUS", "TauChoice", "apply_prior_correction", "choose_tau", "correct_on_validation",
           "log_prior"]

#: the strengths :func:`choose_tau` tries by default
TAUS = tuple(float(t) for t in np.round(np.arange(0.0, 1.5001, 0.125), 3))


def log_prior(labels: Sequence[str], intents: Sequence[str]) -> np.ndarray:
    """``log P(intent)`` (intents,) from the training labels, add-one smoothed (an intent
    with no training example gets the weight of one)."""
    counts = Counter(str(y) for y in labels)
    n = np.array([counts.get(str(i), 0) + 1.0 for i in intents])
    return np.log(n / n.sum())


def macro_f1(gold: np.ndarray, pred: np.ndarray) -> float:
    """Macro-F1 over the intents present in ``gold`` or ``pred`` (scikit-learn's)."""
    from sklearn.metrics import f1_score

    return float(f1_score(gold, pred, average="macro", zero_division=0))


@dataclass(frozen=True)
class TauChoice:
    """The chosen correction strength.

    Attributes:
        tau: the strength with the best held-out macro-F1 (the smallest on a tie).
        scores: held-out macro-F1 for each strength tried.
        rows: held-out rows it was chosen on.
    """

    tau: float
    scores: dict[float, float]
    rows: int

    def to_dict(self) -> dict:
        """A JSON-ready summary."""
        return {"tau": self.tau, "rows": self.rows,
                "macro_f1": {str(t): round(f, 4) for t, f in self.scores.items()}}


def choose_tau(logits: np.ndarray, gold: Sequence[int], prior: np.ndarray, *,
               taus: Sequence[float] = TAUS) -> TauChoice:
    """The ``tau`` whose corrected decisions ``argmax(logits - tau * prior)`` score the best
    macro-F1 against ``gold``.

    Args:
        logits: held-out logits or log-probabilities (n, intents) (out-of-fold or
            validation predictions: never the rows the model was fitted on).
        gold: their intent indices (n,).
        prior: :func:`log_prior` of the training labels (intents,).
        taus: the strengths to try (each >= 0).

    Raises:
        ValueError: mismatched shapes, no rows, no strengths or a negative one.
    """
    logits, gold = np.asarray(logits, np.float64), np.asarray(gold)
    if logits.ndim != 2 or logits.shape[0] != len(gold) or logits.shape[1] != len(prior):
        raise ValueError(f"logits {logits.shape} do not fit {len(gold)} labels and "
                         f"{len(prior)} intents")
    if not len(gold):
        raise ValueError("choosing a prior correction needs held-out rows")
    if not taus or min(taus) < 0:
        raise ValueError(f"taus must be non-empty and >= 0, got {list(taus)}")
    scores = {float(t): macro_f1(gold, (logits - t * prior).argmax(1)) for t in taus}
    best = max(scores.values())
    return TauChoice(min(t for t, f in scores.items() if f == best), scores, len(gold))


def apply_prior_correction(classifier: TfidfClassifier | IntentClassifier,
                           prior: np.ndarray, tau: float) -> dict:
    """Subtract ``tau * prior`` from the classifier's logits, in place, by folding it into
    its bias; records and returns ``info["prior_correction"]`` (``tau`` and the prior).

    Raises:
        TypeError: a classifier without a biased linear head (``model.classifier``).
        ValueError: a prior that does not fit the intents, or a negative ``tau``.
    """
    prior = np.asarray(prior, np.float64)
    if prior.shape != (len(classifier.labels),):
        raise ValueError(f"prior {prior.shape} does not fit {len(classifier.labels)} intents")
    if tau < 0:
        raise ValueError(f"tau must be >= 0, got {tau}")
    shift = -float(tau) * prior
    if isinstance(classifier, TfidfClassifier):
        classifier.intercept = classifier.intercept + shift
    else:
        head = getattr(getattr(classifier, "model", None), "classifier", None)
        if not isinstance(head, nn.Linear) or head.bias is None:
            raise TypeError(f"{type(classifier).__name__} has no biased linear head "
                            f"(model.classifier) to fold a prior correction into")
        with torch.no_grad():
            head.bias.add_(torch.as_tensor(shift, dtype=head.bias.dtype,
                                           device=head.bias.device))
    record = {"tau": float(tau), "log_prior": [round(float(p), 6) for p in prior]}
    classifier.info["prior_correction"] = record
    return record


def correct_on_validation(classifier: TfidfClassifier | IntentClassifier,
                          train_labels: Sequence[str], valid_texts: Sequence[str],
                          valid_labels: Sequence[str], setting: str | float) -> dict | None:
    """A recipe's ``decision.prior_correction`` for a trained network: ``"none"`` does
    nothing (None); a number is a fixed ``tau``; ``"auto"`` chooses ``tau`` on the
    validation rows of known intents (:func:`choose_tau`). Returns the
    ``info["prior_correction"]`` record (with the choice's scores under ``"choice"`` for
    ``"auto"``).

    Raises:
        ValueError: ``"auto"`` with no validation row of a known intent.
    """
    if setting == "none":
        return None
    prior = log_prior(train_labels, classifier.labels)
    if setting != "auto":
        return apply_prior_correction(classifier, prior, float(setting))
    index = {name: i for i, name in enumerate(classifier.labels)}
    known = [i for i, y in enumerate(valid_labels) if y in index]
    if not known:
        raise ValueError("prior_correction='auto' chooses tau on validation data, and no "
                         "validation row has a known intent")
    choice = choose_tau(classifier.logits([valid_texts[i] for i in known]),
                        [index[valid_labels[i]] for i in known], prior)
    record = apply_prior_correction(classifier, prior, choice.tau)
    record["choice"] = choice.to_dict()
    return record
