"""Evaluating a classifier of any kind: the one evaluation, through its predictor's answers.

:func:`evaluate` scores a labelled dataset the way ``headwise eval`` reports it, from the
answers ``predict`` and ``serve`` give (:mod:`headwise.intent.inference`: the same
long-text policy, the same out-of-scope rule), and reports what applies
(``scored_as``):

* single-label gold answered by a single-label model (a network, a TF-IDF model, an
  ensemble, a soup, a distilled student): closed-set metrics on the in-scope rows whose
  intent the model knows (each answer's top intent): accuracy, macro-F1, a per-intent
  table and the confusion matrix; with the saved out-of-scope rule: in-scope accuracy (a
  rejected query counts as wrong) and, when the data has out-of-scope rows, their recall;
  intents seen only in this data are counted and listed, never crashed on, and left out of
  the closed-set metrics; per slice when the rows name slices;
* annotated gold (several intents, slot spans) or a multi-label model's answers: gold and
  answers as sets of intents (a single-label answer is a set of zero or one): micro- and
  macro-F1, the exact-match rate (every intent right, nothing extra) and per-intent
  scores; with a slot tagger on annotated rows, exact span F1, overall and per slot name,
  and per slot name the share of gold values predicted exactly end to end and the share
  the normaliser gets right from the gold span text alone (:func:`value_accuracy`).

:func:`format_report` prints either. :func:`slice_report` scores answers per slice (the
phenomena a row exercises: ``typo``, ``negation_scope`` ... from a ``slices`` column or
field), and :func:`format_slice_table` prints it. How fast a classifier answers is
:mod:`headwise.intent.latency`.
"""
from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from datetime import date
from pathlib import Path
from typing import Any

import numpy as np

from headwise.intent.compound.thresholds import multilabel_metrics, span_f1
from headwise.intent.inference.bucketing import CHUNK_POOLING, SENTENCE_STRIDE
from headwise.intent.inference.predictor import Predictor
from headwise.intent.prediction import Prediction
from headwise.slots import normalize_slot
from headwise.text.dataset import Example
from headwise.text.labels import is_oos_label
from headwise.train.metrics import classification_metrics, confusion_matrix_png

__all__ = ["ALL_ROWS", "SliceRow", "evaluate", "exact_match_interval", "format_report",
           "format_slice_table", "slice_exact_match", "slice_report",
           "value_accuracy"]

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


