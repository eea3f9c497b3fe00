"""Finding and fixing noisy intent labels before training (confident learning).

Customer-service data is labelled by people in a hurry: some queries carry the wrong
intent (DataCLUE CIC's training split is noisy by design). A classifier trained on them
learns the mistakes. Confident learning (Northcutt et al. 2021, "Confident Learning:
Estimating Uncertainty in Dataset Labels") finds them from out-of-sample predicted
probabilities: it estimates, per pair (given label, true label), how many examples were
mislabelled, and flags the examples that most confidently belong to another intent.

Here the out-of-sample probabilities come from a fast TF-IDF + logistic-regression model
in ``folds``-fold cross-validation (scikit-learn; character 1-3-grams for Chinese, word
1-2-grams and character 2-5-grams for other text), and the flagging is ``cleanlab``'s
``find_label_issues``. :func:`clean_labels` then drops the flagged examples or gives them
the label the model predicts. Only the training data is touched: the test data is never
seen, and validation data is left as given. On data of :data:`PARALLEL_ROWS` rows or more
the folds are fitted at once in worker processes (joblib), one per CPU up to the folds: the
same probabilities as one after the other up to rounding (each fold's fit is
deterministic), sooner.
"""

from __future__ import annotations

import os
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from headwise.text.char_level import cjk_fraction

__all__ = ["CLEANING_MODES", "LARGE_CLEANING_SHARE", "PARALLEL_ROWS", "LabelIssues", "clean_labels",
           "cv_folds", "describe_cleaning", "find_label_issues", "find_multi_label_issues",
           "fold_jobs",
           "out_of_fold_multi_label_probs", "out_of_fold_probs", "tfidf_features"]

#: what :func:`clean_labels` does with a flagged example
CLEANING_MODES = ("drop", "relabel")
#: above this share of the training rows dropped or relabelled, training warns: confident
#: learning flags a few percent of a fairly labelled set, and much more means the labels
#: (or the intents' definitions) disagree with the text model rather than a few slips
LARGE_CLEANING_SHARE = 0.10
#: intents listed in the cleaning report, those with the largest share changed first
SHOWN_INTENTS = 5
#: rows from which the cross-validation folds are fitted in parallel worker processes by
#: default: below, a fold takes about as long as starting a worker (BENCHMARKS.md,
#: ``doctor:cpu``, for a doctor run's time on a large data set)
PARALLEL_ROWS = 2000


