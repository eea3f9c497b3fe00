"""Evaluating an intent classifier: accuracy, macro-F1, per-intent report, out-of-scope
behaviour, confusion matrix and latency.

:func:`evaluate_classifier` scores a labelled dataset the way ``headwise eval`` reports it:

* closed-set metrics on the in-scope rows whose intent the model knows (the threshold
  off): accuracy, macro-F1, a per-intent table and the confusion matrix;
* with the saved threshold: in-scope accuracy (a rejected query counts as wrong) and,
  when the data has out-of-scope rows, their recall;
* intents seen only in this data (not known to the model) are counted and listed, never
  crashed on; their rows are left out of the closed-set metrics.

:func:`slice_report` scores the same answers per slice (the phenomena a row exercises:
``typo``, ``negation_scope`` ... from a ``slices`` column or field), and
:func:`format_slice_table` prints it. :func:`measure_latency` times single queries (p50,
p99) and batched throughput.
"""

from __future__ import annotations

import statistics
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from headwise.intent.classifier import IntentClassifier
from headwise.intent.inference.predictor import Predictor
from headwise.text.labels import is_oos_label
from headwise.train.metrics import classification_metrics, confusion_matrix_png

#: the name of :func:`slice_report`'s row over every example
ALL_ROWS = "all"


@dataclass(frozen=True)
class SliceRow:
    """The scores of one slice.

    Attributes:
        slice: the slice name (``"all"``: every row).
        n: rows in the slice.
        n_in_scope: of which in scope (gold is an intent).
        n_oos: of which out of scope.
        accuracy: share of rows answered right with the threshold: an in-scope row when its
            answer is its intent, an out-of-scope row when it is rejected.
        closed_accuracy: share of in-scope rows whose top intent (threshold off) is right;
            None without in-scope rows or closed-set answers.
        in_scope_reject_rate: share of in-scope rows rejected (None without any).
        oos_recall: share of out-of-scope rows rejected (None without any).
    """

    slice: str
    n: int
    n_in_scope: int
    n_oos: int
    accuracy: float
    closed_accuracy: float | None
    in_scope_reject_rate: float | None
    oos_recall: float | None

    def to_dict(self) -> dict[str, Any]:
        """The row as a JSON-serialisable dict."""
        return asdict(self)


def slice_report(gold: Sequence[str], predicted: Sequence[str | None],
                 slices: Sequence[Sequence[str] | None], *,
                 closed: Sequence[str] | None = None,
                 order: Sequence[str] | None = None) -> list[SliceRow]:
    """Accuracy, in-scope reject rate and out-of-scope recall per slice.

    A row counts in every slice it names (a row with ``("typo", "code_mixed")`` in both)
    and in the first row, ``"all"``; a row whose slices are None counts in ``"all"`` only.

    Args:
        gold: the gold labels; out-of-scope rows labelled as
            :func:`headwise.text.labels.is_oos_label` recognises (``oos`` ...).
        predicted: the answers with the threshold: an intent, or None / an out-of-scope
            label for a rejected row.
        slices: each row's slice names (or None).
        closed: each row's top intent with the threshold off (for ``closed_accuracy``).
        order: slice names to list first, in this order; the others follow sorted by name.

    Returns:
        ``[SliceRow("all", ...), SliceRow(<slice>, ...), ...]``.

    Raises:
        ValueError: the sequences differ in length.
    """
    gold, predicted, slices = list(gold), list(predicted), list(slices)
    closed = list(closed) if closed is not None else None
    if not len(gold) == len(predicted) == len(slices) or (
            closed is not None and len(closed) != len(gold)):
        raise ValueError(f"{len(gold)} gold labels, {len(predicted)} answers, {len(slices)} "
                         f"slice lists" + ("" if closed is None else f", {len(closed)} closed"))
    members: dict[str, list[int]] = {ALL_ROWS: list(range(len(gold)))}
    for i, names in enumerate(slices):
        for name in dict.fromkeys(names or ()):
            members.setdefault(name, []).append(i)
    first = [ALL_ROWS, *(order or ())]
    names = [n for n in first if n in members] + sorted(n for n in members if n not in first)
    return [_slice_row(name, members[name], gold, predicted, closed) for name in names]


def _slice_row(name: str, rows: list[int], gold: list[str], predicted: list[str | None],
               closed: list[str] | None) -> SliceRow:
    oos = [i for i in rows if is_oos_label(gold[i])]
    inside = [i for i in rows if not is_oos_label(gold[i])]

    def rejected(i: int) -> bool:
        return predicted[i] is None or is_oos_label(predicted[i])

    def share(hits: int, total: int) -> float | None:
        return hits / total if total else None

    right = sum(rejected(i) for i in oos) + sum(
        not rejected(i) and predicted[i] == gold[i] for i in inside)
    return SliceRow(
        name, len(rows), len(inside), len(oos), right / len(rows) if rows else 0.0,
        share(sum(closed[i] == gold[i] for i in inside), len(inside)) if closed else None,
        share(sum(rejected(i) for i in inside), len(inside)),
        share(sum(rejected(i) for i in oos), len(oos)))