def evaluate(model: Any, rows: Sequence[str] | Sequence[Example],
             labels: Sequence[str | None] | None = None, *, long_text: str = "auto",
             chunk_length: float | int | None = None, batch_size: int = 64,
             out_dir: str | Path | None = None,
             slices: Sequence[Sequence[str] | None] | None = None,
             reference_date: date | None = None) -> dict[str, Any]:
    """Score a classifier of any kind on gold rows, through its predictor's answers: what
    ``headwise eval`` reports.

    The answers are the :class:`~headwise.intent.prediction.Prediction`\\ s that
    ``predict``, the file stream and ``headwise serve`` give (the predictor of
    :func:`~headwise.intent.inference.load.load_predictor`, on PyTorch), with the same
    long-text policy, so a text over the model's maximum length is scored as it is
    answered (a single network's ``"auto"``: read in windows, the most confident
    answering; see BENCHMARKS.md, ``demo:long_text``).

    What is reported depends on the gold rows and the answers (``scored_as``):

    * ``"single_label"``, for single-label gold (``rows`` are texts, ``labels`` their
      intents, out-of-scope rows labelled ``oos`` or similar) answered by a single-label
      model: closed-set metrics on the in-scope rows whose intent the model knows (each
      answer's top intent, the threshold off): accuracy, macro-F1, per-intent table,
      confusion matrix, the misclassified rows; with the saved out-of-scope rule (the
      threshold or the detector): in-scope accuracy, reject rate and out-of-scope recall;
      intents the model does not know, counted and left out; per slice when ``slices``
      are given;
    * ``"multi_label"``, for annotated gold (``rows`` are
      :class:`~headwise.text.dataset.Example`\\ s: several intents and slot spans) or
      for a multi-label model's answers: both read as sets of intents (a single-label
      answer: its answered intent, none when out of scope; a gold row's out-of-scope label,
      ``oos`` or similar, is no intent): micro- and macro-F1, exact match and per-intent
      scores, the exact match's 95 % Wilson interval
      (``intents.exact_match_interval``: the rows as independent trials), per slice when
      ``slices`` are given; for a model with a slot tagger on annotated rows, exact slot
      span F1 and the value accuracy per slot (:func:`value_accuracy`, relative dates
      resolved against ``reference_date``).

    Args:
        model: a loaded classifier of any kind (a network, a TF-IDF model, an ensemble, a
            soup, a distilled student, a compound model) or a
            :class:`~headwise.intent.inference.predictor.Predictor` (the runtime and
            long-text policy it was built with).
        rows: the texts (with ``labels``) or annotated examples (without).
        labels: the gold intent of each text (single-label gold).
        long_text: the long-text policy
            (:data:`~headwise.intent.inference.bucketing.LONG_TEXT_POLICIES`; ``"auto"``,
            as ``predict`` and ``serve``); a predictor's own applies when ``model`` is one.
        chunk_length: the width of a chunked policy's windows, as
            :func:`~headwise.intent.inference.load.load_predictor` takes it (None: the
            default); a predictor's own applies when ``model`` is one.
        batch_size: most rows in one forward pass.
        out_dir: where ``confusion.png`` goes (single-label scores; created).
        slices: each row's slice names or None; when any row has some, the report gets
            ``slices``: single-label scores, :func:`slice_report`'s rows as dicts;
            multi-label scores, exact match per slice with its interval
            (:func:`slice_exact_match`).
        reference_date: "today" for relative dates in slot values (default: the model's
            saved one, else today); only a compound model takes it.

    Returns:
        A JSON-serialisable dict. Always: ``scored_as``, ``runtime`` (what ran the model),
        ``long_text`` (``{"policy", "window", "rows"}``: the policy applied, the width in
        tokens of the windows it cuts a long text into (None unless it chunks) and the rows
        over the maximum length). ``"single_label"``: ``num_rows``, ``num_examples``, ``accuracy``,
        ``macro_f1``, ``per_label``, ``confusion_matrix``, ``labels`` (closed-set, from
        :func:`headwise.train.classification_metrics`), ``threshold``, ``ood_detector``,
        ``in_scope_accuracy_with_threshold``, ``reject_rate``, ``oos_examples``,
        ``oos_recall`` (None without out-of-scope rows), ``unseen_labels`` (name ->
        count), ``errors`` (the misclassified in-scope rows: text, gold, predicted,
        confidence), ``confusion_png`` when written and ``slices`` when given.
        ``"multi_label"``: ``num_examples``, ``intents``
        (:func:`~headwise.intent.compound.thresholds.multilabel_metrics`),
        ``unseen_intents`` and, when slots are scored, ``slots``
        (:func:`~headwise.intent.compound.thresholds.span_f1`) and ``values``.

    Raises:
        ValueError: no rows, lengths that differ, an unlabelled row, texts without labels
            or annotated rows with them, ``slices`` of another length than the rows, a
            ``long_text`` other than ``"auto"`` or a ``chunk_length`` with a predictor, a
            policy or window width the model's kind cannot apply, or a
            ``reference_date`` for a model without slots.
        LongTextError: a text over the maximum length under ``"reject"``.
    """
    rows = list(rows)
    if not rows:
        raise ValueError("no rows to evaluate")
    annotated = isinstance(rows[0], Example)
    if labels is None:
        if not all(isinstance(r, Example) for r in rows):
            raise ValueError("give the gold labels of the texts (single-label gold), or "
                             "Example rows (several intents and slots)")
    else:
        if annotated or not all(isinstance(r, str) for r in rows):
            raise ValueError("labels go with texts; Example rows carry their own "
                             "intents")
        labels = list(labels)
        if len(labels) != len(rows):
            raise ValueError(f"{len(rows)} texts but {len(labels)} labels")
        if any(y is None for y in labels):
            raise ValueError("evaluation needs a label on every row")
    predictor = _predictor(model, long_text, chunk_length, batch_size)
    if labels is not None and predictor.task == "single_label":
        return _single_label(predictor, list(rows), labels, out_dir=out_dir, slices=slices)
    if slices is not None and len(slices) != len(rows):
        raise ValueError(f"{len(slices)} slice lists for {len(rows)} rows")
    gold = [Example(e.text, tuple(i for i in e.intents if not is_oos_label(i)), e.slots,
                    e.line, e.slices) for e in rows] if labels is None else [
        Example(t, () if is_oos_label(y) else (str(y),), (), i + 1)
        for i, (t, y) in enumerate(zip(rows, labels, strict=True))]
    return _multi_label(predictor, gold, slots=annotated, reference_date=reference_date,
                        slices=slices)