@dataclass
class LabelIssues:
    """Examples whose given label looks wrong.

    Attributes:
        indices: positions of the flagged examples, most confidently wrong first.
        suggested: for each flagged example (same order), the intent the out-of-fold
            model predicts.
        total: examples examined.
        folds: cross-validation folds of the out-of-fold probabilities.
        seconds: wall time.
        by_label: flagged examples per given label (the noisiest intents first).
        mode: what :func:`clean_labels` did with them (``"drop"``, ``"relabel"``), None
            when they were only found.
        changed: the rows dropped or relabelled (to another intent) per given label, set
            by :func:`clean_labels`.
        label_rows: training rows per given label.
    """

    indices: list[int]
    suggested: list[str]
    total: int
    folds: int
    seconds: float
    by_label: dict[str, int] = field(default_factory=dict)
    mode: str | None = None
    changed: dict[str, int] = field(default_factory=dict)
    label_rows: dict[str, int] = field(default_factory=dict)

    @property
    def fraction(self) -> float:
        """The share of examples flagged."""
        return len(self.indices) / self.total if self.total else 0.0

    @property
    def changed_rows(self) -> int:
        """Rows dropped or relabelled."""
        return sum(self.changed.values())

    @property
    def changed_share(self) -> float:
        """The share of the training rows dropped or relabelled."""
        return self.changed_rows / self.total if self.total else 0.0

    def to_dict(self, examples: int = 20) -> dict:
        """A JSON-ready summary (the first ``examples`` flagged positions included):
        what was flagged, and, after :func:`clean_labels`, ``mode``, ``changed`` (rows
        dropped or relabelled), ``changed_share``, ``by_intent`` (the
        :data:`SHOWN_INTENTS` intents with the largest share changed: ``{"intent",
        "changed", "rows", "share"}``) and ``warning`` (a share above
        :data:`LARGE_CLEANING_SHARE`, else None)."""
        out = {"flagged": len(self.indices), "total": self.total,
               "fraction": round(self.fraction, 4), "folds": self.folds,
               "seconds": round(self.seconds, 1),
               "by_label": dict(list(self.by_label.items())[:20]),
               "first": [[i, s] for i, s in zip(self.indices[:examples],
                                                self.suggested[:examples], strict=True)]}
        if self.mode is None:
            return out
        worst = sorted(((k, n, self.label_rows[k]) for k, n in self.changed.items() if n),
                       key=lambda e: (-e[1] / e[2], -e[1], e[0]))[:SHOWN_INTENTS]
        done = "dropped" if self.mode == "drop" else "relabelled"
        warning = None
        if self.changed_share > LARGE_CLEANING_SHARE:
            warning = (f"label cleaning {done} {self.changed_share:.1%} of the training rows, "
                       f"above {LARGE_CLEANING_SHARE:.0%}: that many flagged labels usually "
                       f"means overlapping intents or a text model too weak for the data, "
                       f"not a few slips; check the flagged rows (first, by_label in "
                       f"train_summary.json) or train without levers.label_cleaning")
        out.update(mode=self.mode, changed=self.changed_rows,
                   changed_share=round(self.changed_share, 4),
                   by_intent=[{"intent": k, "changed": n, "rows": rows,
                               "share": round(n / rows, 4)} for k, n, rows in worst],
                   warning=warning)
        return out


def tfidf_features(chinese: bool):
    """The TF-IDF features of the out-of-fold model (and of the benchmarks' floor): character
    1-3-grams for Chinese; word 1-2-grams with character 2-5-grams (within word boundaries)
    otherwise; sublinear term frequencies. An unfitted scikit-learn transformer."""
    from sklearn.pipeline import make_union

    from headwise.intent.tfidf import feature_vectorizers

    parts = feature_vectorizers(chinese)
    return parts[0] if len(parts) == 1 else make_union(*parts)


def _text_model(texts: Sequence[str], c: float, max_iter: int, class_weight: str | None,
                features: Any = None, one_vs_rest: bool = False):
    """TF-IDF + logistic regression on ``texts``; or, given frozen ``features`` (an encoder's
    sentence embeddings), the logistic regression on them, standardised. ``one_vs_rest``:
    one binary logistic regression per intent (on features computed once)."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.multiclass import OneVsRestClassifier
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    head = LogisticRegression(C=c, max_iter=max_iter, class_weight=class_weight)
    if one_vs_rest:
        head = OneVsRestClassifier(head)
    if features is None:
        return make_pipeline(tfidf_features(cjk_fraction(texts[:2000]) > 0.3), head)
    return make_pipeline(StandardScaler(), head)


def cv_folds(labels: Sequence[str], folds: int) -> int:
    """Folds actually used: at most the smallest intent's count, at least 2."""
    if not isinstance(folds, int) or folds < 2:
        raise ValueError(f"folds must be an int >= 2, got {folds!r}")
    return max(2, min(folds, min(Counter(labels).values())))


def fold_jobs(rows: int, folds: int, jobs: int | None = None) -> int:
    """Worker processes that fit ``folds`` cross-validation folds of ``rows`` rows: ``jobs``
    when given (at least 1, at most the folds), else one per CPU this process may run on,
    up to the folds, from :data:`PARALLEL_ROWS` rows (1 below).

    Raises:
        ValueError: ``jobs`` given and below 1.
    """
    if jobs is not None:
        if not isinstance(jobs, int) or jobs < 1:
            raise ValueError(f"jobs must be an int >= 1, got {jobs!r}")
        return min(jobs, folds)
    if rows < PARALLEL_ROWS:
        return 1
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return max(1, min(folds, cpus or 1))


