"""Choosing the out-of-scope detector on validation data: ``ood_detector="auto"``.

Which score separates in-scope questions from out-of-scope ones best depends on the model
and on the data: on BANKING77-OOS the calibrated top probability was best for MiniLM, while
on the demo's held-out near misses the distance detectors caught far more for the
fine-tuned multilingual encoder (BENCHMARKS.md, ``oos:cpu`` and ``demo:ood``). ``"auto"``
lets the validation rows decide: every detector of :data:`AUTO_CANDIDATES` is fitted on the
training rows, its threshold chosen on the validation rows as usual, and the one with the
best validation balance of in-scope accuracy and out-of-scope recall
(:func:`balanced_mean`) is kept (:func:`select_detector`). The test rows are never read.

The choice needs out-of-scope validation rows (at least :data:`AUTO_MIN_OOS_ROWS`); with
fewer ``"auto"`` keeps the top probability, and says so. A TF-IDF blend answers
out-of-scope on its own top probability: ``"auto"`` then applies only when validation kept
the network alone.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from headwise.intent.decision.ood.registry import check_detector_spec

__all__ = ["AUTO", "AUTO_CANDIDATES", "AUTO_MIN_OOS_ROWS", "BLEND_SETTINGS", "balanced_mean",
           "check_ood_setting", "describe_auto", "select_detector"]

#: the ``ood_detector`` value that chooses among :data:`AUTO_CANDIDATES` on validation
AUTO = "auto"
#: the detectors ``"auto"`` chooses among, in the order ties are broken (the top
#: probability first: nothing to store). Every detector the benchmarks run is a candidate:
#: on their VALIDATION rows (the only rows a choice may read) the k = 50 neighbour and the
#: plain-covariance Mahalanobis score were each the best of their family for some model
#: (BENCHMARKS.md ``oos:cpu`` and ``demo:ood``), so none is left out.
AUTO_CANDIDATES: tuple[str, ...] = ("max_prob", "energy", "knn:1", "knn", "knn:50",
                                    "mahalanobis:ledoit_wolf", "mahalanobis")
#: the ``ood_detector`` settings a TF-IDF blend takes: the blend answers out-of-scope on its
#: own top probability (``"auto"`` applies when validation keeps the network alone)
BLEND_SETTINGS: tuple[str, ...] = ("max_prob", AUTO)
#: the fewest out-of-scope validation rows ``"auto"`` compares detectors on; with fewer,
#: one row moves a detector's balance by over 2.5 points, and the top probability stays
AUTO_MIN_OOS_ROWS = 20


def check_ood_setting(setting: str) -> str:
    """``setting`` if it is a recipe's ``decision.ood_detector`` value: :data:`AUTO` or a detector
    (:func:`~headwise.intent.decision.ood.check_detector_spec`).

    Raises:
        ValueError: anything else (the message names ``"auto"`` and the detectors).
    """
    if setting == AUTO:
        return setting
    try:
        return check_detector_spec(setting)
    except ValueError as e:
        raise ValueError(f"ood_detector must be 'auto' (the detector best on the validation "
                         f"rows) or a detector: {e}") from None


def balanced_mean(choice: Any) -> float | None:
    """``(in-scope accuracy + out-of-scope recall) / 2`` of a threshold choice on
    validation (a :class:`~headwise.intent.decision.oos.ThresholdChoice` or its
    ``to_dict()``), a rejected in-scope row counting as wrong; None when the choice saw no
    out-of-scope row."""
    get = choice.get if isinstance(choice, Mapping) else lambda k: getattr(choice, k)
    recall, accuracy = get("oos_recall"), get("in_scope_accuracy")
    if recall is None or accuracy is None or accuracy != accuracy:  # NaN: no in-scope row
        return None
    return (float(accuracy) + float(recall)) / 2


def select_detector(choices: Mapping[str, Any]) -> str:
    """The detector whose validation choice has the best :func:`balanced_mean`.

    Args:
        choices: detector spec -> its threshold choice on the validation rows (a
            ``ThresholdChoice`` or its dict), for some of :data:`AUTO_CANDIDATES` or other
            specs.

    Returns:
        The best spec; ties go to the one listed first in :data:`AUTO_CANDIDATES` (then to
        the order of ``choices``).

    Raises:
        ValueError: no choices, or none with out-of-scope validation rows.
    """
    scored = {spec: balanced_mean(c) for spec, c in choices.items()}
    scored = {spec: m for spec, m in scored.items() if m is not None}
    if not scored:
        raise ValueError("no detector was scored on out-of-scope validation rows: the "
                         "choice needs some (label oos) in the validation data")
    order = {spec: i for i, spec in enumerate(AUTO_CANDIDATES)}
    ranked = sorted(scored, key=lambda s: (-round(scored[s], 12),
                                           order.get(s, len(order)), list(scored).index(s)))
    return ranked[0]


def describe_auto(record: Mapping[str, Any]) -> str:
    """One line for the user: what ``"auto"`` kept and each candidate's validation balance
    (``record`` is a classifier's ``info["ood"]``)."""
    auto = record["auto"]
    scores = ", ".join(f"{spec} {100 * m:.1f}" for spec, m in auto["valid_mean"].items()
                       if m is not None)
    return (f"out-of-scope detector (auto, on {auto['oos_rows']} out-of-scope validation "
            f"rows): kept {auto['chosen']}; validation mean of in-scope accuracy and "
            f"out-of-scope recall, %: {scores}"
            + "".join(f"; {spec} not fitted ({why})"
                      for spec, why in auto.get("skipped", {}).items()))
