"""Bad cases: which heads behave differently on misclassified examples.

For each misclassified example, every per-head feature (a head's attention mass on each
token category, and the share of the head's rollout that lands on each category) is
compared with the mean over the correctly classified examples of the same gold intent.
The heads whose features differ most (absolute difference, with the z-score against the
reference examples' spread beside it) are listed with each case, and averaged over all
cases to name the heads most implicated in the errors.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np


def bad_cases(features: np.ndarray, feature_names: Sequence[str], gold: np.ndarray,
              predicted: np.ndarray, *, texts: Sequence[str] | None = None,
              labels: Sequence[str] | None = None, top_heads: int = 5,
              max_cases: int = 100) -> dict[str, Any]:
    """Misclassified examples and the heads that differ most from correct ones.

    Args:
        features: (examples, features, layers, heads) per-head features.
        feature_names: a name per feature (``"mass:negation"``, ``"rollout:number"`` ...).
        gold: (examples,) gold class ids (-1: unknown intent, left out).
        predicted: (examples,) predicted class ids.
        texts: the example texts (copied into the cases).
        labels: class names (for the cases).
        top_heads: heads listed per case.
        max_cases: cases listed (those whose strongest difference is largest first).

    Returns:
        ``{"cases": [{"index", "text", "gold", "predicted", "references", "heads":
        [{"layer", "head", "feature", "value", "reference", "diff", "z"}]}],
        "misclassified": n, "without_reference": n, "heads": [{"layer", "head",
        "feature", "mean_abs_diff"}]}``.
    """
    features = np.asarray(features, dtype=np.float64)
    gold, predicted = np.asarray(gold), np.asarray(predicted)
    n, f, layers, heads = features.shape
    known = gold >= 0
    wrong = np.flatnonzero(known & (gold != predicted))
    right = known & (gold == predicted)

    def name(i: int) -> str:
        return labels[i] if labels is not None and i >= 0 else str(int(i))

    cases, total, counted, no_ref = [], np.zeros((f, layers, heads)), 0, 0
    reference: dict[int, tuple[np.ndarray, np.ndarray, int]] = {}
    for i in wrong:
        g = int(gold[i])
        if g not in reference:
            ref = features[right & (gold == g)]
            reference[g] = (ref.mean(0), ref.std(0), len(ref)) if len(ref) else \
                (np.zeros((f, layers, heads)), np.zeros((f, layers, heads)), 0)
        mean, std, count = reference[g]
        if count == 0:
            no_ref += 1
            continue
        diff = features[i] - mean
        total += np.abs(diff)
        counted += 1
        flat = np.argsort(-np.abs(diff), axis=None, kind="stable")[:top_heads]
        top = []
        for k in flat:
            fi, layer, head = np.unravel_index(k, diff.shape)
            z = diff[fi, layer, head] / std[fi, layer, head] if std[fi, layer, head] > 0 \
                else None
            top.append({"layer": int(layer), "head": int(head),
                        "feature": feature_names[fi], "value": float(features[i][fi, layer, head]),
                        "reference": float(mean[fi, layer, head]),
                        "diff": float(diff[fi, layer, head]),
                        "z": None if z is None else float(z)})
        cases.append({"index": int(i), "text": None if texts is None else texts[i],
                      "gold": name(g), "predicted": name(int(predicted[i])),
                      "references": int(count), "heads": top})
    cases.sort(key=lambda c: -abs(c["heads"][0]["diff"]) if c["heads"] else 0.0)
    implicated = []
    if counted:
        mean_abs = total / counted
        for k in np.argsort(-mean_abs, axis=None, kind="stable")[:max(top_heads, 10)]:
            fi, layer, head = np.unravel_index(k, mean_abs.shape)
            implicated.append({"layer": int(layer), "head": int(head),
                               "feature": feature_names[fi],
                               "mean_abs_diff": float(mean_abs[fi, layer, head])})
    return {"misclassified": int(len(wrong)), "without_reference": no_ref,
            "cases": cases[:max_cases], "heads": implicated}


def link_slices(bad: dict[str, Any], slices: Sequence[Sequence[str] | None], *,
                wrong: np.ndarray | None = None,
                known: np.ndarray | None = None) -> dict[str, Any]:
    """Add to each case of :func:`bad_cases` the slices (phenomena) of its example, and count
    the cases per slice; the report's bad-case table shows them.

    Args:
        bad: :func:`bad_cases`'s result, changed in place.
        slices: the slice names of every example (index as in the analysis), or None.
        wrong: (examples,) bool, every example answered wrong (the listed cases are at
            most ``max_cases`` of them): with it, ``bad["by_slice"]`` counts them all.
        known: (examples,) bool, the examples of known gold (default: all).

    Returns:
        ``bad``, each case with ``"slices": [...]`` and ``bad["slices"]``: slice name ->
        number of listed cases in it; with ``wrong``, ``bad["by_slice"]``: ``[{"slice",
        "examples", "bad", "share", "listed"}]`` over the examples of known gold, the
        slices with the largest share of bad cases first.

    Raises:
        IndexError: a case whose index has no slice entry.
        ValueError: ``wrong`` or ``known`` not one entry per example.
    """
    counts: dict[str, int] = {}
    for case in bad["cases"]:
        names = list(slices[case["index"]] or ())
        case["slices"] = names
        for name in names:
            counts[name] = counts.get(name, 0) + 1
    bad["slices"] = dict(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))
    if wrong is None:
        return bad
    wrong = np.asarray(wrong, dtype=bool)
    known = np.ones(len(wrong), dtype=bool) if known is None else np.asarray(known, dtype=bool)
    if len(wrong) != len(slices) or len(known) != len(slices):
        raise ValueError(f"{len(slices)} examples' slices but {len(wrong)} wrong and "
                         f"{len(known)} known flags")
    totals: dict[str, list[int]] = {}
    for i in np.flatnonzero(known):
        for name in slices[i] or ():
            row = totals.setdefault(name, [0, 0])
            row[0] += 1
            row[1] += int(wrong[i])
    rows = [{"slice": name, "examples": n, "bad": b, "share": b / n,
             "listed": counts.get(name, 0)} for name, (n, b) in totals.items()]
    bad["by_slice"] = sorted(rows, key=lambda r: (-r["share"], -r["examples"], r["slice"]))
    return bad