def _predictor(model: Any, long_text: str, chunk_length: float | int | None,
               batch_size: int) -> Predictor:
    """The predictor that answers for ``model``: itself when it is one, else the one
    ``load_predictor`` gives a loaded classifier on PyTorch with ``long_text`` and
    ``chunk_length``."""
    if isinstance(model, Predictor):
        if long_text != "auto":
            raise ValueError(f"long_text {long_text!r}: a predictor reads long texts by the "
                             f"policy it was built with; build it with this one")
        if chunk_length is not None:
            raise ValueError(f"chunk_length {chunk_length!r}: a predictor reads long texts "
                             f"in the windows it was built with; build it with this width")
        return model
    from headwise.intent.inference.load import load_predictor

    return load_predictor(model, runtime="torch", long_text=long_text,
                          chunk_length=chunk_length, max_rows=batch_size)


def _answer(predictor: Predictor, texts: list[str], **options: Any
            ) -> tuple[list[Prediction], dict[str, Any]]:
    """The predictor's answers to texts (top intent only) and the report's common part:
    ``runtime`` and ``long_text`` (the policy and how many rows went past the maximum
    length)."""
    answers, notes = predictor.predictions(texts, top_k=1, **options)
    policy = getattr(predictor, "long_text", "truncate")
    chunked = policy in CHUNK_POOLING
    window = getattr(predictor, "window", None) if chunked else None
    stride = getattr(predictor, "chunk_stride", None) if chunked else None
    return answers, {"runtime": predictor.runtime.name,
                     "long_text": {"policy": policy, "window": window, "stride": stride,
                                   "rows": sum(n is not None for n in notes)}}


def _single_label(predictor: Predictor, texts: list[str], labels: list[str | None], *,
                  out_dir: str | Path | None,
                  slices: Sequence[Sequence[str] | None] | None) -> dict[str, Any]:
    """The single-label report of :func:`evaluate` from the predictor's answers."""
    if slices is not None and len(slices) != len(texts):
        raise ValueError(f"{len(texts)} texts but {len(slices)} slice lists")
    answers, common = _answer(predictor, texts)
    names = predictor.labels
    index = {name: i for i, name in enumerate(names)}
    pred = np.array([index[a.top_k[0][0]] for a in answers])
    conf = np.array([a.top_k[0][1] for a in answers])
    reject = np.array([a.out_of_scope for a in answers], dtype=bool)
    oos = np.array([is_oos_label(y) for y in labels], dtype=bool)
    known = np.array([y in index for y in labels], dtype=bool)
    unseen = Counter(y for y, o, k in zip(labels, oos, known, strict=True) if not o and not k)
    rows = np.flatnonzero(known)
    report: dict[str, Any] = {"scored_as": "single_label", "num_rows": len(texts)}
    if len(rows):
        gold = np.array([index[labels[i]] for i in rows])
        report.update(classification_metrics(gold, pred[rows], names))
        kept = ~reject[rows]
        report["in_scope_accuracy_with_threshold"] = float(((pred[rows] == gold) & kept).mean())
        report["reject_rate"] = float((~kept).mean())
        report["errors"] = [
            {"text": texts[i], "gold": labels[i], "predicted": names[pred[i]],
             "confidence": float(conf[i])}
            for i, g in zip(rows, gold, strict=True) if pred[i] != g]
        if out_dir is not None:
            png = confusion_matrix_png(report["confusion_matrix"], names,
                                       Path(out_dir) / "confusion.png")
            report["confusion_png"] = str(png)
    clf = predictor.classifier
    report["threshold"] = clf.threshold
    detector = getattr(clf, "ood", None)
    report["ood_detector"] = None if detector is None else detector.name
    report["oos_examples"] = int(oos.sum())
    report["oos_recall"] = float(reject[oos].mean()) if oos.any() else None
    report["unseen_labels"] = dict(sorted(unseen.items()))
    report.update(common)
    if slices is not None and any(s is not None for s in slices):
        from headwise.text.slices import PHENOMENA

        top = [names[p] for p in pred]
        said = [None if r else y for y, r in zip(top, reject, strict=True)]
        report["slices"] = [r.to_dict() for r in slice_report(
            [str(y) for y in labels], said, slices, closed=top, order=PHENOMENA)]
    return report