def _fit_fold(model: Any, x_train: Any, y_train: np.ndarray, x_test: Any, k: int
              ) -> tuple[int, np.ndarray]:
    """Fold ``k``'s ``predict_proba`` of its held-out rows by a clone of ``model`` fitted on
    the others."""
    from sklearn.base import clone

    return k, clone(model).fit(x_train, y_train).predict_proba(x_test)


def _cross_fitted(model: Any, x: Any, y: np.ndarray, splits: Any,
                  progress: Callable[[], None] | None, jobs: int | None = None
                  ) -> np.ndarray:
    """``predict_proba`` of every row by a clone of ``model`` fitted on the other folds
    (scikit-learn's ``cross_val_predict``), the folds in :func:`fold_jobs` worker processes
    (joblib's default backend), ``progress`` called as each fold finishes."""
    from joblib import Parallel, delayed

    take = (lambda idx: [x[i] for i in idx]) if isinstance(x, list) else (lambda idx: x[idx])
    splits = list(splits)
    tasks = (delayed(_fit_fold)(model, take(train), y[train], take(test), k)
             for k, (train, test) in enumerate(splits))
    workers = fold_jobs(y.shape[0], len(splits), jobs)
    fitted = (_fit_fold(*t[1], **t[2]) for t in tasks) if workers == 1 else \
        Parallel(n_jobs=workers, return_as="generator_unordered")(tasks)
    out: np.ndarray | None = None
    for k, p in fitted:
        if out is None:
            out = np.zeros((y.shape[0], p.shape[1]))
        out[splits[k][1]] = p
        if progress is not None:
            progress()
    assert out is not None
    return out


def _checked_features(features: Any, n: int) -> Any:
    if features is not None and features.shape[0] != n:
        raise ValueError(f"{features.shape[0]} feature rows for {n} texts")
    return features


def out_of_fold_probs(texts: Sequence[str], labels: Sequence[str], *, folds: int = 5,
                      seed: int = 0, c: float = 4.0, max_iter: int = 300,
                      class_weight: str | None = None, features: Any = None,
                      progress: Callable[[], None] | None = None, jobs: int | None = None
                      ) -> tuple[np.ndarray, list[str]]:
    """Predicted intent probabilities of every example from a model that did not see it.

    Args:
        texts: the texts.
        labels: their (possibly noisy) intents.
        folds: stratified cross-validation folds (fewer when an intent has fewer examples;
            at least 2).
        seed: the fold shuffle's seed.
        c: the logistic regression's inverse L2 strength (scikit-learn's ``C``).
        max_iter: its L-BFGS iterations at most.
        class_weight: None or ``"balanced"``, as in
            :meth:`TfidfClassifier.fit <headwise.intent.tfidf.TfidfClassifier.fit>`.
        features: frozen features of the texts, one row each (a saved model's sentence
            embeddings, :func:`headwise.intent.doctor.model_features`): the logistic
            regression is cross-validated on them instead of TF-IDF + logistic regression.
        progress: called after each fold.
        jobs: worker processes fitting the folds (:func:`fold_jobs`; None: one per CPU
            from :data:`PARALLEL_ROWS` rows). The probabilities do not depend on it (up to
            floating-point rounding).

    Returns:
        ``(probs (n, intents), intents)``, columns in the order of the sorted intents.

    Raises:
        ValueError: mismatched lengths, fewer than two intents, an intent with a single
            example, or ``jobs`` below 1.
    """
    from sklearn.model_selection import StratifiedKFold

    if len(texts) != len(labels):
        raise ValueError(f"{len(texts)} texts but {len(labels)} labels")
    features = _checked_features(features, len(texts))
    counts = Counter(labels)
    if len(counts) < 2:
        raise ValueError("out-of-fold probabilities need at least two intents")
    if min(counts.values()) < 2:
        rare = sorted(k for k, v in counts.items() if v < 2)[:5]
        raise ValueError(f"out-of-fold probabilities (label cleaning, distillation) need at "
                         f"least 2 examples of every intent; {rare} have one")
    intents = sorted(counts)
    y = np.searchsorted(np.array(intents), np.array(labels))
    splitter = StratifiedKFold(n_splits=cv_folds(labels, folds), shuffle=True, random_state=seed)
    model = _text_model(texts, c, max_iter, class_weight, features)
    x = list(texts) if features is None else features
    probs = _cross_fitted(model, x, y, splitter.split(np.zeros(len(y)), y), progress, jobs)
    return probs, intents


