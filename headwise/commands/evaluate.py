"""``headwise eval``: accuracy, macro-F1, per-intent report, confusion matrix and, when the
data has a ``slices`` column or field, accuracy per slice (a compound model: intent F1,
exact match, slot spans and values), scored on the answers ``predict`` gives
(:func:`headwise.intent.evaluation.evaluate`, long texts read by the same policy); with
``--parent``, the model against its parent on the same rows
(:mod:`headwise.intent.comparison`)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from headwise.commands._common import (
    LONG_TEXT_POLICIES,
    LONG_TEXT_WINDOW_HELP,
    add_data_options,
    is_compound_model,
    long_text_choice,
    read,
    read_compound,
)
from headwise.commands.predict import _check_reference_date, _iso_date
from headwise.intent.compound.classifier import CompoundClassifier
from headwise.intent.evaluation import evaluate, format_report
from headwise.intent.kinds import load_single_label
from headwise.text.labels import marked_oos


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "eval", help="evaluate a trained classifier on labelled data",
        description="Accuracy, macro-F1, a per-intent report, out-of-scope recall and the "
        "confusion matrix (PNG) of a saved classifier on labelled data; when the data has a "
        "`slices` column (CSV) or field (JSON lines), names joined by ; or , (the demo corpus "
        "has one), also accuracy, in-scope reject rate and out-of-scope recall per slice. "
        "For a compound "
        "(multi-label) classifier: intent micro/macro-F1 and exact match, slot span F1 and "
        "normalised-value accuracy per slot. With --parent, the model against the model it "
        "was trained from on the same rows: per-intent changes, McNemar's exact test and a "
        "verdict. Every row is scored on the answer `headwise predict` gives it: a text "
        "over the model's maximum length is read by the same long-text policy.")
    p.add_argument("model", metavar="MODEL", help="directory saved by `headwise train` (or "
                   "by `headwise ensemble` or `EnsembleClassifier.save`)")
    p.add_argument("--data", required=True, help="labelled data file")
    p.add_argument("--out", help="where report.json and confusion.png go "
                   "(default: MODEL/eval-<data file name>)")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.add_argument("--long-text", type=long_text_choice, default="auto",
                   metavar="POLICY[:N]",
                   help="past the model's length, as predict --long-text: auto (what predict "
                   "and serve do), " + ", ".join(LONG_TEXT_POLICIES[1:])
                   + LONG_TEXT_WINDOW_HELP)
    p.add_argument("--reference-date", type=_iso_date, metavar="YYYY-MM-DD",
                   help="compound models: the \"today\" relative dates in the slot values "
                   "resolve against (default: the model's own, kept from its training data, "
                   "else today's date)")
    p.add_argument("--parent", metavar="PARENT",
                   help="compare with this model (the one MODEL was warm-started from, or any "
                   "other of the same task) on the same rows: per-intent changes, McNemar's "
                   "exact test, a verdict (report.json's parent_comparison)")
    add_data_options(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    out = Path(args.out) if args.out else Path(args.model) / f"eval-{Path(args.data).stem}"
    policy, chunk_length = args.long_text
    if is_compound_model(args.model):
        clf: Any = CompoundClassifier.load(args.model)
        examples = read_compound(args.data, args).examples
        out.mkdir(parents=True, exist_ok=True)
        report = evaluate(clf, examples, long_text=policy, chunk_length=chunk_length,
                          reference_date=args.reference_date)
        texts, gold, oos_labels = [e.text for e in examples], \
            [list(e.intents) for e in examples], []
    else:
        _check_reference_date(args)
        clf = load_single_label(args.model)
        data = read(args.data, args)
        out.mkdir(parents=True, exist_ok=True)
        oos_labels = model_oos_labels(clf)
        report = evaluate(clf, data.texts, marked_oos(data.labels, oos_labels),
                          long_text=policy, chunk_length=chunk_length, out_dir=out,
                          slices=data.slices)
        report["skipped_rows"] = len(data.skipped)
        texts, gold = data.texts, data.labels
    report["data"] = str(args.data)
    multi_label = isinstance(clf, CompoundClassifier)
    if args.parent:
        if multi_label != is_compound_model(args.parent):
            raise ValueError(f"--parent {args.parent} and {args.model}: one is a single-label "
                             f"model and the other a compound one; compare models of the "
                             f"same task")
        parent = CompoundClassifier.load(args.parent) if multi_label \
            else load_single_label(args.parent)
        report["parent_comparison"] = _compare(args, clf, parent, texts, gold,
                                               multi_label=multi_label, oos_labels=oos_labels)
    (out / "report.json").write_text(json.dumps(report, indent=2, ensure_ascii=False,
                                                default=str) + "\n", encoding="utf-8")
    if args.json:
        print(json.dumps({k: v for k, v in report.items() if k != "confusion_matrix"},
                         ensure_ascii=False, default=str))
    else:
        print(format_report(report))
        if args.parent:
            print("\n" + _describe_comparison(report["parent_comparison"], args.parent))
        print(f"\nreport: {out / 'report.json'}" + (f", confusion matrix: {report['confusion_png']}"
                                                   if "confusion_png" in report else ""))
    return 0


def model_oos_labels(clf: Any) -> list[str]:
    """The out-of-scope labels a saved single-label model was trained with besides the
    default ones (its recipe's ``decision.oos_labels``; none for a model without a recipe),
    which its evaluation and calibration data mean too."""
    recipe = clf.info.get("recipe") or {}
    extra = (recipe.get("decision") or {}).get("oos_labels") or []
    return [extra] if isinstance(extra, str) else [str(x) for x in extra]


def _compare(args: argparse.Namespace, clf: Any, parent: Any, texts: list[str],
             gold: list[Any], *, multi_label: bool, oos_labels: list[str]) -> dict[str, Any]:
    """:func:`~headwise.intent.comparison.compare_models` of the model and ``--parent``,
    with ``lineage``: whether the model records this parent (its identity) as the one it
    was warm-started from."""
    from headwise.intent.comparison import compare_models
    from headwise.intent.training.warm_start import lineage_of, model_identity

    comparison = compare_models(clf, parent, texts, gold, multi_label=multi_label,
                                oos_labels=oos_labels)
    recorded = lineage_of(args.model)
    if recorded is None:
        comparison["lineage"] = "the model records no parent (it was trained from scratch)"
    elif recorded.get("parent_id") == model_identity(args.parent):
        comparison["lineage"] = "the model was warm-started from this parent"
    else:
        comparison["lineage"] = (f"this is not the model's recorded parent ({recorded['parent']}"
                                 f", or it changed since: identities differ)")
    return comparison


def _describe_comparison(comparison: dict[str, Any], parent: str) -> str:
    from headwise.intent.comparison import format_comparison

    return format_comparison(comparison, parent=parent) + f"\n({comparison['lineage']})"
