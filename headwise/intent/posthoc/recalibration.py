"""Calibrating a classifier on held-out labelled data: its temperature and its
out-of-scope threshold, with a before/after report.

Training does this on its validation split (:func:`calibrate_on_validation`). A classifier
can also be calibrated again later (:func:`recalibrate`, ``headwise calibrate``): one
trained with no validation data (``--no-valid``), a model soup (whose temperature is only
the mean of its members'), an ensemble (whose threshold is the mean of its members'), or
any model once a fresh sample of real traffic has been labelled. The temperature is fitted
on the in-scope rows (Guo et al. 2017,
:func:`~headwise.intent.decision.temperature.fit_temperature`) and changes no prediction;
the threshold is chosen as in :mod:`headwise.intent.decision.oos`. Ensembles average
calibrated members and have no temperature of their own: only their threshold is chosen.

A network classifier may hold an out-of-scope detector (:mod:`headwise.intent.decision.ood`):
:func:`fit_ood_detector` fits one on the training rows and chooses its threshold on the
validation rows (training's last step, recipe ``decision.ood_detector``); :func:`recalibrate`
chooses the stored detector's threshold again, on the same rows as the temperature.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
from sklearn.metrics import f1_score

from headwise.intent.answering import CalibratedClassifier, ProbabilityClassifier
from headwise.intent.classifier import IntentClassifier
from headwise.intent.decision.ood import OodDetector, make_detector, save_detector, selection
from headwise.intent.decision.ood.selection import (
    AUTO,
    AUTO_CANDIDATES,
    balanced_mean,
    select_detector,
)
from headwise.intent.decision.oos import (
    REJECT_CONFIDENCE,
    ThresholdChoice,
    choose_score_threshold,
    choose_threshold,
)
from headwise.intent.decision.temperature import calibrated_probs, fit_temperature
from headwise.intent.kinds import metadata_path
from headwise.models.io import write_json_atomically
from headwise.text.labels import is_oos_label
from headwise.train import expected_calibration_error

#: fewer in-scope validation rows than this make training's calibration rough: the
#: temperature is then never fitted below 1 (see :func:`calibrate_on_validation`)
MIN_CALIBRATION_ROWS = 30


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
        ood_threshold_before: the threshold of the classifier's out-of-scope detector
            before (None without a detector).
        ood: the detector's new threshold choice (None without a detector); it, not
            ``threshold``, decides the classifier's out-of-scope answers.
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
    ood_threshold_before: float | None = None
    ood: ThresholdChoice | None = None

    def to_dict(self) -> dict[str, Any]:
        """A JSON-serialisable dict."""
        return asdict(self)


def recalibrate(clf: ProbabilityClassifier, texts: Sequence[str],
                labels: Sequence[str | None], *, max_reject: float = 0.02,
                temperature: bool = True, reject_budget: float | None = None,
                reject_confidence: float | None = REJECT_CONFIDENCE) -> Recalibration:
    """Fit ``clf``'s temperature (when it has one) and choose its out-of-scope threshold on
    labelled held-out rows — and its out-of-scope detector's threshold, when it has one;
    all are set on ``clf`` (save it to keep them).

    Args:
        clf: a trained classifier (network, TF-IDF or ensemble).
        texts: held-out texts.
        labels: their intents; out-of-scope labels (``oos``, ...) count as out of scope,
            intents the classifier does not know are left out (and counted).
        max_reject: without out-of-scope rows, the largest share of in-scope rows the
            threshold may reject.
        temperature: fit the temperature; False keeps the classifier's and chooses only the
            thresholds.
        reject_budget: with out-of-scope rows, the largest share of in-scope rows the
            balanced threshold may reject (None: no limit; see
            :func:`~headwise.intent.decision.oos.choose_threshold`).
        reject_confidence: the confidence the budget is kept with (the upper bound of the
            reject rate must be within it; None: the rate on these rows).

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
    det = getattr(clf, "ood", None) if before_t is not None else None
    features = None
    if before_t is not None:
        if det is not None and det.needs_features:
            features, logits = clf.features_and_logits(chosen)
        else:
            logits = clf.logits(chosen)
        before = calibrated_probs(logits, before_t)
        if temperature:
            clf.temperature = fit_temperature(logits[ins], gold[ins])
        after = calibrated_probs(logits, clf.temperature)
    else:
        before = after = clf.predict_proba(chosen)
    pred = after.argmax(1)
    threshold_before = clf.threshold
    choice = choose_threshold(after.max(1), pred == gold, oos, max_reject=max_reject,
                              reject_budget=reject_budget,
                              reject_confidence=reject_confidence)
    clf.threshold = choice.threshold
    ood_before = ood_choice = None
    if det is not None:
        ood_before = det.threshold
        ood_choice = choose_score_threshold(det.score(features, logits), pred == gold, oos,
                                            max_reject=max_reject, name=det.name,
                                            reject_budget=reject_budget,
                                            reject_confidence=reject_confidence)
        det.threshold = ood_choice.threshold
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
        threshold_before=threshold_before, threshold=choice,
        ood_threshold_before=ood_before, ood=ood_choice)


