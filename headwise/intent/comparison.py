"""A model against its parent on the same labelled rows: ``headwise eval MODEL --parent PARENT``.

Whether to ship a retrained model (a warm start, :mod:`headwise.intent.training.warm_start`,
or any other) is a paired question: both models answer the same rows, so what matters is
the rows on which exactly one of them is right. :func:`compare_models` scores each row's
answer as right or wrong for both (a single-label answer: the intent, or out-of-scope for an
out-of-scope row; a compound one: exactly the gold set of intents), and tests the
difference with McNemar's exact test (:func:`mcnemar_exact`: the discordant rows against a
fair coin, scipy's binomial test), on all rows and on the rows the parent could answer (its
intents and out-of-scope, where a warm start shows what it forgot). It gives the change of
each intent's accuracy and one verdict line (:func:`verdict`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from headwise.intent.prediction import Prediction
from headwise.text.labels import is_oos_label

__all__ = ["McNemar", "compare_models", "format_comparison", "mcnemar_exact", "row_correct",
           "verdict"]

#: the significance level of the verdict
ALPHA = 0.05


@dataclass(frozen=True)
class McNemar:
    """McNemar's exact test on paired right/wrong answers.

    Attributes:
        rows: the rows compared.
        parent_only: rows the parent got right and the model wrong (``b``).
        model_only: rows the model got right and the parent wrong (``c``).
        p_value: the two-sided exact p-value: ``b`` among ``b + c`` discordant rows against
            a binomial with probability 1/2 (1 when no row is discordant).
    """

    rows: int
    parent_only: int
    model_only: int
    p_value: float

    @property
    def significant(self) -> bool:
        """Whether the difference is significant at :data:`ALPHA`."""
        return self.p_value < ALPHA

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready record."""
        return asdict(self)


def mcnemar_exact(parent_correct: Sequence[bool], model_correct: Sequence[bool]) -> McNemar:
    """McNemar's exact test of two classifiers' paired correctness (scipy's two-sided
    binomial test of the discordant rows).

    Raises:
        ValueError: the two sequences differ in length.
    """
    from scipy.stats import binomtest

    a = np.asarray(parent_correct, dtype=bool)
    m = np.asarray(model_correct, dtype=bool)
    if a.shape != m.shape:
        raise ValueError(f"{len(a)} parent answers but {len(m)} model answers")
    b, c = int((a & ~m).sum()), int((~a & m).sum())
    p = 1.0 if b + c == 0 else float(binomtest(b, b + c, 0.5).pvalue)
    return McNemar(len(a), b, c, p)


def row_correct(predictions: Sequence[Prediction], gold: Sequence[frozenset[str]], *,
                multi_label: bool) -> np.ndarray:
    """Whether each answer is right: a single-label one names the gold intent, or rejects an
    out-of-scope row (gold: the empty set); a multi-label one answers exactly the gold set."""
    out = []
    for p, want in zip(predictions, gold, strict=True):
        got = frozenset(k for k, _ in p.intents) if multi_label else \
            (frozenset() if p.out_of_scope else frozenset([p.intent]))
        out.append(got == want)
    return np.array(out, dtype=bool)


def compare_models(model: Any, parent: Any, texts: Sequence[str],
                   gold: Sequence[Sequence[str] | str], *, multi_label: bool = False,
                   oos_labels: Sequence[str] = ()) -> dict[str, Any]:
    """Compare ``model`` with ``parent`` on the same labelled rows.

    Args:
        model, parent: two classifiers of the same task (their ``predict``).
        texts: the rows' texts.
        gold: single-label: each row's intent (out-of-scope labels as ``oos_labels`` and the
            defaults); multi-label: each row's intents (empty: none).
        multi_label: the task.
        oos_labels: a team's own out-of-scope labels.

    Returns:
        A JSON-ready dict: ``rows``, both accuracies (``model_accuracy``,
        ``parent_accuracy``), ``test`` (:class:`McNemar` on all rows), ``parent_rows`` (the
        same on the rows whose intents the parent has: ``rows``, accuracies, ``test``),
        ``new_intents`` (the model's intents the parent lacks), ``per_intent`` (each gold
        intent, out-of-scope as ``oos``: ``rows``, ``parent``, ``model``, ``change``; the
        largest changes first) and ``verdict``.

    Raises:
        ValueError: different lengths or no rows.
    """
    texts = list(texts)
    if len(texts) != len(gold) or not texts:
        raise ValueError(f"{len(texts)} texts and {len(gold)} labels: give the same, at least "
                         f"one")
    sets = [frozenset(g) if multi_label else
            (frozenset() if is_oos_label(g, oos_labels) else frozenset([str(g)]))
            for g in gold]
    ours = row_correct(model.predict(texts), sets, multi_label=multi_label)
    theirs = row_correct(parent.predict(texts), sets, multi_label=multi_label)
    known = set(_labels(parent))
    old = np.array([s <= known for s in sets], dtype=bool)
    names = sorted({n for s in sets for n in s}) + (["oos"] if any(not s for s in sets) else [])
    per_intent = []
    for name in names:
        rows = np.array([(name in s) if name != "oos" else not s for s in sets], dtype=bool)
        p, m = float(theirs[rows].mean()), float(ours[rows].mean())
        per_intent.append({"intent": name, "rows": int(rows.sum()), "parent": p, "model": m,
                           "change": m - p, "parent_knows": name == "oos" or name in known})
    per_intent.sort(key=lambda r: (-abs(r["change"]), r["intent"]))
    test = mcnemar_exact(theirs, ours)
    old_test = mcnemar_exact(theirs[old], ours[old])
    report = {
        "rows": len(texts), "model_accuracy": float(ours.mean()),
        "parent_accuracy": float(theirs.mean()), "test": test.to_dict(),
        "parent_rows": {"rows": int(old.sum()),
                        "model_accuracy": float(ours[old].mean()) if old.any() else None,
                        "parent_accuracy": float(theirs[old].mean()) if old.any() else None,
                        "test": old_test.to_dict()},
        "new_intents": [y for y in _labels(model) if y not in known],
        "per_intent": per_intent}
    report["verdict"] = verdict(test, old_test, report["new_intents"])
    return report


