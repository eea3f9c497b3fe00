"""Out-of-scope detection by a threshold on a score, chosen on validation data.

A closed-set classifier always names one of its intents, even for "what's the weather".
Below a threshold on the calibrated top probability (or on another in-scope score of
:mod:`headwise.intent.decision.ood`: the energy score, a Mahalanobis or nearest-neighbour distance)
the intent system answers *out-of-scope* instead of guessing. The threshold is chosen on
validation data (:func:`choose_threshold` for the probability, :func:`choose_score_threshold`
for any score where higher means more in-scope):

* when the validation set holds out-of-scope examples (a label of
  :data:`~headwise.text.labels.OOS_LABELS`), the threshold maximises the mean of in-scope
  accuracy (a rejected in-scope query counts as wrong) and out-of-scope recall — the two
  numbers of the CLINC150 protocol (Larson et al. 2019), weighted equally — among the
  thresholds that reject at most ``reject_budget`` of the in-scope queries (None: any
  threshold). The budget
  is what a customer-service team fixes first: the share of real questions answered "I
  don't understand". The balanced optimum alone rejected far more of the demo's in-scope
  questions of held-out phrasing (BENCHMARKS ``demo:heldout``). The budget is a promise
  about questions the model has not seen, so it is kept with confidence
  ``reject_confidence`` (default :data:`REJECT_CONFIDENCE`, 95 %): a threshold is allowed
  when the one-sided Clopper-Pearson upper bound of its in-scope reject rate
  (:func:`reject_upper_bound`), not only the validation rate itself, is within the budget.
  A threshold whose validation rate just meets the budget exceeds it on new questions
  about half the time (sampling alone); what a 5 % budget at 95 % allows on the demo's
  validation rows: BENCHMARKS ``demo:heldout``.
  ``reject_confidence=None`` keeps the validation rate alone;
* without them, it is the highest threshold that rejects at most ``max_reject`` of the
  in-scope validation queries (default 2 %), most of which are errors anyway.

:func:`threshold_curve` gives both numbers over every threshold, for the report.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

#: the default confidence with which a reject budget is kept (:func:`reject_upper_bound`)
REJECT_CONFIDENCE = 0.95


@dataclass(frozen=True)
class ThresholdChoice:
    """The chosen threshold and what it does on the validation data.

    Attributes:
        threshold: reject when the score (by default the calibrated top probability) is
            below it.
        method: ``"balanced"`` (out-of-scope examples present), ``"max_reject"``, or
            ``"none"`` (no usable validation rows: threshold 0, nothing is rejected).
        reject_budget: the in-scope reject budget the balanced choice kept to (None: none).
        reject_confidence: the confidence it was kept with (None: the validation rate
            alone, or no budget).
        reject_bound: the one-sided upper confidence bound of the in-scope reject rate at
            the chosen threshold (None without a confidence).
        in_scope_accuracy: in-scope accuracy with rejection (a rejected query is wrong).
        in_scope_accuracy_no_reject: the same without any threshold.
        oos_recall: share of out-of-scope examples rejected (None without any).
        reject_rate: share of in-scope examples rejected.
        n_in_scope, n_oos: validation counts.
        score: the score thresholded: ``"max_prob"`` (the calibrated top probability) or
            the name of an out-of-scope detector (:mod:`headwise.intent.decision.ood`).
        unbudgeted: when the reject budget decided (the balanced optimum on the
            validation rows was not allowed), that optimum's ``{"threshold",
            "reject_rate", "oos_recall", "in_scope_accuracy"}``: what keeping the budget
            costs in out-of-scope recall, so a team sees the trade-off it made (a weak
            model whose held-out in-scope questions score like out-of-scope ones keeps the
            budget only with a low threshold); else None.
    """

    threshold: float
    method: str
    in_scope_accuracy: float
    in_scope_accuracy_no_reject: float
    oos_recall: float | None
    reject_rate: float
    n_in_scope: int
    n_oos: int
    score: str = "max_prob"
    reject_budget: float | None = None
    reject_confidence: float | None = None
    reject_bound: float | None = None
    unbudgeted: dict[str, float] | None = None

    @classmethod
    def none(cls) -> ThresholdChoice:
        """The choice without usable validation rows: threshold 0, nothing rejected."""
        return cls(threshold=0.0, method="none", in_scope_accuracy=float("nan"),
                   in_scope_accuracy_no_reject=float("nan"), oos_recall=None, reject_rate=0.0,
                   n_in_scope=0, n_oos=0)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-serialisable dict."""
        return asdict(self)