def save_calibration(clf: ProbabilityClassifier, directory: str | Path) -> Path:
    """Write ``clf``'s temperature, threshold and info into the metadata file of the saved
    classifier in ``directory`` (``intent.json``, ``tfidf.json`` or ``ensemble.json``),
    atomically, leaving its weights untouched; returns the file. The threshold of an
    out-of-scope detector goes into its ``ood.json`` first (its arrays stay).

    Raises:
        FileNotFoundError: no saved classifier in ``directory``.
        ValueError: the saved classifier's intents are not ``clf``'s, or its saved
            detector is not ``clf``'s.
    """
    directory = Path(directory)
    path = metadata_path(directory)
    meta = json.loads(path.read_text(encoding="utf-8"))
    if "labels" in meta and meta["labels"] != list(clf.labels):
        raise ValueError(f"{path} is a classifier of other intents than the one calibrated")
    meta["threshold"], meta["info"] = clf.threshold, clf.info
    det = getattr(clf, "ood", None)
    if det is not None:
        if meta.get("ood_detector") != det.name:
            raise ValueError(f"{path} has no saved {det.name} detector to update; save "
                             f"the whole classifier instead")
        save_detector(det, directory, arrays=False)
    if isinstance(clf, CalibratedClassifier):
        meta["temperature"] = clf.temperature
    return write_json_atomically(path, meta)


def calibrate_on_validation(clf: CalibratedClassifier, texts: list[str],
                            labels: list[str | None], max_reject: float,
                            reject_budget: float | None = None,
                            reject_confidence: float | None = REJECT_CONFIDENCE
                            ) -> tuple[ThresholdChoice, dict[str, float]]:
    """Training's calibration: :func:`recalibrate` on the validation rows, answering
    ``(choice, metrics)`` with the calibrated in-scope ``accuracy``, ``macro_f1`` and
    ``temperature``. Without usable rows (no validation data, or only intents the
    classifier does not know) nothing is fitted: the threshold is 0
    (:meth:`ThresholdChoice.none`, nothing rejected) and the metrics are empty. With fewer
    than :data:`MIN_CALIBRATION_ROWS` in-scope rows the temperature is kept at 1 or above
    (a few rows all answered right pull the fit towards 0: a model sure of everything, that
    never answers out-of-scope), the threshold is chosen at that temperature, and the
    metrics carry a ``small_validation`` note that ``headwise train`` prints.
    Out-of-scope rows without any in-scope one are an error (as in :func:`recalibrate`).
    """
    known = set(clf.labels)
    if not any(y in known or is_oos_label(y) for y in labels):
        clf.threshold = 0.0
        return ThresholdChoice.none(), {}
    r = recalibrate(clf, texts, labels, max_reject=max_reject, reject_budget=reject_budget,
                    reject_confidence=reject_confidence)
    metrics: dict[str, Any] = {"accuracy": r.accuracy, "macro_f1": r.macro_f1,
                               "temperature": getattr(clf, "temperature", None)}
    if r.in_scope_rows < MIN_CALIBRATION_ROWS and isinstance(clf, CalibratedClassifier):
        # a handful of rows, all answered right, pulls the fitted temperature towards 0:
        # an over-confident model that never answers out-of-scope. Never sharpen then.
        fitted = clf.temperature
        clf.temperature = max(fitted, 1.0)
        if clf.temperature != fitted:  # the threshold again, at the kept temperature
            r = recalibrate(clf, texts, labels, max_reject=max_reject, temperature=False,
                            reject_budget=reject_budget,
                            reject_confidence=reject_confidence)
        metrics.update(temperature=clf.temperature, small_validation={
            "in_scope_rows": r.in_scope_rows, "minimum": MIN_CALIBRATION_ROWS,
            "fitted_temperature": fitted,
            "note": f"only {r.in_scope_rows} in-scope validation rows (fewer than "
                    f"{MIN_CALIBRATION_ROWS}): the temperature is kept at 1 or above (fitted "
                    f"{fitted:.3f}) and the confidence and out-of-scope threshold are rough; "
                    f"give more validation data (--valid) or calibrate later "
                    f"(headwise calibrate)"})
    return r.threshold, metrics


def _nll(probs: np.ndarray, gold: np.ndarray) -> float:
    """Mean negative log-likelihood of the gold classes."""
    return float(-np.log(np.clip(probs[np.arange(len(gold)), gold], 1e-300, None)).mean())


