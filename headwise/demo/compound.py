"""The compound part of ``headwise demo``: several intents and slots with their values.

:func:`run_compound_demo` trains a joint intent + slot Transformer with number-aware heads
on the built-in corpus's annotations (every intent of a compound question such as
"提前还款违约金怎么算", and the amount/rate/ordinal/date slots), scores it on the
held-out split (intent micro-F1 and exact match, slot span F1, normalised-value accuracy
per slot type) and prints its answers to a few test questions.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from headwise.demo.corpus import DemoExample, generate_demo_corpus
from headwise.demo.values import REFERENCE_DATE
from headwise.intent.evaluation import evaluate, format_report
from headwise.intent.training.pipeline import train_intent_classifier
from headwise.intent.training.recipe import IntentRecipe, MultiLabel, Transformer, default_train
from headwise.text.annotations import AnnotatedExample, SlotSpan

#: heads of every layer that get the learned number-key bias in the demo
DEMO_NUMBER_HEADS = [0, 1]


def annotated(examples: list[DemoExample]) -> list[AnnotatedExample]:
    """The demo corpus's examples as annotated examples (intents and valued slots)."""
    return [AnnotatedExample(e.text, tuple(e.intents), tuple(
        SlotSpan(s.name, s.start, s.end, s.text, s.value) for s in e.slots), i + 1)
        for i, e in enumerate(examples)]


def compound_recipe(seed: int, epochs: int, d_model: int, num_layers: int) -> IntentRecipe:
    """The demo's joint model: a small char-level Transformer, 8 heads, number-aware."""
    part = Transformer(tokenizer="char", max_length=64, d_model=d_model, num_layers=num_layers,
                       num_heads=8, model_overrides={"number_heads": DEMO_NUMBER_HEADS})
    train = dataclasses.replace(default_train(part), epochs=epochs, seed=seed, patience=None,
                                lr=1e-3)
    return IntentRecipe(architecture=part, train=train, task=MultiLabel())


def run_compound_demo(out_dir: str | Path, *, seed: int = 0, per_intent: int = 120,
                      epochs: int = 20, d_model: int = 128, num_layers: int = 2,
                      echo: Callable[[str], Any] = print) -> dict[str, Any]:
    """Train, evaluate and show the compound classifier; save it under ``out_dir/compound``.

    Returns:
        ``{"report": evaluate's report (multi-label), "examples": [prediction dicts]}``,
        also written to ``out_dir/compound/summary.json`` (the report alone to
        ``out_dir/compound/eval/report.json``, as ``headwise eval`` writes it).
    """
    out = Path(out_dir) / "compound"
    corpus = generate_demo_corpus(seed=seed, per_intent=per_intent)
    train, valid, test = (annotated(corpus[k]) for k in ("train", "valid", "test"))
    compound = sum(len(e.intents) > 1 for e in train)
    slots = sum(len(e.slots) for e in train)
    echo(f"\n== training the compound classifier (several intents + slots, number-aware heads "
         f"{DEMO_NUMBER_HEADS}) ==")
    echo(f"training data: {len(train)} questions, {compound} with several intents, "
         f"{slots} slots")
    trained = train_intent_classifier(train, valid, compound_recipe(seed, epochs, d_model,
                                                                    num_layers), out_dir=out)
    clf = trained.classifier
    # the corpus's relative dates (下个月5号) were written against its own "today": the saved
    # model keeps it (as one trained on the corpus's files does), so `headwise eval` on it
    # reproduces these values; a caller's reference date still wins
    clf.reference_date = REFERENCE_DATE
    clf.save(out)
    report = evaluate(clf, test)
    (out / "eval").mkdir(parents=True, exist_ok=True)
    (out / "eval" / "report.json").write_text(json.dumps(report, indent=2, ensure_ascii=False,
                                                         default=str) + "\n", encoding="utf-8")
    echo(format_report(report))
    picked = [e for e in test if len(e.intents) > 1][:3] + \
        [e for e in test if len(e.intents) == 1 and e.slots][:3]
    answers = [p.to_dict() for p in clf.predict([e.text for e in picked])]
    echo(f"\nexample answers (dates resolved against the corpus's own today, "
         f"{REFERENCE_DATE.isoformat()}, which the saved model keeps; --reference-date "
         f"overrides it):")
    for a in answers:
        intents = ", ".join(x["intent"] for x in a["intents"]) or "OUT OF SCOPE"
        echo(f"  {a['text']}  ->  {intents}")
        for s in a["slots"]:
            echo(f"      {s['name']}: {s['text']} = {json.dumps(s['value'], ensure_ascii=False)}")
    summary = {"report": report, "examples": answers}
    (out / "summary.json").write_text(json.dumps(summary, indent=2, ensure_ascii=False,
                                                 default=str) + "\n", encoding="utf-8")
    return summary