def _multi_label(predictor: Predictor, examples: list[Example], *, slots: bool,
                 reference_date: date | None,
                 slices: Sequence[Sequence[str] | None] | None = None) -> dict[str, Any]:
    """The multi-label report of :func:`evaluate`: the answers and the gold as sets of
    intents (exact match with its interval, per slice when ``slices`` name some); slots
    when the predictor tags them and ``slots`` (the gold rows annotate them)."""
    clf = predictor.classifier
    tagger = bool(getattr(clf, "slot_tags", None))
    options: dict[str, Any] = {}
    reference: date | None = None
    if "reference_date" in predictor.options:
        reference = reference_date or clf.reference_date or date.today()
        options["reference_date"] = reference
    elif reference_date is not None:
        raise ValueError(f"reference_date: {type(predictor).__name__} answers no slot "
                         f"values; only a compound (intents + slots) model takes one")
    answers, common = _answer(predictor, [e.text for e in examples], **options)
    names = predictor.labels
    index = {name: i for i, name in enumerate(names)}
    gold = np.zeros((len(examples), len(index)), dtype=bool)
    pred = np.zeros_like(gold)
    unseen: Counter[str] = Counter()
    for r, (e, a) in enumerate(zip(examples, answers, strict=True)):
        for name in e.intents:
            if name in index:
                gold[r, index[name]] = True
            else:
                unseen[name] += 1
        for name, _ in a.intents:
            pred[r, index[name]] = True
    intents = multilabel_metrics(pred, gold, names)
    intents["exact_match_interval"] = exact_match_interval(pred, gold)
    report: dict[str, Any] = {"scored_as": "multi_label", "num_examples": len(examples),
                              "intents": intents,
                              "unseen_intents": dict(sorted(unseen.items()))}
    if slices is not None and any(s for s in slices):
        report["slices"] = slice_exact_match(pred, gold, [s or () for s in slices])
    if tagger and slots and reference is not None:
        report["slots"] = span_f1([a.slots for a in answers], [e.slots for e in examples])
        report["values"] = value_accuracy(examples, [a.slots for a in answers], reference)
    report.update(common)
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
    """Exact match on every row (:data:`ALL_ROWS`) and on the rows of each slice name, in
    :data:`~headwise.text.slices.PHENOMENA`'s order (other names after, sorted):
    ``[{"slice", "n", "exact_match", "exact_match_interval"}, ...]``."""
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


def value_accuracy(examples: Sequence[Example], predicted: Sequence[Sequence[Any]],
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


def format_report(report: dict[str, Any], *, per_intent: bool = True) -> str:
    """A plain-text summary of :func:`evaluate`'s report, of what it holds (what ``eval``
    prints)."""
    if report.get("scored_as") == "multi_label":
        lines = _multi_label_lines(report)
    else:
        lines = _single_label_lines(report, per_intent=per_intent)
    long = report.get("long_text") or {}
    if long.get("rows"):
        rows = "1 row" if long["rows"] == 1 else f"{long['rows']} rows"
        windows = f" in windows of {long['window']} tokens" if long.get("window") else ""
        if long.get("stride") == SENTENCE_STRIDE:
            windows += " that follow the text's sentences"
        lines.append(f"{rows} over the model's maximum length, read by the {long['policy']} "
                     f"policy{windows} as predict and serve read them")
    return "\n".join(lines)


def _single_label_lines(report: dict[str, Any], *, per_intent: bool) -> list[str]:
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
    return lines


def _multi_label_lines(report: dict[str, Any]) -> list[str]:
    m = report["intents"]
    lines = [f"examples: {report['num_examples']}",
             f"intents: micro-F1 {m['micro_f1']:.4f}  macro-F1 {m['macro_f1']:.4f}  "
             f"exact match {m['exact_match']:.4f}" + (
                 " [{:.4f}, {:.4f}]".format(*m["exact_match_interval"])
                 if "exact_match_interval" in m else "")]
    for r in report.get("slices", [])[1:]:
        lines.append(f"  slice {r['slice']:<18} n={r['n']:<5} exact match "
                     f"{r['exact_match']:.3f} [{r['exact_match_interval'][0]:.3f}, "
                     f"{r['exact_match_interval'][1]:.3f}]")
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
    return lines
