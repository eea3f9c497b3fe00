"""Evaluating a compound classifier: intents, slot spans and normalised values.

:func:`evaluate_compound` is what ``headwise eval`` reports for a multi-label model:

* intents: micro- and macro-F1 and the exact-match rate (every intent right, nothing
  extra) with the classifier's thresholds, the exact-match rate's 95 % Wilson interval
  (``exact_match_interval``: the test questions as independent trials), and per-intent
  precision/recall/F1;
* slots: exact span F1 (name, start and end all right), overall and per slot name;
* values, per slot name: of the gold slots with a value, the share whose predicted span is
  exact *and* whose normalised value equals the gold value (end to end), and the share the
  normaliser gets right from the gold span text alone (the normaliser on its own).
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Sequence
from datetime import date
from pathlib import Path
from typing import Any

import numpy as np

from headwise.intent.compound.classifier import CompoundClassifier
from headwise.intent.compound.thresholds import multilabel_metrics, span_f1
from headwise.intent.evaluation import ALL_ROWS
from headwise.slots import normalize_slot
from headwise.text.annotations import AnnotatedExample


def evaluate_compound(clf: CompoundClassifier, examples: Sequence[AnnotatedExample], *,
                      out_dir: str | Path | None = None, reference_date: date | None = None,
                      batch_size: int = 64, slices: Sequence[Sequence[str]] | None = None
                      ) -> dict[str, Any]:
    """Score ``clf`` on annotated examples.

    Args:
        clf: the classifier.
        examples: gold intents and slots.
        out_dir: where ``report.json`` goes (optional).
        reference_date: "today" for relative dates in the values (default: the
            classifier's, else today).
        batch_size: texts per forward pass.
        slices: each example's slice names (the demo corpus's ``compound``,
            ``unseen_pair`` ...); with them the report has ``"slices"``: per name, in
            :data:`~headwise.text.slices.PHENOMENA`'s order (others after), its examples'
            count ``n``, ``exact_match`` and its ``exact_match_interval``, every example
            (``"all"``) first (:func:`slice_exact_match`).

    Returns:
        ``{"num_examples", "intents": {...}, "slots": {...}, "values": {...},
        "unseen_intents": {...}}``, and ``"slices"`` with ``slices``.

    Raises:
        ValueError: no examples, or ``slices`` of another length.
    """
    examples = list(examples)
    if not examples:
        raise ValueError("no examples to evaluate")
    if slices is not None and len(slices) != len(examples):
        raise ValueError(f"{len(slices)} slice lists for {len(examples)} examples")
    reference = reference_date or clf.reference_date or date.today()
    saved = clf.reference_date
    clf.reference_date = reference
    try:
        preds = clf.predict([e.text for e in examples], top_k=1, batch_size=batch_size)
    finally:
        clf.reference_date = saved
    index = {name: i for i, name in enumerate(clf.intents)}
    gold = np.zeros((len(examples), len(index)), dtype=bool)
    pred = np.zeros_like(gold)
    unseen: dict[str, int] = defaultdict(int)
    for r, (e, p) in enumerate(zip(examples, preds, strict=True)):
        for name in e.intents:
            if name in index:
                gold[r, index[name]] = True
            else:
                unseen[name] += 1
        for name, _ in p.intents:
            pred[r, index[name]] = True
    intents = multilabel_metrics(pred, gold, clf.intents)
    intents["exact_match_interval"] = exact_match_interval(pred, gold)
    report: dict[str, Any] = {"num_examples": len(examples), "intents": intents,
                              "unseen_intents": dict(sorted(unseen.items()))}
    if slices is not None:
        report["slices"] = slice_exact_match(pred, gold, slices)
    if clf.slot_tags:
        report["slots"] = span_f1([p.slots for p in preds], [e.slots for e in examples])
        report["values"] = value_accuracy(examples, [p.slots for p in preds], reference)
    if out_dir is not None:
        out = Path(out_dir)
        out.mkdir(parents=True, exist_ok=True)
        (out / "report.json").write_text(json.dumps(report, indent=2, ensure_ascii=False,
                                                    default=str) + "\n", encoding="utf-8")
    return report


def exact_match_interval(pred: np.ndarray, gold: np.ndarray, confidence: float = 0.95
                         ) -> list[float]:
    """The Wilson score interval of the exact-match rate (rows whose predicted intent set
    equals the gold set), each row an independent trial: ``[low, high]``.

    Raises:
        ValueError: no rows, or shapes that differ.
    """
    from scipy.stats import binomtest  # here: the light import path needs no scipy

    if pred.shape != gold.shape or not len(pred):
        raise ValueError(f"exact match needs rows of equal shape, got {pred.shape} and "
                         f"{gold.shape}")
    hits = int((np.asarray(pred, bool) == np.asarray(gold, bool)).all(axis=1).sum())
    ci = binomtest(hits, len(pred)).proportion_ci(confidence_level=confidence,
                                                  method="wilson")
    return [float(ci.low), float(ci.high)]


def slice_exact_match(pred: np.ndarray, gold: np.ndarray, slices: Sequence[Sequence[str]]
                      ) -> list[dict[str, Any]]:
    """Exact match on every row (:data:`~headwise.intent.evaluation.ALL_ROWS`) and on the
    rows of each slice name, in :data:`~headwise.text.slices.PHENOMENA`'s order (other names
    after, sorted): ``[{"slice", "n", "exact_match", "exact_match_interval"}, ...]``."""
    from headwise.text.slices import PHENOMENA

    names = sorted({n for row in slices for n in row},
                   key=lambda n: (PHENOMENA.index(n) if n in PHENOMENA else len(PHENOMENA), n))
    out = []
    for name in [ALL_ROWS, *names]:
        rows = [i for i, row in enumerate(slices) if name == ALL_ROWS or name in row]
        hits = (np.asarray(pred[rows], bool) == np.asarray(gold[rows], bool)).all(axis=1)
        out.append({"slice": name, "n": len(rows), "exact_match": float(hits.mean()),
                    "exact_match_interval": exact_match_interval(pred[rows], gold[rows])})
    return out


def value_accuracy(examples: Sequence[AnnotatedExample], predicted: Sequence[Sequence[Any]],
                   reference: date) -> dict[str, dict[str, float | int]]:
    """Per slot name: ``end_to_end`` (exact span and equal value) and ``normaliser`` (the
    gold text normalised equals the gold value), over the gold slots that carry a value."""
    counts: dict[str, dict[str, int]] = defaultdict(lambda: {"n": 0, "e2e": 0, "norm": 0})
    for e, found in zip(examples, predicted, strict=True):
        by_span = {(s.name, s.start, s.end): s.value for s in found}
        for s in e.slots:
            if s.value is None:
                continue
            c = counts[s.name]
            c["n"] += 1
            key = (s.name, s.start, s.end)
            c["e2e"] += int(key in by_span and _same(by_span[key], s.value))
            try:
                c["norm"] += int(_same(normalize_slot(s.name, s.text, reference=reference),
                                       s.value))
            except ValueError:
                pass
    return {name: {"n": c["n"], "end_to_end": c["e2e"] / c["n"], "normaliser": c["norm"] / c["n"]}
            for name, c in sorted(counts.items())}


def _same(a: Any, b: Any) -> bool:
    """Equal values, floats compared to 1e-9 inside dicts and lists too."""
    if isinstance(a, float) or isinstance(b, float):
        try:
            return abs(float(a) - float(b)) <= 1e-9 * max(1.0, abs(float(b)))
        except (TypeError, ValueError):
            return False
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list | tuple) and isinstance(b, list | tuple):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    return a == b


def format_compound_report(report: dict[str, Any]) -> str:
    """A short text summary of :func:`evaluate_compound`'s report."""
    m = report["intents"]
    lines = [f"examples: {report['num_examples']}",
             f"intents: micro-F1 {m['micro_f1']:.4f}  macro-F1 {m['macro_f1']:.4f}  "
             f"exact match {m['exact_match']:.4f}" + (
                 " [{:.4f}, {:.4f}]".format(*m["exact_match_interval"])
                 if "exact_match_interval" in m else "")]
    if "slots" in report:
        s = report["slots"]
        lines.append(f"slots: span F1 {s['f1']:.4f} (precision {s['precision']:.4f}, "
                     f"recall {s['recall']:.4f})")
        for name, v in report["values"].items():
            lines.append(f"  value {name:<18} n={v['n']:<5} end-to-end {v['end_to_end']:.3f}  "
                         f"normaliser {v['normaliser']:.3f}")
    if report["unseen_intents"]:
        lines.append("intents never seen in training: " + ", ".join(
            f"{k} ({v})" for k, v in report["unseen_intents"].items()))
    return "\n".join(lines)