def format_slice_table(rows: Sequence[SliceRow | dict[str, Any]]) -> str:
    """A plain-text table of :func:`slice_report`'s rows (or their dicts)."""
    rows = [r.to_dict() if isinstance(r, SliceRow) else r for r in rows]
    width = max([len("slice")] + [len(r["slice"]) for r in rows]) + 2

    def pct(x: float | None) -> str:
        return "-" if x is None else f"{100 * x:.1f}"

    lines = [f"{'slice':<{width}}{'n':>6}{'accuracy':>10}{'closed-set':>12}"
             f"{'in-scope rejected':>19}{'oos recall':>12}"]
    for r in rows:
        lines.append(f"{r['slice']:<{width}}{r['n']:>6}{pct(r['accuracy']):>10}"
                     f"{pct(r['closed_accuracy']):>12}{pct(r['in_scope_reject_rate']):>19}"
                     f"{pct(r['oos_recall']):>12}")
    return "\n".join(lines)


def evaluate_classifier(clf: IntentClassifier, texts: Sequence[str],
                        labels: Sequence[str | None], *, out_dir: str | Path | None = None,
                        batch_size: int = 64,
                        slices: Sequence[Sequence[str] | None] | None = None
                        ) -> dict[str, Any]:
    """Score ``clf`` on labelled texts; optionally write ``confusion.png`` and
    ``predictions.jsonl``-ready rows.

    Args:
        clf: the classifier.
        texts: the texts.
        labels: their gold intents (out-of-scope rows labelled ``oos`` or similar).
        out_dir: when given, the confusion matrix PNG is written there.
        batch_size: texts per forward pass.
        slices: each row's slice names (or None); when any row has some, the report gets
            ``slices``: :func:`slice_report`'s rows as dicts (percentages as shares).

    Returns:
        A JSON-serialisable dict: ``num_examples``, ``accuracy``, ``macro_f1``,
        ``per_label``, ``confusion_matrix``, ``labels`` (closed-set, from
        :func:`headwise.train.classification_metrics`), ``threshold``,
        ``in_scope_accuracy_with_threshold``, ``reject_rate``, ``oos_examples``,
        ``oos_recall`` (None without out-of-scope rows), ``unseen_labels`` (name ->
        count), ``errors`` (the misclassified in-scope rows: text, gold, predicted,
        confidence), ``confusion_png`` when written and ``slices`` when given.

    Raises:
        ValueError: different lengths, no texts, or unlabelled rows.
    """
    texts, labels = list(texts), list(labels)
    if len(texts) != len(labels):
        raise ValueError(f"{len(texts)} texts but {len(labels)} labels")
    if any(y is None for y in labels):
        raise ValueError("evaluation needs a label on every row")
    if hasattr(clf, "predict_proba_and_scores"):  # the detector's decision, when it has one
        probs, scores = clf.predict_proba_and_scores(texts, batch_size=batch_size)
        reject = scores.rejected
    else:
        probs = clf.predict_proba(texts, batch_size=batch_size)
        reject = probs.max(1) < clf.threshold
    pred = probs.argmax(1)
    conf = probs.max(1)
    index = {name: i for i, name in enumerate(clf.labels)}
    oos = np.array([is_oos_label(y) for y in labels], dtype=bool)
    known = np.array([y in index for y in labels], dtype=bool)
    unseen = Counter(y for y, o, k in zip(labels, oos, known, strict=True) if not o and not k)
    rows = np.flatnonzero(known)
    report: dict[str, Any] = {"num_rows": len(texts)}
    if len(rows):
        gold = np.array([index[labels[i]] for i in rows])
        report.update(classification_metrics(gold, pred[rows], clf.labels))
        kept = ~reject[rows]
        report["in_scope_accuracy_with_threshold"] = float(((pred[rows] == gold) & kept).mean())
        report["reject_rate"] = float((~kept).mean())
        report["errors"] = [
            {"text": texts[i], "gold": labels[i], "predicted": clf.labels[pred[i]],
             "confidence": float(conf[i])}
            for i, g in zip(rows, gold, strict=True) if pred[i] != g]
        if out_dir is not None:
            png = confusion_matrix_png(report["confusion_matrix"], clf.labels,
                                       Path(out_dir) / "confusion.png")
            report["confusion_png"] = str(png)
    report["threshold"] = clf.threshold
    detector = getattr(clf, "ood", None)
    report["ood_detector"] = None if detector is None else detector.name
    report["oos_examples"] = int(oos.sum())
    report["oos_recall"] = float(reject[oos].mean()) if oos.any() else None
    report["unseen_labels"] = dict(sorted(unseen.items()))
    if slices is not None and any(s is not None for s in slices):
        from headwise.text.slices import PHENOMENA

        top = [clf.labels[p] for p in pred]
        answers = [None if r else y for y, r in zip(top, reject, strict=True)]
        report["slices"] = [r.to_dict() for r in slice_report(
            [str(y) for y in labels], answers, slices, closed=top, order=PHENOMENA)]
    return report