def out_of_fold_multi_label_probs(texts: Sequence[str], intent_sets: Sequence[Sequence[str]],
                                  *, folds: int = 5, seed: int = 0, c: float = 4.0,
                                  max_iter: int = 300, features: Any = None,
                                  progress: Callable[[], None] | None = None,
                                  jobs: int | None = None
                                  ) -> tuple[np.ndarray, list[str]]:
    """For rows with several intents each: every intent's probability for every row, from
    one-vs-rest logistic regressions (TF-IDF, or the frozen ``features``) fitted in
    shuffled ``folds``-fold cross-validation on the other rows. The columns are independent
    (they need not sum to 1), as cleanlab's multi-label confident learning reads them.

    Args:
        texts: the texts.
        intent_sets: each row's intents (an empty one: no intent).
        folds: folds (at most the rows; at least 2).
        seed: the fold shuffle's seed.
        c, max_iter: as :func:`out_of_fold_probs`.
        features: as :func:`out_of_fold_probs`.
        progress: called after each fold.
        jobs: as :func:`out_of_fold_probs`.

    Returns:
        ``(probs (n, intents), intents)``, columns in the order of the sorted intents.

    Raises:
        ValueError: mismatched lengths, fewer than two intents, fewer than 4 rows, or
            ``jobs`` below 1.
    """
    from sklearn.model_selection import KFold

    if len(texts) != len(intent_sets):
        raise ValueError(f"{len(texts)} texts but {len(intent_sets)} intent sets")
    features = _checked_features(features, len(texts))
    intents = sorted({k for s in intent_sets for k in s})
    if len(intents) < 2 or len(texts) < 4:
        raise ValueError("multi-label out-of-fold probabilities need at least two intents "
                         "and four rows")
    col = {k: j for j, k in enumerate(intents)}
    y = np.zeros((len(texts), len(intents)), dtype=int)
    for i, s in enumerate(intent_sets):
        y[i, [col[k] for k in s]] = 1
    splitter = KFold(n_splits=min(folds, len(texts)), shuffle=True, random_state=seed)
    model = _text_model(texts, c, max_iter, None, features, one_vs_rest=True)
    x = list(texts) if features is None else features
    probs = _cross_fitted(model, x, y, splitter.split(y), progress, jobs)
    return probs, intents


def find_label_issues(texts: Sequence[str], labels: Sequence[str], *, folds: int = 5,
                      seed: int = 0, filter_by: str = "prune_by_noise_rate",
                      probs: tuple[np.ndarray, list[str]] | None = None) -> LabelIssues:
    """Flag the examples whose label is probably wrong (confident learning).

    Args:
        texts: the training texts.
        labels: their intents.
        folds: cross-validation folds of the out-of-fold model.
        seed: the folds' seed.
        filter_by: cleanlab's rule (``"prune_by_noise_rate"``, ``"prune_by_class"``,
            ``"both"``, ``"confident_learning"``, ``"predicted_neq_given"``).
        probs: :func:`out_of_fold_probs`'s ``(probs, intents)`` when the caller has them
            already (they are computed here otherwise).

    Returns:
        The :class:`LabelIssues`.

    Raises:
        ValueError: as :func:`out_of_fold_probs`.
    """
    from cleanlab.filter import find_label_issues as cl_find

    start = time.perf_counter()
    probs, intents = probs or out_of_fold_probs(texts, labels, folds=folds, seed=seed)
    y = np.searchsorted(np.array(intents), np.array(labels))
    # n_jobs=1: cleanlab's default forks a multiprocessing pool, which can deadlock in a
    # process that already runs threads (a Ray driver, a service, PyTorch's own pools);
    # the arrays are small, one process is enough
    ranked = cl_find(y, probs, filter_by=filter_by, return_indices_ranked_by="self_confidence",
                     n_jobs=1)
    indices = [int(i) for i in ranked]
    suggested = [intents[int(probs[i].argmax())] for i in indices]
    by_label = dict(Counter(labels[i] for i in indices).most_common())
    return LabelIssues(indices, suggested, len(labels), cv_folds(labels, folds),
                       time.perf_counter() - start, by_label)


