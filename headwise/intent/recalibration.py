"""Calibrating a classifier on held-out labelled data: its temperature and its
out-of-scope threshold, with a before/after report.

Training does this on its validation split (:func:`calibrate_on_validation`). A classifier
can also be calibrated again later (:func:`recalibrate`, ``headwise calibrate``): one
trained with no validation data (``--no-valid``), a model soup (whose temperature is only
the mean of its members'), an ensemble (whose threshold is the mean of its members'), or
any model once a fresh sample of real traffic has been labelled. The temperature is fitted
on the in-scope rows (Guo et al. 2017, :func:`~headwise.intent.calibration.fit_temperature`)
and changes no prediction; the threshold is chosen as in :mod:`headwise.intent.oos`.
Ensembles average calibrated members and have no temperature of their own: only their
threshold is chosen.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
from sklearn.metrics import f1_score

from headwise.intent.calibration import calibrated_probs, fit_temperature
from headwise.intent.classifier import INTENT_FILE, CalibratedClassifier, ProbabilityClassifier
from headwise.intent.ensemble import ENSEMBLE_FILE
from headwise.intent.oos import ThresholdChoice, choose_threshold, is_oos_label
from headwise.intent.tfidf import TFIDF_FILE
from headwise.models.io import write_json_atomically
from headwise.train import expected_calibration_error


@dataclass(frozen=True)
class Recalibration:
    """What :func:`recalibrate` changed, measured on the data it was fitted on.

    Attributes:
        in_scope_rows: rows with an intent the classifier knows (temperature, metrics).
        oos_rows: out-of-scope rows (label ``oos`` ...; used for the threshold).
        unknown_rows: rows with an intent the classifier does not know (left out).
        accuracy, macro_f1: closed-set quality on the in-scope rows (no threshold).
        temperature_before, temperature_after: None for a classifier without one
            (an ensemble).
        nll_before, nll_after: mean negative log-likelihood of the gold intents.
        ece_before, ece_after: expected calibration error (15 bins) of the top intent.
        threshold_before: the out-of-scope threshold the classifier had.
        threshold: the new choice and what it does on these rows.
    """

    in_scope_rows: int
    oos_rows: int
    unknown_rows: int
    accuracy: float
    macro_f1: float
    temperature_before: float | None
    temperature_after: float | None
    nll_before: float
    nll_after: float
    ece_before: float
    ece_after: float
    threshold_before: float
    threshold: ThresholdChoice

    def to_dict(self) -> dict[str, Any]:
        """A JSON-serialisable dict."""
        return asdict(self)


def recalibrate(clf: ProbabilityClassifier, texts: Sequence[str],
                labels: Sequence[str | None], *, max_reject: float = 0.02) -> Recalibration:
    """Fit ``clf``'s temperature (when it has one) and choose its out-of-scope threshold on
    labelled held-out rows; both are set on ``clf`` (save it to keep them).

    Args:
        clf: a trained classifier (network, TF-IDF or ensemble).
        texts: held-out texts.
        labels: their intents; out-of-scope labels (``oos``, ...) count as out of scope,
            intents the classifier does not know are left out (and counted).
        max_reject: without out-of-scope rows, the largest share of in-scope rows the
            threshold may reject.

    Returns:
        The :class:`Recalibration` (measured on these same rows: the "after" numbers are
        optimistic by the one parameter fitted).

    Raises:
        ValueError: no row has an intent the classifier knows; mismatched lengths.
    """
    if len(texts) != len(labels):
        raise ValueError(f"{len(texts)} texts but {len(labels)} labels")
    index = {name: i for i, name in enumerate(clf.labels)}
    rows = [i for i, y in enumerate(labels) if y in index or is_oos_label(y)]
    gold = np.array([index.get(labels[i], -1) for i in rows], dtype=np.int64)
    oos = gold < 0
    ins = ~oos
    if not ins.any():
        raise ValueError(f"none of the {len(labels)} rows has an intent the classifier knows "
                         f"(it knows {len(clf.labels)}, e.g. {clf.labels[:3]})")
    chosen = [texts[i] for i in rows]
    before_t = clf.temperature if isinstance(clf, CalibratedClassifier) else None
    if before_t is not None:
        logits = clf.logits(chosen)
        before = calibrated_probs(logits, before_t)
        clf.temperature = fit_temperature(logits[ins], gold[ins])
        after = calibrated_probs(logits, clf.temperature)
    else:
        before = after = clf.predict_proba(chosen)
    pred = after.argmax(1)
    threshold_before = clf.threshold
    choice = choose_threshold(after.max(1), pred == gold, oos, max_reject=max_reject)
    clf.threshold = choice.threshold
    return Recalibration(
        in_scope_rows=int(ins.sum()), oos_rows=int(oos.sum()),
        unknown_rows=len(labels) - len(rows),
        accuracy=float((pred[ins] == gold[ins]).mean()),
        macro_f1=float(f1_score(gold[ins], pred[ins], average="macro", zero_division=0)),
        temperature_before=before_t,
        temperature_after=None if before_t is None else clf.temperature,
        nll_before=_nll(before[ins], gold[ins]), nll_after=_nll(after[ins], gold[ins]),
        ece_before=expected_calibration_error(before[ins], gold[ins]),
        ece_after=expected_calibration_error(after[ins], gold[ins]),
        threshold_before=threshold_before, threshold=choice)


def save_calibration(clf: ProbabilityClassifier, directory: str | Path) -> Path:
    """Write ``clf``'s temperature, threshold and info into the metadata file of the saved
    classifier in ``directory`` (``intent.json``, ``tfidf.json`` or ``ensemble.json``),
    atomically, leaving its weights untouched; returns the file.

    Raises:
        FileNotFoundError: no saved classifier in ``directory``.
        ValueError: the saved classifier's intents are not ``clf``'s.
    """
    directory = Path(directory)
    path = next((directory / f for f in (ENSEMBLE_FILE, TFIDF_FILE, INTENT_FILE)
                 if (directory / f).is_file()), None)
    if path is None:
        raise FileNotFoundError(f"{directory} holds no saved classifier")
    meta = json.loads(path.read_text(encoding="utf-8"))
    if "labels" in meta and meta["labels"] != list(clf.labels):
        raise ValueError(f"{path} is a classifier of other intents than the one calibrated")
    meta["threshold"], meta["info"] = clf.threshold, clf.info
    if isinstance(clf, CalibratedClassifier):
        meta["temperature"] = clf.temperature
    return write_json_atomically(path, meta)


def calibrate_on_validation(clf: CalibratedClassifier, texts: list[str],
                            labels: list[str | None], max_reject: float
                            ) -> tuple[ThresholdChoice, dict[str, float]]:
    """Training's calibration: :func:`recalibrate` on the validation rows, answering
    ``(choice, metrics)`` with the calibrated in-scope ``accuracy``, ``macro_f1`` and
    ``temperature``. Without usable rows (no validation data, or only intents the
    classifier does not know) nothing is fitted: the threshold is 0
    (:meth:`ThresholdChoice.none`, nothing rejected) and the metrics are empty.
    Out-of-scope rows without any in-scope one are an error (as in :func:`recalibrate`).
    """
    known = set(clf.labels)
    if not any(y in known or is_oos_label(y) for y in labels):
        clf.threshold = 0.0
        return ThresholdChoice.none(), {}
    r = recalibrate(clf, texts, labels, max_reject=max_reject)
    return r.threshold, {"accuracy": r.accuracy, "macro_f1": r.macro_f1,
                         "temperature": clf.temperature}


def _nll(probs: np.ndarray, gold: np.ndarray) -> float:
    """Mean negative log-likelihood of the gold classes."""
    return float(-np.log(np.clip(probs[np.arange(len(gold)), gold], 1e-300, None)).mean())