def format_report(report: dict[str, Any], *, per_intent: bool = True) -> str:
    """A plain-text summary of :func:`evaluate_classifier`'s report (what ``eval`` prints)."""
    lines = []
    if "accuracy" in report:
        lines.append(f"accuracy {report['accuracy']:.4f}   macro-F1 {report['macro_f1']:.4f}   "
                     f"({report['num_examples']} in-scope rows)")
        lines.append(f"with the out-of-scope threshold {report['threshold']:.3f}: in-scope "
                     f"accuracy {report['in_scope_accuracy_with_threshold']:.4f}, "
                     f"{report['reject_rate']:.1%} rejected")
    if report.get("oos_recall") is not None:
        lines.append(f"out-of-scope recall {report['oos_recall']:.4f} "
                     f"({report['oos_examples']} out-of-scope rows)")
    if report.get("unseen_labels"):
        seen = ", ".join(f"{k} ({v})" for k, v in report["unseen_labels"].items())
        lines.append(f"intents the model does not know (left out of the metrics): {seen}")
    if report.get("slices"):
        lines.append("")
        lines.append("per slice (accuracy with the threshold; closed-set: top intent, in-scope "
                     "rows; %):")
        lines.append(format_slice_table(report["slices"]))
    if per_intent and "per_label" in report:
        width = max(len(k) for k in report["per_label"]) + 2
        lines.append("")
        lines.append(f"{'intent':<{width}}{'precision':>10}{'recall':>10}{'f1':>10}"
                     f"{'support':>9}")
        for name, m in report["per_label"].items():
            lines.append(f"{name:<{width}}{m['precision']:>10.3f}{m['recall']:>10.3f}"
                         f"{m['f1']:>10.3f}{m['support']:>9d}")
    return "\n".join(lines)


@torch.inference_mode()
def measure_latency(model: IntentClassifier | Predictor, texts: Sequence[str], *,
                    queries: int = 200, batch_size: int = 32, batches: int = 20,
                    warmup: int = 10) -> dict[str, float]:
    """Single-query latency and batched throughput of a classifier's ``predict`` or of a
    predictor's answers.

    Single queries cycle through ``texts`` one at a time (tokenisation, forward,
    softmax and top-k included, as a service would run them). Throughput runs
    ``batches`` batches of ``batch_size`` texts.

    Args:
        model: a classifier (its ``predict``: the PyTorch path) or a
            :class:`~headwise.intent.inference.predictor.Predictor` (from
            :func:`~headwise.intent.inference.load.load_predictor`: the runtime
            ``headwise serve`` runs; its ``max_rows`` caps the rows of one forward pass).
        texts: the queries.
        queries: single queries timed.
        batch_size: texts per timed batch.
        batches: batches timed.
        warmup: untimed single queries first.

    Returns:
        ``{"p50_ms", "p99_ms", "mean_ms", "throughput_per_s", "batch_size",
        "queries"}``.

    Raises:
        ValueError: no texts.
    """
    texts = [t for t in texts if t.strip()]
    if not texts:
        raise ValueError("measure_latency needs texts")
    if isinstance(model, Predictor):
        predict = model.predictions
    else:
        def predict(chunk: str | list[str]) -> Any:
            return model.predict(chunk, batch_size=batch_size)
    for i in range(warmup):
        predict(texts[i % len(texts)])
    times = []
    for i in range(queries):
        start = time.perf_counter()
        predict(texts[i % len(texts)])
        times.append((time.perf_counter() - start) * 1e3)
    per_batch = []
    for b in range(batches):
        chunk = [texts[(b * batch_size + j) % len(texts)] for j in range(batch_size)]
        start = time.perf_counter()
        predict(chunk)
        per_batch.append(time.perf_counter() - start)
    return {"p50_ms": statistics.median(times), "p99_ms": float(np.percentile(times, 99)),
            "mean_ms": statistics.fmean(times),
            "throughput_per_s": batch_size / statistics.median(per_batch),
            "batch_size": batch_size, "queries": queries}
