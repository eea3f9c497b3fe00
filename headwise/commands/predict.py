"""``headwise predict``: top-k intents with calibrated confidence, or out-of-scope."""

from __future__ import annotations

import argparse
import json
import sys

from headwise.commands._common import is_compound_model
from headwise.intent.compound import CompoundClassifier
from headwise.intent.ensemble import load_classifier
from headwise.intent.multilabel import Thresholds


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "predict", help="predict the intents of texts",
        description="Top-k intents with calibrated confidence for each text; below the "
        "classifier's threshold the answer is out_of_scope. Without texts, reads one text per "
        "line from standard input. A compound (multi-label) classifier answers every intent "
        "that passes its threshold, and the slots with their spans and normalised values.")
    p.add_argument("model", metavar="MODEL", help="directory saved by `headwise train` (or "
                   "by `headwise ensemble` or `EnsembleClassifier.save`)")
    p.add_argument("texts", nargs="*", metavar="TEXT", help="texts to classify")
    p.add_argument("--top-k", type=int, default=3, help="intents listed per text (default 3)")
    p.add_argument("--threshold", type=float,
                   help="override the saved out-of-scope threshold (0 disables it)")
    p.add_argument("--json", action="store_true", help="one JSON object per line")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    texts = list(args.texts) if args.texts else [ln.strip() for ln in sys.stdin if ln.strip()]
    if not texts:
        raise ValueError("no texts: pass them as arguments or on standard input")
    if is_compound_model(args.model):
        return _run_compound(args, texts)
    clf = load_classifier(args.model)
    for p in clf.predict(texts, top_k=args.top_k, threshold=args.threshold):
        if args.json:
            print(json.dumps(p.to_dict(), ensure_ascii=False))
            continue
        head = "OUT OF SCOPE" if p.out_of_scope else p.intent
        print(f"{p.text}\n  -> {head}  ({p.confidence:.3f})")
        for name, prob in p.top_k:
            print(f"     {prob:6.3f}  {name}")
    return 0


def _run_compound(args: argparse.Namespace, texts: list[str]) -> int:
    clf = CompoundClassifier.load(args.model)
    thresholds = None if args.threshold is None else Thresholds(args.threshold)
    for p in clf.predict(texts, top_k=args.top_k, thresholds=thresholds):
        if args.json:
            print(json.dumps(p.to_dict(), ensure_ascii=False, default=str))
            continue
        head = "OUT OF SCOPE" if p.out_of_scope else ", ".join(
            f"{name} ({prob:.3f})" for name, prob in p.intents)
        print(f"{p.text}\n  -> {head}")
        for s in p.slots:
            print(f"     {s.name}: {s.text!r} [{s.start}:{s.end}] = "
                  f"{json.dumps(s.value, ensure_ascii=False, default=str)}")
    return 0
