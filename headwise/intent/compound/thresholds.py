"""Multi-label intent decisions (thresholds on per-intent probabilities) and their metrics.

A compound utterance ("how much does a transfer cost?": how_much + fees + transfer) gets an
independent probability per intent (a sigmoid each); an intent is predicted when its
probability reaches a threshold::

    th = tune_thresholds(valid_probs, valid_targets, per_intent=True)
    pred = decide(test_probs, th)                      # (n, intents) bool
    multilabel_metrics(pred, test_targets, intent_names)["micro_f1"]
    span_f1(predicted_slots, gold_slots)["f1"]         # slot filling, CoNLL-style

An example with no intent above its threshold has no intent (out of scope); pass
``at_least_one=True`` where every utterance is known to carry one. Probabilities reach a
threshold when ``prob >= threshold``.

Tuned for exact match (``metric="exact_match"``: the whole set of intents right, the
measure a compound question is judged by), the decision has two thresholds: the most
probable intent is answered when it reaches ``threshold`` (else the text is out of scope),
and every other intent when it reaches ``additional``. Whether a text is in scope and how
many requests it holds are two questions; one threshold answers both with the same bar,
the two are chosen together on the validation rows (the one-threshold rule is among the
candidates: ``additional == threshold``).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from headwise.text.dataset import SlotSpan

#: the thresholds :func:`tune_thresholds` tries by default: 0.05, 0.06, ..., 0.95
DEFAULT_GRID = np.round(np.arange(5, 96) / 100, 2)
#: what :func:`tune_thresholds` may maximise on the validation rows
THRESHOLD_METRICS = ("micro_f1", "exact_match")


@dataclass
class Thresholds:
    """The decision thresholds of a multi-label classifier.

    Attributes:
        threshold: the global threshold (every intent when ``per_intent`` is None; with
            ``additional``, the most probable intent's).
        per_intent: one threshold per intent, in the classifier's intent order, or None.
        additional: the threshold every intent but the most probable must reach, once the
            most probable has reached ``threshold``; None: each intent its own threshold.
        metric: what the thresholds were chosen to maximise on validation rows (one of
            :data:`THRESHOLD_METRICS`); a soup of such models tunes its own the same way.

    Raises:
        ValueError: ``additional`` with ``per_intent``, an unknown ``metric``.
    """

    threshold: float
    per_intent: list[float] | None = None
    additional: float | None = None
    metric: str = "micro_f1"

    def __post_init__(self) -> None:
        if self.additional is not None and self.per_intent is not None:
            raise ValueError("an additional-intent threshold goes with one threshold for the "
                             "most probable intent, not with per-intent thresholds")
        if self.metric not in THRESHOLD_METRICS:
            raise ValueError(f"thresholds are tuned for one of {THRESHOLD_METRICS}, got "
                             f"{self.metric!r}")

    def for_intents(self, num_intents: int) -> np.ndarray:
        """The threshold of each of ``num_intents`` intents, as an array.

        Raises:
            ValueError: ``per_intent`` has another length.
        """
        if self.per_intent is None:
            return np.full(num_intents, float(self.threshold))
        if len(self.per_intent) != num_intents:
            raise ValueError(f"{len(self.per_intent)} per-intent thresholds for "
                             f"{num_intents} intents")
        return np.asarray(self.per_intent, dtype=float)

    def describe(self) -> str:
        """One phrase for a person: ``threshold 0.450`` (``(per intent)`` when each intent
        has its own), or the two thresholds of an exact-match choice."""
        if self.additional is not None:
            return (f"thresholds {self.threshold:.3f} for the most probable intent, "
                    f"{self.additional:.3f} for the others (chosen for exact match)")
        chosen = " (chosen for exact match)" if self.metric == "exact_match" else ""
        return (f"threshold {self.threshold:.3f}"
                + (" (per intent)" if self.per_intent is not None else "") + chosen)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict: ``{"threshold": t, "per_intent": [...] or None, "additional":
        a or None, "metric": m}``."""
        per = None if self.per_intent is None else [float(t) for t in self.per_intent]
        return {"threshold": float(self.threshold), "per_intent": per,
                "additional": None if self.additional is None else float(self.additional),
                "metric": self.metric}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Thresholds:
        """The inverse of :meth:`to_dict`.

        Raises:
            ValueError: a missing threshold, one that is not a number in [0, 1], or a
                combination :class:`Thresholds` refuses.
        """
        if not isinstance(data, dict) or "threshold" not in data:
            raise ValueError(f"expected {{'threshold': ..., 'per_intent': ...}}, got {data!r}")
        per, extra = data.get("per_intent"), data.get("additional")
        values = [data["threshold"], *(per if per is not None else []),
                  *([] if extra is None else [extra])]
        for t in values:
            if isinstance(t, bool) or not isinstance(t, (int, float)) or not 0 <= t <= 1:
                raise ValueError(f"a threshold is a number in [0, 1], got {t!r}")
        return cls(float(data["threshold"]),
                   None if per is None else [float(t) for t in per],
                   None if extra is None else float(extra),
                   data.get("metric", "micro_f1"))


def tune_thresholds(probs: np.ndarray, targets: np.ndarray, *, per_intent: bool = False,
                    grid: Sequence[float] | np.ndarray | None = None,
                    min_support: int = 3, metric: str = "micro_f1") -> Thresholds:
    """Choose thresholds on validation data.

    ``metric="micro_f1"``: the global threshold maximises micro-F1 over all (example,
    intent) decisions; among thresholds that tie, the one nearest 0.5 wins (and of two
    equally near, the higher). With ``per_intent``, each intent with at least
    ``min_support`` positive examples gets the threshold maximising its own F1 (ties:
    nearest the global threshold, then the higher); the others keep the global one.

    ``metric="exact_match"``: the pair (``threshold`` for the most probable intent,
    ``additional`` for the others; see the module's docstring) maximising the share of
    examples whose whole intent set is right, every pair of the grid tried; ties go to
    the pair whose two thresholds are nearest each other (the one-threshold rule first),
    then to the threshold nearest 0.5, then the higher ones. ``additional`` is None when
    the two are equal (the same decisions).

    Args:
        probs: (examples, intents) probabilities.
        targets: (examples, intents) 0/1 or bool gold intents.
        per_intent: also choose one threshold per intent (micro-F1 only).
        grid: the thresholds to try (default :data:`DEFAULT_GRID`).
        min_support: the fewest positives for an intent to get its own threshold.
        metric: one of :data:`THRESHOLD_METRICS`.

    Returns:
        The :class:`Thresholds`.

    Raises:
        ValueError: shapes that are not one and the same (examples, intents), no examples,
            an empty grid or one with values outside [0, 1], an unknown metric, or
            per-intent thresholds for exact match.
    """
    probs, targets = _check_pair(probs, targets, "probs")
    if probs.shape[0] == 0:
        raise ValueError("no examples to tune thresholds on")
    grid = DEFAULT_GRID if grid is None else np.asarray(grid, dtype=float).ravel()
    if grid.size == 0 or np.any((grid < 0) | (grid > 1)):
        raise ValueError("grid must hold thresholds in [0, 1]")
    if metric not in THRESHOLD_METRICS:
        raise ValueError(f"metric must be one of {THRESHOLD_METRICS}, got {metric!r}")
    if metric == "exact_match":
        if per_intent:
            raise ValueError("per-intent thresholds maximise each intent's F1; exact match "
                             "chooses one threshold for the most probable intent and one "
                             "for the others: use one of the two")
        return _exact_match_pair(probs, targets, grid)
    # counts per (threshold, intent)
    tp, fp, fn = (np.zeros((grid.size, probs.shape[1]), dtype=np.int64) for _ in range(3))
    for g, t in enumerate(grid):
        pred = probs >= t
        tp[g], fp[g] = (pred & targets).sum(axis=0), (pred & ~targets).sum(axis=0)
        fn[g] = (~pred & targets).sum(axis=0)
    micro = _f1(tp.sum(axis=1), fp.sum(axis=1), fn.sum(axis=1))
    best = grid[_best(micro, grid, 0.5)]
    if not per_intent:
        return Thresholds(float(best))
    chosen = []
    support = targets.sum(axis=0)
    for k in range(probs.shape[1]):
        if support[k] < min_support:
            chosen.append(float(best))
            continue
        chosen.append(float(grid[_best(_f1(tp[:, k], fp[:, k], fn[:, k]), grid, best)]))
    return Thresholds(float(best), chosen)


def _exact_match_pair(probs: np.ndarray, targets: np.ndarray, grid: np.ndarray) -> Thresholds:
    """:func:`tune_thresholds` for exact match: every (threshold, additional) pair of
    ``grid`` scored at once."""
    n = probs.shape[0]
    rows = np.arange(n)
    top = probs.argmax(axis=1)
    top_p = probs[rows, top]
    others = probs.copy()
    others[rows, top] = -np.inf
    is_top = np.zeros_like(targets)
    is_top[rows, top] = True
    # per additional threshold a: is the answer {top} + {others >= a} exactly the gold set
    answered = np.stack([((others >= a) | is_top) == targets for a in grid]).all(axis=2)
    silent = ~targets.any(axis=1)  # the gold set is empty: out of scope is right
    in_scope = top_p[None, :] >= grid[:, None]  # (thresholds, n)
    hits = in_scope.astype(float) @ answered.T.astype(float) \
        + ((~in_scope).astype(float) @ silent.astype(float))[:, None]
    best = hits.max()
    ties = np.argwhere(np.isclose(hits, best, rtol=0, atol=1e-9))
    i, j = min(ties, key=lambda ij: (round(abs(grid[ij[1]] - grid[ij[0]]), 9),
                                     round(abs(grid[ij[0]] - 0.5), 9), -grid[ij[0]],
                                     -grid[ij[1]]))
    t, a = float(grid[i]), float(grid[j])
    return Thresholds(t, None, None if a == t else a, "exact_match")


def decide(probs: np.ndarray, thresholds: Thresholds | float, *,
           at_least_one: bool = False) -> np.ndarray:
    """Which intents each example expresses.

    Args:
        probs: (examples, intents) probabilities, or (intents,) for one example.
        thresholds: a :class:`Thresholds`, or one global threshold.
        at_least_one: when no intent reaches its threshold, keep the most probable one
            (the first of equals).

    Returns:
        A bool array of the shape of ``probs``: True where ``prob >= threshold`` (with an
        ``additional`` threshold: the most probable intent (the first of equals) where it
        reaches ``threshold``, and there the others that reach ``additional``).

    Raises:
        ValueError: ``probs`` not 1-D or 2-D, or per-intent thresholds of another length.
    """
    probs = np.asarray(probs, dtype=float)
    if probs.ndim not in (1, 2):
        raise ValueError(f"probs must be (examples, intents) or (intents,), got shape "
                         f"{probs.shape}")
    if not isinstance(thresholds, Thresholds):
        thresholds = Thresholds(float(thresholds))
    rows = probs.reshape(-1, probs.shape[-1])
    out = rows >= thresholds.for_intents(rows.shape[1])[None, :]
    if thresholds.additional is not None and rows.shape[1] > 0:
        index, top = np.arange(len(rows)), rows.argmax(axis=1)
        passed = out[index, top]
        out = (rows >= thresholds.additional) & passed[:, None]
        out[index, top] = passed
    if at_least_one and rows.shape[1] > 0:
        empty = ~out.any(axis=1)
        out[np.flatnonzero(empty), rows[empty].argmax(axis=1)] = True
    return out.reshape(probs.shape)


def multilabel_metrics(pred: np.ndarray, targets: np.ndarray,
                       names: Sequence[str] | None = None) -> dict[str, Any]:
    """Scores of multi-label predictions.

    - ``micro_f1`` (and ``micro_precision``, ``micro_recall``): over all (example, intent)
      decisions pooled; 0 when there is no gold and no predicted intent at all.
    - ``macro_f1``: the mean F1 over the intents that occur in the targets *or* in the
      predictions (``macro_intents`` of them); an intent never gold and never predicted has
      no F1 and is left out, one only predicted counts with F1 0. 0 when there is none.
    - ``samples_f1``: the mean over examples of ``2|P & G| / (|P| + |G|)``, an example with
      no gold and no predicted intent (a correct out-of-scope) counting 1.
    - ``exact_match``: the share of examples whose predicted set equals the gold set.
    - ``per_intent``: name -> precision, recall, F1 (0 where undefined) and support (gold
      count), for every name.

    Args:
        pred: (examples, intents) bool or 0/1 predictions (:func:`decide`).
        targets: the gold intents, same shape.
        names: the intent of each column (default: the column numbers as strings, ``"0"``,
            ``"1"`` ...).

    Returns:
        The dict above, plus ``examples`` (how many).

    Raises:
        ValueError: shapes that differ, or ``names`` of another length.
    """
    # imported here: loading a compound classifier (serving, predict) needs no scikit-learn
    from sklearn.metrics import accuracy_score, f1_score, precision_recall_fscore_support

    pred, targets = _check_pair(pred, targets, "pred")
    names = [str(k) for k in range(pred.shape[1])] if names is None else list(names)
    if len(names) != pred.shape[1]:
        raise ValueError(f"{len(names)} names for {pred.shape[1]} intents")
    n = pred.shape[0]
    p, r, f, s = precision_recall_fscore_support(targets, pred, average=None,
                                                 labels=list(range(pred.shape[1])),
                                                 zero_division=0)
    present = np.flatnonzero(targets.any(axis=0) | pred.any(axis=0))
    micro_p, micro_r, micro_f, _ = precision_recall_fscore_support(
        targets, pred, average="micro", zero_division=0) if n else (0.0, 0.0, 0.0, None)
    macro = float(f1_score(targets, pred, average="macro", labels=present.tolist(),
                           zero_division=0)) if present.size else 0.0
    samples = float(f1_score(targets, pred, average="samples", zero_division=1.0)) if n \
        else 0.0
    return {
        "examples": n,
        "micro_precision": float(micro_p), "micro_recall": float(micro_r),
        "micro_f1": float(micro_f),
        "macro_f1": macro, "macro_intents": int(present.size),
        "samples_f1": samples,
        "exact_match": float(accuracy_score(targets, pred)) if n else 0.0,
        "per_intent": {name: {"precision": float(p[k]), "recall": float(r[k]),
                              "f1": float(f[k]), "support": int(s[k])}
                       for k, name in enumerate(names)},
    }


def span_f1(pred: Sequence[Sequence[SlotSpan]],
            gold: Sequence[Sequence[SlotSpan]]) -> dict[str, Any]:
    """Slot-filling precision, recall and F1 over exact spans, as CoNLL's conlleval.

    A predicted span is correct when a gold span of the same example has the same name,
    start and end (the value and text are not compared; each gold span matches once).

    Args:
        pred: the predicted spans of each example.
        gold: the gold spans of each example, aligned with ``pred``.

    Returns:
        ``{"precision", "recall", "f1", "predicted", "gold", "correct", "per_slot": {name:
        {"precision", "recall", "f1", "support"}}}``, micro-averaged over spans; a ratio
        with a zero denominator is 0; ``per_slot`` holds every name gold or predicted.

    Raises:
        ValueError: ``pred`` and ``gold`` of different lengths.
    """
    if len(pred) != len(gold):
        raise ValueError(f"{len(pred)} predicted examples for {len(gold)} gold ones")
    counts: dict[str, Counter[str]] = {}
    for p_spans, g_spans in zip(pred, gold, strict=True):
        p_keys = Counter((s.name, s.start, s.end) for s in p_spans)
        g_keys = Counter((s.name, s.start, s.end) for s in g_spans)
        for what, keys in (("predicted", p_keys), ("gold", g_keys),
                           ("correct", p_keys & g_keys)):
            for (name, _, _), c in keys.items():
                counts.setdefault(name, Counter())[what] += c
    total: Counter[str] = sum(counts.values(), Counter())
    per_slot = {}
    for name in sorted(counts):
        c = counts[name]
        per_slot[name] = {**_prf(c["correct"], c["predicted"], c["gold"]),
                          "support": c["gold"]}
    return {**_prf(total["correct"], total["predicted"], total["gold"]),
            "predicted": total["predicted"], "gold": total["gold"],
            "correct": total["correct"], "per_slot": per_slot}


# -- internals -------------------------------------------------------------------------------
def _check_pair(a: np.ndarray, targets: np.ndarray, what: str) -> tuple[np.ndarray, np.ndarray]:
    a, targets = np.asarray(a), np.asarray(targets)
    if a.ndim != 2 or a.shape != targets.shape:
        raise ValueError(f"{what} and targets must both be (examples, intents), got shapes "
                         f"{a.shape} and {targets.shape}")
    if what == "probs":
        return a.astype(float), targets.astype(bool)
    return a.astype(bool), targets.astype(bool)


def _f1(tp: np.ndarray, fp: np.ndarray, fn: np.ndarray) -> np.ndarray:
    """``2tp / (2tp + fp + fn)``, 0 where that is 0/0."""
    denominator = 2 * tp + fp + fn
    return np.where(denominator > 0, 2 * tp / np.maximum(denominator, 1), 0.0)


def _best(scores: np.ndarray, grid: np.ndarray, near: float) -> int:
    """Index of the best score; ties go to the grid value nearest ``near``, then the higher."""
    ties = np.flatnonzero(np.isclose(scores, scores.max(), rtol=0, atol=1e-12))
    return int(min(ties, key=lambda i: (round(abs(grid[i] - near), 9), -grid[i])))


def _prf(correct: int, predicted: int, gold: int) -> dict[str, float]:
    precision = correct / predicted if predicted else 0.0
    recall = correct / gold if gold else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return {"precision": precision, "recall": recall, "f1": f1}