def reject_upper_bound(rejected: np.ndarray | int, n: int,
                       confidence: float = REJECT_CONFIDENCE) -> np.ndarray:
    """The one-sided Clopper-Pearson upper confidence bound of a rate: the largest true
    rate ``p`` under which seeing at most ``rejected`` of ``n`` is still at least
    ``1 - confidence`` likely (``P(Binomial(n, p) <= rejected) = 1 - confidence``); 1 when
    all ``n`` were rejected. Exact (conservative): the true rate is at most the bound with
    probability at least ``confidence``.

    Args:
        rejected: counts (any shape), each in ``[0, n]``.
        n: the number of trials (in-scope rows), at least 1.
        confidence: in (0, 1).

    Returns:
        The bounds, float64, of ``rejected``'s shape.

    Raises:
        ValueError: ``n < 1``, a count outside ``[0, n]``, or ``confidence`` outside (0, 1).
    """
    from scipy.special import betaincinv  # the Beta quantile; scipy.stats imports slowly

    k = np.asarray(rejected, dtype=np.float64)
    if n < 1:
        raise ValueError(f"a rate's bound needs at least one row, got n={n}")
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    if ((k < 0) | (k > n)).any():
        raise ValueError(f"counts must be in [0, {n}]")
    below = k < n
    bound = np.ones_like(k)
    bound[below] = betaincinv(k[below] + 1.0, n - k[below], confidence)
    return bound


def allowed_rejections(n: int, budget: float,
                       confidence: float | None = REJECT_CONFIDENCE) -> int:
    """The most of ``n`` in-scope validation rows a threshold may reject and keep a reject
    budget: with a confidence, the largest count whose upper bound
    (:func:`reject_upper_bound`) is within the budget; without one, the largest count whose
    rate is. A threshold that rejects none is always allowed, so the answer is at least 0.

    Kept with 95 % confidence, a 5 % budget lets a threshold reject none of 59 rows, 1 of
    108 and 16 of 486 (a validation rate of 0, 0.9 and 3.3 %): on few in-scope validation
    rows the budget, not the balance of in-scope accuracy and out-of-scope recall, sets the
    threshold, however well the out-of-scope rows are separated.

    Raises:
        ValueError: ``n < 1``, ``budget`` outside [0, 1), or a confidence outside (0, 1).
    """
    if n < 1:
        raise ValueError(f"allowed rejections need at least one row, got n={n}")
    if not 0.0 <= budget < 1.0:
        raise ValueError(f"budget must be in [0, 1), got {budget}")
    check_reject_confidence(confidence)
    k = np.arange(n + 1)
    rate = k / n if confidence is None else reject_upper_bound(k, n, confidence)
    return int(np.flatnonzero((k == 0) | (rate <= budget + 1e-12))[-1])