def find_multi_label_issues(intent_sets: Sequence[Sequence[str]], probs: np.ndarray,
                            intents: Sequence[str]) -> list[int]:
    """The rows whose intent set is probably wrong (one intent missing or too many), by
    cleanlab's multi-label confident learning
    (``cleanlab.multilabel_classification.filter.find_label_issues``) on out-of-fold
    one-vs-rest probabilities (:func:`out_of_fold_multi_label_probs`); most confidently
    wrong first.

    Raises:
        ValueError: a row's intent not among ``intents``, or a shape mismatch.
    """
    from cleanlab.multilabel_classification.filter import find_label_issues as cl_find

    col = {k: j for j, k in enumerate(intents)}
    if probs.shape != (len(intent_sets), len(intents)):
        raise ValueError(f"probabilities of shape {probs.shape} for {len(intent_sets)} rows "
                         f"and {len(intents)} intents")
    unknown = sorted({k for s in intent_sets for k in s} - set(col))
    if unknown:
        raise ValueError(f"intents {unknown[:5]} have no probability column")
    given = [sorted(col[k] for k in s) for s in intent_sets]
    ranked = cl_find(given, probs, return_indices_ranked_by="self_confidence",
                     n_jobs=1)  # no forked pool: see find_label_issues
    return [int(i) for i in ranked]


def clean_labels(texts: Sequence[str], labels: Sequence[str], *, mode: str = "drop",
                 folds: int = 5, seed: int = 0) -> tuple[list[str], list[str], LabelIssues]:
    """Training data with its probable label errors dropped or relabelled.

    Args:
        texts: the training texts.
        labels: their intents.
        mode: ``"drop"`` the flagged examples, or ``"relabel"`` them with the out-of-fold
            model's prediction.
        folds: cross-validation folds.
        seed: the folds' seed.

    Returns:
        ``(texts, labels, issues)``: the cleaned data (original order) and what was found.

    Raises:
        ValueError: an unknown mode, or as :func:`out_of_fold_probs`.
    """
    if mode not in CLEANING_MODES:
        raise ValueError(f"mode must be one of {CLEANING_MODES}, got {mode!r}")
    issues = find_label_issues(texts, labels, folds=folds, seed=seed)
    fix = dict(zip(issues.indices, issues.suggested, strict=True))
    issues.mode = mode
    issues.label_rows = dict(Counter(labels))
    issues.changed = dict(Counter(labels[i] for i, s in fix.items()
                                  if mode == "drop" or s != labels[i]))
    out_t, out_y = [], []
    for i, (t, y) in enumerate(zip(texts, labels, strict=True)):
        if i in fix and mode == "drop":
            continue
        out_t.append(t)
        out_y.append(fix.get(i, y))
    return out_t, out_y, issues


def describe_cleaning(summary: dict) -> list[str]:
    """The lines training prints about label cleaning, from :meth:`LabelIssues.to_dict`
    after :func:`clean_labels`: how many rows were dropped or relabelled, their share, the
    intents most changed, and the warning when the share is large."""
    done = "dropped" if summary["mode"] == "drop" else "relabelled"
    lines = [f"label cleaning ({summary['mode']}): {done} {summary['changed']} of "
             f"{summary['total']} training rows ({summary['changed_share']:.1%}; "
             f"{summary['flagged']} flagged)"]
    if summary["by_intent"]:
        lines.append("  most changed: " + ", ".join(
            f"{e['intent']} {e['changed']}/{e['rows']} ({e['share']:.0%})"
            for e in summary["by_intent"]))
    if summary["warning"]:
        lines.append(f"warning: {summary['warning']}")
    return lines
