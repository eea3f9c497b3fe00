"""Choosing a TF-IDF model's regularisation and prior correction by cross-validation.

On noisy labels the held-out split is noisy too, and on a small one macro-F1 swings by
points between neighbouring settings: picking ``C`` and the prior correction's ``tau``
(:mod:`headwise.intent.posthoc.prior`) there picks noise. Cross-validation over all the training
rows is steadier: :func:`fit_tfidf_selected` computes each candidate ``C``'s out-of-fold
probabilities (:func:`~headwise.intent.training.cleaning.out_of_fold_probs`), scores every
``(C, tau)`` by out-of-fold macro-F1 against the given labels, and fits the winner on all
the rows. The cost is ``folds`` extra fits per candidate ``C``.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Sequence
from typing import Any

import numpy as np
from tqdm.auto import tqdm

from headwise.intent.posthoc.prior import TAUS, apply_prior_correction, choose_tau, log_prior
from headwise.intent.tfidf import TfidfClassifier
from headwise.intent.training.cleaning import cv_folds, out_of_fold_probs

__all__ = ["fit_tfidf", "fit_tfidf_selected"]


def fit_tfidf_selected(texts: Sequence[str], labels: Sequence[str], *,
                       cs: Sequence[float] = (10.0,), taus: Sequence[float] | None = TAUS,
                       folds: int = 5, seed: int = 0, class_weight: str | None = None,
                       max_iter: int = 2000, progress: bool = False) -> TfidfClassifier:
    """A :class:`TfidfClassifier` with ``C`` (and the prior correction's ``tau``) chosen by
    out-of-fold macro-F1; the choice is in ``info["selection"]``.

    Args:
        texts: training texts.
        labels: their intents; the cross-validation leaves out the intents with a single
            example (they cannot be in two folds), the final fit uses every row.
        cs: candidate inverse L2 strengths.
        taus: candidate prior-correction strengths; None for no correction (``C`` alone
            is chosen, on uncorrected decisions).
        folds: stratified cross-validation folds.
        seed: the fold shuffle's seed.
        class_weight: None or ``"balanced"``, as in :meth:`TfidfClassifier.fit`.
        max_iter: L-BFGS iterations at most, per fit.
        progress: a progress bar over the candidates (``folds`` fits each).

    Raises:
        ValueError: no candidate or a non-positive ``C``; fewer than two intents with two
            examples or more; what :meth:`TfidfClassifier.fit` refuses.
    """
    cs = [float(c) for c in cs]
    if not cs or min(cs) <= 0:
        raise ValueError(f"cs must be non-empty and positive, got {cs}")
    start = time.perf_counter()
    texts, labels = list(texts), [str(y) for y in labels]
    counts = Counter(labels)
    rows = [i for i, y in enumerate(labels) if counts[y] >= 2]
    cv_texts, cv_labels = [texts[i] for i in rows], [labels[i] for i in rows]
    if len({*cv_labels}) < 2:
        raise ValueError("choosing C or tau by cross-validation needs two intents with two "
                         "examples or more")
    intents = sorted(set(cv_labels))  # the columns of out_of_fold_probs
    gold = np.searchsorted(np.array(intents), np.array(cv_labels))
    prior = log_prior(labels, intents)
    scores: dict[float, Any] = {}
    for c in tqdm(cs, desc=f"choosing C by {folds}-fold CV", unit="C", disable=not progress):
        probs, _ = out_of_fold_probs(cv_texts, cv_labels, folds=folds, seed=seed, c=c,
                                     max_iter=max_iter, class_weight=class_weight)
        scores[c] = choose_tau(np.log(np.clip(probs, 1e-300, None)), gold, prior,
                               taus=taus or (0.0,))
    best = max(cs, key=lambda c: (scores[c].scores[scores[c].tau], -cs.index(c)))
    clf = TfidfClassifier.fit(texts, labels, c=best, class_weight=class_weight,
                              max_iter=max_iter)
    tau = scores[best].tau
    if taus is not None:
        apply_prior_correction(clf, log_prior(labels, clf.labels), tau)
    clf.info["selection"] = {
        "by": f"{cv_folds(cv_labels, folds)}-fold out-of-fold macro-F1", "c": best,
        "cv_rows": len(rows),
        "tau": tau if taus is not None else None,
        "seconds": round(time.perf_counter() - start, 1),
        "candidates": {str(c): s.to_dict()["macro_f1"] for c, s in scores.items()}}
    return clf


def fit_tfidf(texts: Sequence[str], labels: Sequence[str], *, c: float | Sequence[float],
              prior_correction: str | float = "none", seed: int = 0,
              class_weight: str | None = None, progress: bool = False) -> TfidfClassifier:
    """The TF-IDF model of an :class:`~headwise.intent.training.recipe.IntentRecipe`: one ``c`` and
    no or a fixed prior correction fit once; several ``c`` or ``prior_correction="auto"``
    choose by cross-validation (:func:`fit_tfidf_selected`).

    Args:
        texts: training texts.
        labels: their intents.
        c: the inverse L2 strength, or candidates to choose from.
        prior_correction: ``"none"``, ``"auto"`` (``tau`` chosen from
            :data:`~headwise.intent.posthoc.prior.TAUS`) or a fixed ``tau >= 0``.
        seed: the folds' seed.
        class_weight: None or ``"balanced"``.
        progress: a progress bar over the cross-validation.
    """
    cs = [float(x) for x in c] if isinstance(c, (list, tuple)) else [float(c)]
    taus = None if prior_correction == "none" else TAUS if prior_correction == "auto" \
        else (float(prior_correction),)
    if len(cs) > 1 or prior_correction == "auto":
        return fit_tfidf_selected(texts, labels, cs=cs, taus=taus, seed=seed,
                                  class_weight=class_weight, progress=progress)
    clf = TfidfClassifier.fit(texts, labels, c=cs[0], class_weight=class_weight)
    if taus is not None:
        apply_prior_correction(clf, log_prior(labels, clf.labels), taus[0])
    return clf