def threshold_curve(confidence: np.ndarray, correct: np.ndarray, oos: np.ndarray,
                    thresholds: np.ndarray | None = None) -> dict[str, np.ndarray]:
    """In-scope accuracy and out-of-scope recall at each threshold.

    Args:
        confidence: (n,) calibrated top probability of every example (or any in-scope
            score, with its ``thresholds``: :func:`score_thresholds`).
        correct: (n,) whether the top intent is right (ignored for out-of-scope rows).
        oos: (n,) whether the example is out-of-scope.
        thresholds: the thresholds to evaluate (default: 0, the midpoints between
            consecutive distinct confidences, and 1), ascending.

    Returns:
        ``{"threshold", "in_scope_accuracy", "oos_recall", "reject_rate"}`` arrays
        (``oos_recall`` is NaN without out-of-scope examples).
    """
    conf = np.asarray(confidence, dtype=np.float64)
    ok = np.asarray(correct, dtype=bool)
    out = np.asarray(oos, dtype=bool)
    if not conf.shape == ok.shape == out.shape or conf.ndim != 1:
        raise ValueError("confidence, correct and oos must be 1-d arrays of one length")
    if thresholds is None:
        levels = np.unique(conf)
        thresholds = np.unique(np.concatenate([[0.0], (levels[1:] + levels[:-1]) / 2, [1.0]]))
    t = np.asarray(thresholds, dtype=np.float64)
    ins = ~out
    kept = conf[None, :] >= t[:, None]  # (thresholds, n)
    n_in = max(int(ins.sum()), 1)
    acc = (kept & (ok & ins)[None, :]).sum(1) / n_in
    reject = (~kept & ins[None, :]).sum(1) / n_in
    recall = ((~kept & out[None, :]).sum(1) / out.sum()) if out.any() \
        else np.full(len(t), np.nan)
    return {"threshold": t, "in_scope_accuracy": acc, "oos_recall": recall,
            "reject_rate": reject}


def score_thresholds(score: np.ndarray) -> np.ndarray:
    """The candidate thresholds of an arbitrary score, ascending: one below every value
    (nothing rejected; as far below the lowest value as the values spread, at least 1), the
    midpoints between consecutive distinct values, and one above every value (everything
    rejected).

    Raises:
        ValueError: an empty or not 1-d score, or a non-finite value.
    """
    s = np.asarray(score, dtype=np.float64)
    if s.ndim != 1 or not len(s):
        raise ValueError("the score must be a non-empty 1-d array")
    if not np.isfinite(s).all():
        raise ValueError("the score has non-finite values")
    levels = np.unique(s)
    margin = max(float(levels[-1] - levels[0]), 1.0)
    return np.concatenate([[levels[0] - margin], (levels[1:] + levels[:-1]) / 2,
                           [levels[-1] + margin]])


def choose_threshold(confidence: np.ndarray, correct: np.ndarray, oos: np.ndarray, *,
                     max_reject: float = 0.02, reject_budget: float | None = None,
                     reject_confidence: float | None = REJECT_CONFIDENCE
                     ) -> ThresholdChoice:
    """Choose the out-of-scope threshold on the calibrated top probability on validation
    data (see the module doc); the candidates are 0, the midpoints between consecutive
    distinct confidences, and 1.

    Args:
        confidence, correct, oos: as for :func:`threshold_curve`.
        max_reject: without out-of-scope examples, the largest share of in-scope
            queries the threshold may reject.
        reject_budget: with out-of-scope examples, the largest share of in-scope queries
            the balanced threshold may reject (None: no limit).
        reject_confidence: the confidence the budget is kept with: a threshold is allowed
            when the upper bound of its reject rate (:func:`reject_upper_bound`) is within
            the budget (None: when the validation rate itself is).

    Returns:
        The :class:`ThresholdChoice`.

    Raises:
        ValueError: no in-scope example, ``max_reject`` / ``reject_budget`` outside
            [0, 1), or ``reject_confidence`` outside (0, 1).
    """
    return _choose(confidence, correct, oos, None, max_reject, "max_prob", reject_budget,
                   reject_confidence)


def choose_score_threshold(score: np.ndarray, correct: np.ndarray, oos: np.ndarray, *,
                           max_reject: float = 0.02, name: str = "score",
                           reject_budget: float | None = None,
                           reject_confidence: float | None = REJECT_CONFIDENCE
                           ) -> ThresholdChoice:
    """Choose a threshold on any in-scope score (higher = more in-scope; a query is
    rejected below the threshold) by the rules of :func:`choose_threshold`: with
    out-of-scope examples the best mean of in-scope accuracy and out-of-scope recall (ties:
    the lowest threshold), without them the highest threshold rejecting at most
    ``max_reject`` of the in-scope examples. The candidates are :func:`score_thresholds`.

    Args:
        score: (n,) the score of every validation example.
        correct: (n,) whether the top intent is right (ignored for out-of-scope rows).
        oos: (n,) whether the example is out-of-scope.
        max_reject: without out-of-scope examples, the largest share of in-scope
            queries the threshold may reject.
        name: the score's name, recorded in the choice (``ThresholdChoice.score``).
        reject_budget: with out-of-scope examples, the largest share of in-scope queries
            the balanced threshold may reject (None: no limit).
        reject_confidence: the confidence the budget is kept with (as for
            :func:`choose_threshold`; None: the validation rate alone).

    Returns:
        The :class:`ThresholdChoice`.

    Raises:
        ValueError: no in-scope example, ``max_reject`` outside [0, 1),
            ``reject_confidence`` outside (0, 1), arrays of different lengths or a
            non-finite score.
    """
    return _choose(score, correct, oos, score_thresholds(score), max_reject, name,
                   reject_budget, reject_confidence)