def fit_ood_detector(clf: ProbabilityClassifier, train_texts: Sequence[str],
                     train_labels: Sequence[str], valid_texts: Sequence[str],
                     valid_labels: Sequence[str | None], detector: str | OodDetector, *,
                     max_reject: float = 0.02, batch_size: int = 64,
                     reject_budget: float | None = None,
                     reject_confidence: float | None = REJECT_CONFIDENCE
                     ) -> ThresholdChoice | None:
    """Fit an out-of-scope detector on the training rows and choose its threshold on the
    validation rows; it is set as ``clf.ood`` and recorded in ``clf.info["ood"]`` (the
    detector, its hyperparameters, its threshold choice on validation, the rows and seconds
    of the fit). Run it after :func:`calibrate_on_validation`.

    ``"max_prob"`` stores no detector: the classifier keeps its top-probability threshold
    (``info["ood"]`` then repeats its validation numbers). Without usable validation rows
    no threshold can be chosen: no detector is stored either (the top-probability threshold
    stays) and ``info["ood"]`` says so.

    Args:
        clf: the trained classifier; detectors other than ``"max_prob"`` need a network
            (:class:`~headwise.intent.classifier.IntentClassifier`).
        train_texts, train_labels: the training rows (intents the classifier knows).
        valid_texts, valid_labels: validation rows; out-of-scope labels count as out of
            scope, intents the classifier does not know are left out.
        detector: a name (:func:`~headwise.intent.decision.ood.make_detector`), an unfitted
            detector, or ``"auto"``: the best of
            :data:`~headwise.intent.decision.ood.selection.AUTO_CANDIDATES` on the
            validation rows (:mod:`~headwise.intent.decision.ood.selection`; without
            out-of-scope validation rows the top probability stays).
        max_reject: without out-of-scope validation rows, the largest share of in-scope
            rows the threshold may reject.
        batch_size: texts per forward pass.
        reject_budget: with out-of-scope validation rows, the largest share of in-scope
            rows the balanced threshold may reject (None: no limit).
        reject_confidence: the confidence the budget is kept with (None: the validation
            rate alone; see :func:`~headwise.intent.decision.oos.choose_threshold`).

    Returns:
        The detector's :class:`ThresholdChoice`, or None when none was stored.

    Raises:
        ValueError: a detector other than ``"max_prob"`` for a TF-IDF model or an ensemble,
            training labels the classifier does not know, or mismatched lengths.
    """
    if isinstance(detector, str) and detector == AUTO:
        return _fit_auto(clf, train_texts, train_labels, valid_texts, valid_labels,
                         max_reject=max_reject, batch_size=batch_size,
                         reject_budget=reject_budget,
                         reject_confidence=reject_confidence)
    det = make_detector(detector) if isinstance(detector, str) else detector
    if det.name == "max_prob":
        if isinstance(clf, IntentClassifier):
            clf.ood = None
        clf.info["ood"] = {"detector": "max_prob", "params": {},
                           "valid": clf.info.get("oos_threshold")}
        return None
    index = _check_rows(clf, det.name, train_texts, train_labels, valid_texts, valid_labels)
    start = time.perf_counter()
    features, logits = _forward(clf, det, list(train_texts), batch_size)
    det.fit(features, logits, np.array([index[y] for y in train_labels], dtype=np.int64))
    fit_seconds = time.perf_counter() - start
    rows = [i for i, y in enumerate(valid_labels) if y in index or is_oos_label(y)]
    gold = np.array([index.get(valid_labels[i], -1) for i in rows], dtype=np.int64)
    record: dict[str, Any] = {"detector": det.name, "params": det.params(),
                              "fit_rows": len(train_texts), "fit_seconds": round(fit_seconds, 2)}
    if not (gold >= 0).any():
        clf.ood = None
        clf.info["ood"] = {**record, "valid": None, "stored": False,
                           "note": "no usable validation rows to choose its threshold on: "
                                   "the top-probability threshold stays"}
        return None
    v_features, v_logits = _forward(clf, det, [valid_texts[i] for i in rows], batch_size)
    choice = choose_score_threshold(det.score(v_features, v_logits),
                                    v_logits.argmax(1) == gold, gold < 0,
                                    max_reject=max_reject, name=det.name,
                                    reject_budget=reject_budget,
                                    reject_confidence=reject_confidence)
    det.threshold = choice.threshold
    clf.ood = det
    clf.info["ood"] = {**record, "valid": choice.to_dict(), "stored": True}
    return choice