def _labels(clf: Any) -> list[str]:
    return list(getattr(clf, "intents", None) or clf.labels)


def verdict(test: McNemar, parent_rows: McNemar, new_intents: Sequence[str]) -> str:
    """One line a team can act on: ship, keep the parent, or not proven, with the counts
    and p-values behind it.

    Args:
        test: the test on all rows.
        parent_rows: the test on the rows of the parent's intents (what a warm start may
            have forgotten).
        new_intents: the intents the model adds.
    """
    def counts(t: McNemar) -> str:
        return (f"right on {t.model_only} rows the parent got wrong, wrong on "
                f"{t.parent_only} it got right, McNemar exact p = {t.p_value:.3g}")

    if parent_rows.significant and parent_rows.parent_only > parent_rows.model_only:
        return ("KEEP THE PARENT: the model is significantly worse on the parent's own "
                f"intents ({counts(parent_rows)}); retrain with more of their rows (--replay) "
                "or more epochs before shipping")
    if test.significant and test.parent_only > test.model_only:
        return f"KEEP THE PARENT: the model is significantly worse ({counts(test)})"
    if test.significant:
        return f"SHIP: the model is significantly better ({counts(test)})"
    if new_intents:
        return (f"SHIP FOR THE NEW INTENTS: no significant change on these rows "
                f"({counts(test)}), and it adds {len(new_intents)} "
                f"intent{'s' if len(new_intents) != 1 else ''} the parent cannot answer "
                f"({', '.join(list(new_intents)[:5])})")
    return (f"NOT PROVEN: no significant difference at the {ALPHA:.0%} level ({counts(test)}); "
            f"keep the parent, or evaluate on more rows")


def format_comparison(report: dict[str, Any], *, parent: str, limit: int = 10) -> str:
    """The comparison as text: both accuracies, the tests, the largest per-intent changes
    (``limit`` of them) and the verdict."""
    t, old = report["test"], report["parent_rows"]
    lines = [f"against the parent {parent} ({report['rows']} rows):",
             f"  accuracy {report['model_accuracy']:.4f} (parent {report['parent_accuracy']:.4f}); "
             f"{t['model_only']} rows only the model gets right, {t['parent_only']} only the "
             f"parent; McNemar exact p = {t['p_value']:.3g}"]
    if old["rows"] and old["rows"] != report["rows"]:
        lines.append(f"  on the {old['rows']} rows of the parent's intents: accuracy "
                     f"{old['model_accuracy']:.4f} (parent {old['parent_accuracy']:.4f}); "
                     f"p = {old['test']['p_value']:.3g}")
    changed = [r for r in report["per_intent"] if r["change"]][:limit]
    if changed:
        width = max(len(r["intent"]) for r in changed) + 2
        lines.append(f"  {'intent':<{width}}{'rows':>6}{'parent':>9}{'model':>9}{'change':>9}")
        for r in changed:
            new = "" if r["parent_knows"] else "  (new)"
            lines.append(f"  {r['intent']:<{width}}{r['rows']:>6}{r['parent']:>9.3f}"
                         f"{r['model']:>9.3f}{r['change']:>+9.3f}{new}")
    else:
        lines.append("  no intent's accuracy changed")
    lines.append(f"verdict: {report['verdict']}")
    return "\n".join(lines)