def _choose(score: np.ndarray, correct: np.ndarray, oos: np.ndarray,
            thresholds: np.ndarray | None, max_reject: float, name: str,
            reject_budget: float | None = None,
            reject_confidence: float | None = REJECT_CONFIDENCE) -> ThresholdChoice:
    if not 0.0 <= max_reject < 1.0:
        raise ValueError(f"max_reject must be in [0, 1), got {max_reject}")
    if reject_budget is not None and not 0.0 <= reject_budget < 1.0:
        raise ValueError(f"reject_budget must be in [0, 1) or None, got {reject_budget}")
    check_reject_confidence(reject_confidence)
    out = np.asarray(oos, dtype=bool)
    if (~out).sum() == 0:
        raise ValueError("choosing a threshold needs in-scope validation examples")
    curve = threshold_curve(score, correct, out, thresholds)
    t, acc, rec, rej = (curve[k] for k in ("threshold", "in_scope_accuracy", "oos_recall",
                                           "reject_rate"))
    n_in = int((~out).sum())
    bound = None
    if out.any() and reject_budget is not None and reject_confidence is not None:
        bound = reject_upper_bound(np.rint(rej * n_in), n_in, reject_confidence)
    unbudgeted = None
    if out.any():
        balanced = (acc + rec) / 2
        # ties: the lowest threshold (fewest in-scope rejections) among the best
        best = int(np.flatnonzero(balanced >= balanced.max() - 1e-12)[0])
        if reject_budget is not None:  # the lowest threshold rejects nothing: always allowed
            # a threshold that rejects no in-scope row is always allowed (the lowest one
            # rejects nothing at all)
            allowed = (rej <= 0.0) | ((rej if bound is None else bound)
                                      <= reject_budget + 1e-12)
            balanced = np.where(allowed, balanced, -np.inf)
        i = int(np.flatnonzero(balanced >= balanced.max() - 1e-12)[0])
        method = "balanced"
        if i != best:
            unbudgeted = {"threshold": float(t[best]), "reject_rate": float(rej[best]),
                          "oos_recall": float(rec[best]),
                          "in_scope_accuracy": float(acc[best])}
    else:
        allowed = np.flatnonzero(rej <= max_reject + 1e-12)
        i = int(allowed[-1])
        method = "max_reject"
    return ThresholdChoice(
        threshold=float(t[i]), method=method, in_scope_accuracy=float(acc[i]),
        in_scope_accuracy_no_reject=float(acc[0]),
        oos_recall=None if not out.any() else float(rec[i]), reject_rate=float(rej[i]),
        n_in_scope=n_in, n_oos=int(out.sum()), score=name,
        reject_budget=reject_budget if out.any() else None,
        reject_confidence=None if bound is None else reject_confidence,
        reject_bound=None if bound is None else float(bound[i]), unbudgeted=unbudgeted)


def check_reject_confidence(reject_confidence: float | None) -> None:
    """Refuse a ``reject_confidence`` that is neither None nor in (0, 1).

    Raises:
        ValueError: with the value.
    """
    if reject_confidence is not None and not (
            isinstance(reject_confidence, (int, float)) and 0.0 < reject_confidence < 1.0):
        raise ValueError(f"reject_confidence must be in (0, 1) or None, got "
                         f"{reject_confidence!r}")