def _check_rows(clf: ProbabilityClassifier, name: str, train_texts: Sequence[str],
                train_labels: Sequence[str], valid_texts: Sequence[str],
                valid_labels: Sequence[str | None]) -> dict[str, int]:
    """The classifier's intent -> id, after checking that ``clf`` is a network and that
    the rows fit it.

    Raises:
        ValueError: not a network, mismatched lengths, or training labels the classifier
            does not know.
    """
    if not isinstance(clf, IntentClassifier):
        raise ValueError(f"the {name} out-of-scope detector reads a network's logits or "
                         f"pooled vectors; a {type(clf).__name__} (a TF-IDF model or an "
                         f"ensemble) keeps the max_prob threshold")
    if len(train_texts) != len(train_labels) or len(valid_texts) != len(valid_labels):
        raise ValueError("texts and labels of different lengths")
    index = {label: i for i, label in enumerate(clf.labels)}
    unknown = sorted({y for y in train_labels if y not in index})
    if unknown:
        raise ValueError(f"training labels the classifier does not know: {unknown[:5]}")
    return index


def _fit_auto(clf: ProbabilityClassifier, train_texts: Sequence[str],
              train_labels: Sequence[str], valid_texts: Sequence[str],
              valid_labels: Sequence[str | None], *, max_reject: float, batch_size: int,
              reject_budget: float | None, reject_confidence: float | None
              ) -> ThresholdChoice | None:
    """``ood_detector="auto"``: fit every detector of
    :data:`~headwise.intent.decision.ood.selection.AUTO_CANDIDATES` on the training rows,
    choose each one's threshold on the validation rows, keep the best by the balance of
    in-scope accuracy and out-of-scope recall there
    (:func:`~headwise.intent.decision.ood.selection.select_detector`). The top
    probability's choice is the classifier's own (``info["oos_threshold"]``, from
    :func:`calibrate_on_validation`). Without out-of-scope validation rows the top
    probability stays, and ``info["ood"]`` says why."""
    index = _check_rows(clf, AUTO, train_texts, train_labels, valid_texts, valid_labels)
    rows = [i for i, y in enumerate(valid_labels) if y in index or is_oos_label(y)]
    gold = np.array([index.get(valid_labels[i], -1) for i in rows], dtype=np.int64)
    own = clf.info.get("oos_threshold")
    n_oos = int((gold < 0).sum())
    if n_oos < selection.AUTO_MIN_OOS_ROWS or not (gold >= 0).any() or own is None:
        clf.ood = None
        clf.info["ood"] = {"detector": "max_prob", "params": {}, "valid": own,
                           "auto": None,
                           "note": f"auto compares detectors on at least "
                                   f"{selection.AUTO_MIN_OOS_ROWS} out-of-scope (label oos) "
                                   f"validation rows and some in-scope ones; there were "
                                   f"{n_oos} out-of-scope: the top probability stays"}
        return None
    start = time.perf_counter()
    tr_f, tr_l = clf.features_and_logits(list(train_texts), batch_size=batch_size)
    v_f, v_l = clf.features_and_logits([valid_texts[i] for i in rows], batch_size=batch_size)
    y = np.array([index[label] for label in train_labels], dtype=np.int64)
    correct, oos = v_l.argmax(1) == gold, gold < 0
    choices: dict[str, Any] = {"max_prob": own}
    fitted: dict[str, OodDetector] = {}
    skipped: dict[str, str] = {}
    for spec in AUTO_CANDIDATES:
        if spec == "max_prob":
            continue
        try:
            det = make_detector(spec).fit(tr_f, tr_l, y)
        except (ValueError, np.linalg.LinAlgError) as e:  # e.g. k neighbours > training rows
            skipped[spec] = str(e)
            continue
        choices[spec] = choose_score_threshold(det.score(v_f, v_l), correct, oos,
                                               max_reject=max_reject, name=det.name,
                                               reject_budget=reject_budget,
                                               reject_confidence=reject_confidence)
        fitted[spec] = det
    best = select_detector(choices)
    scores = {spec: balanced_mean(c) for spec, c in choices.items()}
    record = {"auto": {"candidates": list(AUTO_CANDIDATES), "valid_mean": scores,
                       "chosen": best, "oos_rows": n_oos,
                       **({"skipped": skipped} if skipped else {})},
              "fit_rows": len(train_texts),
              "fit_seconds": round(time.perf_counter() - start, 2)}
    if best == "max_prob":
        clf.ood = None
        clf.info["ood"] = {"detector": "max_prob", "params": {}, "valid": own, **record}
        return None
    det, choice = fitted[best], choices[best]
    det.threshold = choice.threshold
    clf.ood = det
    clf.info["ood"] = {"detector": det.name, "params": det.params(),
                       "valid": choice.to_dict(), "stored": True, **record}
    return choice


def _forward(clf: IntentClassifier, det: OodDetector, texts: list[str], batch_size: int
             ) -> tuple[np.ndarray | None, np.ndarray]:
    """``(features or None, logits)`` of texts: the pooled vectors only when ``det`` reads
    them."""
    if det.needs_features:
        return clf.features_and_logits(texts, batch_size=batch_size)
    return None, clf.logits(texts, batch_size=batch_size)

