"""``headwise predict``: top-k intents with calibrated confidence, or out-of-scope.

Each answer echoes at most :data:`ECHO_CHARS` characters of its text (then ``…``), with
the text's length in ``text_chars``, and says in ``long_text`` when a network read only
the first ``max_length`` tokens of it (the service's ``long_text`` note, null otherwise).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from typing import Any

from headwise.commands._common import is_compound_model

#: characters of a text that an answer repeats (a longer one is cut, and marked with …)
ECHO_CHARS = 200


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "predict", help="predict the intents of texts",
        description="Top-k intents with calibrated confidence for each text; below the "
        "classifier's threshold the answer is out_of_scope. Without texts, reads one text per "
        "line from standard input. A compound (multi-label) classifier answers every intent "
        "that passes its threshold, and the slots with their spans and normalised values. "
        f"Each answer repeats the first {ECHO_CHARS} characters of its text (text_chars: its "
        "length) and notes a text longer than the model reads (long_text).")
    p.add_argument("model", metavar="MODEL", help="directory saved by `headwise train` (or "
                   "by `headwise ensemble` or `EnsembleClassifier.save`)")
    # a default, so that TEXT is not reported missing beside a missing MODEL
    p.add_argument("texts", nargs="*", metavar="TEXT", default=(),
                   help="texts to classify (default: one a line from standard input)")
    p.add_argument("--top-k", type=int, default=3, help="intents listed per text (default 3)")
    p.add_argument("--threshold", type=float,
                   help="override the saved out-of-scope threshold (0 disables it)")
    p.add_argument("--json", action="store_true", help="one JSON object per line")
    p.set_defaults(func=run)


def echo(text: str, limit: int = ECHO_CHARS) -> str:
    """``text`` as an answer repeats it: whole up to ``limit`` characters, else its first
    ``limit`` characters and ``…``."""
    return text if len(text) <= limit else text[:limit] + "…"


def long_text_notes(classifier: Any, texts: Sequence[str]) -> list[dict[str, Any] | None]:
    """The ``long_text`` note of each text, as the service words it
    (:func:`headwise.serve.bucketing.long_text_note`): ``{"policy": "truncated", "tokens",
    "max_length", "chunks": 1}`` when a network of the classifier reads only the first
    ``max_length`` tokens of it (the one that cuts the most, in an ensemble), else None.
    A TF-IDF model reads every text whole.

    Args:
        classifier: a loaded intent, compound, TF-IDF or ensemble classifier.
        texts: the texts it is asked about.
    """
    from headwise.intent.classifier import IntentClassifier
    from headwise.intent.compound import CompoundClassifier
    from headwise.intent.ensemble import EnsembleClassifier

    members = classifier.members if isinstance(classifier, EnsembleClassifier) else [classifier]
    networks = [m for m in members if isinstance(m, IntentClassifier | CompoundClassifier)]
    cut: list[tuple[int, int] | None] = [None] * len(texts)  # (tokens, max_length)
    for net in networks:
        for i, n in enumerate(net.tokenizer.lengths(list(texts))):
            old = cut[i]
            if n > net.max_length and (old is None or n - net.max_length > old[0] - old[1]):
                cut[i] = (int(n), int(net.max_length))
    if all(c is None for c in cut):
        return [None] * len(texts)
    from headwise.serve.bucketing import long_text_note  # only for a text that was cut

    return [None if c is None else long_text_note("truncated", c[0], c[1], 1) for c in cut]


def record(answer: dict[str, Any], text: str, note: dict[str, Any] | None) -> dict[str, Any]:
    """An answer's ``--json`` object: ``answer`` (``to_dict()`` of a prediction) with
    its text cut by :func:`echo`, ``text_chars`` and ``long_text``."""
    return {**answer, "text": echo(text), "text_chars": len(text), "long_text": note}


def _note_line(text: str, note: dict[str, Any] | None) -> str:
    """The plain output's first line of an answer: the (cut) text, and what was cut."""
    parts = []
    if len(text) > ECHO_CHARS:
        parts.append(f"{len(text)} characters")
    if note is not None:
        parts.append(f"read up to token {note['max_length']} of {note['tokens']}")
    return echo(text) + (f"  [{'; '.join(parts)}]" if parts else "")


def run(args: argparse.Namespace) -> int:
    texts = list(args.texts) if args.texts else [ln.strip() for ln in sys.stdin if ln.strip()]
    if not texts:
        raise ValueError("no texts: pass them as arguments or on standard input")
    if is_compound_model(args.model):
        return _run_compound(args, texts)
    from headwise.intent.ensemble import load_classifier

    clf = load_classifier(args.model)
    answers = clf.predict(texts, top_k=args.top_k, threshold=args.threshold)
    for p, text, note in zip(answers, texts, long_text_notes(clf, texts), strict=True):
        if args.json:
            print(json.dumps(record(p.to_dict(), text, note), ensure_ascii=False))
            continue
        head = "OUT OF SCOPE" if p.out_of_scope else p.intent
        print(f"{_note_line(text, note)}\n  -> {head}  ({p.confidence:.3f})")
        for name, prob in p.top_k:
            print(f"     {prob:6.3f}  {name}")
    return 0


def _run_compound(args: argparse.Namespace, texts: list[str]) -> int:
    from headwise.intent.compound import CompoundClassifier
    from headwise.intent.multilabel import Thresholds

    clf = CompoundClassifier.load(args.model)
    thresholds = None if args.threshold is None else Thresholds(args.threshold)
    answers = clf.predict(texts, top_k=args.top_k, thresholds=thresholds)
    for p, text, note in zip(answers, texts, long_text_notes(clf, texts), strict=True):
        if args.json:
            print(json.dumps(record(p.to_dict(), text, note), ensure_ascii=False, default=str))
            continue
        head = "OUT OF SCOPE" if p.out_of_scope else ", ".join(
            f"{name} ({prob:.3f})" for name, prob in p.intents)
        print(f"{_note_line(text, note)}\n  -> {head}")
        for s in p.slots:
            print(f"     {s.name}: {s.text!r} [{s.start}:{s.end}] = "
                  f"{json.dumps(s.value, ensure_ascii=False, default=str)}")
    return 0
