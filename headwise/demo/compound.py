"""The compound part of ``headwise demo``: several intents and slots with their values.

:func:`run_compound_demo` trains (:func:`train_compound_models`) and compares
(:func:`compare_compound_models`) the compound (multi-label joint intent + slot) models of
the case study's comparison on the built-in corpus with a share of compound questions
(``generate_demo_corpus(compound_share=...)``, :class:`~headwise.demo.runner.DemoSettings`'s
``compound_share``; the corpus ``data/*.jsonl`` holds, and benchmarks/compound.py's
``demo-compound`` setting): the BiLSTM joint model (the case study's baseline), the 8-head
joint Transformer with clause-scoped negation-aware heads, and the pretrained joint model
on multilingual-e5-small when it is installed. Each is saved under ``OUT/compound/<name>/``,
scored on the held-out test split by the one evaluation
(:func:`~headwise.intent.evaluation.evaluate`: exact match with its 95 %
Wilson interval, overall and per slice of the test split, intent micro/macro-F1, slot-span
F1, end-to-end value accuracy per slot type), and the models are compared in one table
beside the case study's own figures, which were measured on its data, not here. What the
recipes were measured to give over seeds: docs/benchmarks/compound.md, ``compound:cpu``.
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from headwise.demo.corpus import DemoExample, generate_demo_corpus
from headwise.demo.runner import DemoSettings
from headwise.demo.values import REFERENCE_DATE
from headwise.intent.compound import CompoundClassifier
from headwise.intent.evaluation import evaluate, format_report
from headwise.intent.training.defaults import DEFAULT_TRANSFORMER_OVERRIDES
from headwise.intent.training.pipeline import train_intent_classifier
from headwise.intent.training.recipe import (
    FAMILY_FIELDS,
    BiLSTM,
    IntentRecipe,
    MultiLabel,
    PretrainedEncoder,
    Transformer,
    default_train,
)
from headwise.text.dataset import Example, SlotSpan

#: the demo's joint Transformer's attention levers, the transformer family's choice on
#: validation exact match in BENCHMARKS ``compound:cpu`` (``scratch-joins1-neg``): the
#: library default's clause-scoped negation-aware heads without its number-biased heads
#: (they scored below the plain model there)
DEMO_COMPOUND_OVERRIDES: dict[str, Any] = {
    k: v for k, v in DEFAULT_TRANSFORMER_OVERRIDES.items() if k != "number_heads"}
#: the case study's exact match of its compound questions (its own data; not measured here)
CASE_STUDY = (("BiLSTM", "73 %"), ("8-head Transformer", "89 %"))
#: how the table names each compound model
TITLES = {"bilstm": "BiLSTM joint", "transformer": "8-head Transformer joint, negation-aware",
          "pretrained": "pretrained joint"}


def annotated(examples: list[DemoExample]) -> list[Example]:
    """The demo corpus's examples as annotated examples (intents and valued slots)."""
    return [Example(e.text, tuple(e.intents), tuple(
        SlotSpan(s.name, s.start, s.end, s.text, s.value) for s in e.slots), i + 1)
        for i, e in enumerate(examples)]


def compound_recipes(s: DemoSettings, pretrained: str | None = None
                     ) -> dict[str, IntentRecipe]:
    """The compound models the demo compares, name -> multi-label recipe.

    Each starts from its architecture's defaults (:func:`default_train`: learning rate,
    warm-up, early stopping on validation), with the settings' seed; the from-scratch
    models train for the settings' ``epochs`` (the architectures' default), the
    Transformer at the settings' width and depth. ``pretrained`` (a checkpoint name or
    directory; None leaves the row out) is fine-tuned with the multi-label defaults of a
    pretrained encoder (:data:`~headwise.intent.training.defaults.MULTI_LABEL_PRETRAINED`:
    learning rate and epochs, LP-FT) with its vocabulary trimmed to the training texts'
    pieces (``trim_vocab`` ``"auto"``), as the single-label demo's pretrained model is.
    """
    def train(part: Transformer | BiLSTM | PretrainedEncoder, epochs: int | None = None
              ) -> Any:
        base = default_train(part)
        return dataclasses.replace(base, epochs=epochs or base.epochs, seed=s.seed)

    bilstm = BiLSTM(tokenizer="char", max_length=64, lstm_embed_dim=128, lstm_hidden=128)
    # learned positions (not the single-label default's rotary ones, unmeasured here) and
    # the levers validation chose in BENCHMARKS compound:cpu
    transformer = Transformer(tokenizer="char", max_length=64, d_model=s.d_model,
                              num_layers=s.num_layers, num_heads=8, position="learned",
                              model_overrides=copy.deepcopy(DEMO_COMPOUND_OVERRIDES))
    # every family's thresholds chosen for exact match: the rule each family chose on
    # cross-fitted validation exact match in compound:cpu ("Threshold rules")
    task = MultiLabel(threshold_metric="exact_match")
    recipes = {
        "bilstm": IntentRecipe(architecture=bilstm, train=train(bilstm, s.epochs), task=task),
        "transformer": IntentRecipe(architecture=transformer,
                                    train=train(transformer, s.epochs), task=task),
    }
    if pretrained is not None:
        part = PretrainedEncoder(name=pretrained, max_length=64, trim_vocab="auto")
        recipes["pretrained"] = IntentRecipe(architecture=part, train=train(part),
                                             task=task,
                                             train_defaulted=FAMILY_FIELDS)
    return recipes


def run_compound_demo(out_dir: str | Path, settings: DemoSettings | None = None, *,
                      pretrained: str | None = None,
                      echo: Callable[[str], Any] = print) -> dict[str, Any]:
    """Train, evaluate and compare the compound models; save each under
    ``out_dir/compound/<name>/``: :func:`train_compound_models` for every model, then
    :func:`compare_compound_models`.

    Args:
        out_dir: the demo's output directory.
        settings: the sizes (default :class:`DemoSettings`); ``compound_share`` is the
            corpus's share of compound questions.
        pretrained: the pretrained encoder of the third row (None: no such row).
        echo: where progress lines and tables go.

    Returns:
        :func:`compare_compound_models`'s summary.
    """
    s = settings or DemoSettings()
    results = train_compound_models(out_dir, s, pretrained=pretrained, echo=echo)
    return compare_compound_models(out_dir, s, results, echo=echo)


@functools.lru_cache(maxsize=1)
def _corpus(s: DemoSettings) -> tuple[dict[str, list[DemoExample]], dict[str, list[Example]],
                                      dict[str, dict[str, int]]]:
    """The corpus with compound questions, its annotated splits and their sizes (generated
    once for training and comparing the same settings; read, never changed)."""
    corpus = generate_demo_corpus(seed=s.seed, per_intent=s.per_intent,
                                  compound_share=s.compound_share, oos_train=s.oos_train)
    splits = {k: annotated(corpus[k]) for k in ("train", "valid", "test")}
    counts = {k: {"questions": len(v), "compound": sum(len(e.intents) > 1 for e in v)}
              for k, v in splits.items()}
    return corpus, splits, counts


def train_compound_models(out_dir: str | Path, settings: DemoSettings | None = None, *,
                          names: Sequence[str] | None = None, pretrained: str | None = None,
                          echo: Callable[[str], Any] = print) -> dict[str, dict[str, Any]]:
    """Train and evaluate compound models of :func:`compound_recipes`; save each under
    ``out_dir/compound/<name>/`` with its evaluation report (``eval/report.json``, as
    ``headwise eval`` writes it).

    ``headwise demo`` trains some of them in its second process and the others in its
    first (the two processes' work balanced on two cores); the results of both go to
    :func:`compare_compound_models`.

    Args:
        out_dir: the demo's output directory.
        settings: the sizes (default :class:`DemoSettings`).
        names: which models, in this order (default: every one of
            :func:`compound_recipes`; ``"pretrained"`` needs ``pretrained``).
        pretrained: the pretrained encoder of the ``"pretrained"`` model.
        echo: where progress lines and reports go.

    Returns:
        name -> ``{"title", "report": evaluate's report, "parameters", "train_seconds",
        "directory"}``.

    Raises:
        ValueError: a name that is not one of the compound models.
    """
    s = settings or DemoSettings()
    out = Path(out_dir) / "compound"
    recipes = compound_recipes(s, pretrained)
    names = list(recipes) if names is None else list(names)
    unknown = [n for n in names if n not in recipes]
    if unknown:
        raise ValueError(f"no compound model {unknown} (these: {sorted(recipes)}"
                         + ("; 'pretrained' needs an encoder" if pretrained is None else "")
                         + ")")
    corpus, splits, counts = _corpus(s)
    echo(f"\n== the compound models (several intents + slots with values): "
         f"{', '.join(names)} ==\n"
         f"corpus: the demo's questions with every intent and slot, and joined compound "
         f"questions added (compound_share {s.compound_share}; data/*.jsonl): "
         + ", ".join(f"{k} {c['questions']} ({c['compound']} with several intents)"
                     for k, c in counts.items())
         + "; valid and test joins, phrasings and some intent pairs never seen in training")
    results: dict[str, dict[str, Any]] = {}
    for name in names:
        echo(f"\n== training the compound {name} ({TITLES[name]}) ==")
        trained = train_intent_classifier(splits["train"], splits["valid"], recipes[name],
                                          out_dir=out / name)
        clf = trained.classifier
        # the corpus's relative dates (下个月5号) were written against its own "today": the
        # saved model keeps it (as one trained on the corpus's files does), so `headwise
        # eval` on it reproduces these values; a caller's reference date still wins
        clf.reference_date = REFERENCE_DATE
        clf.save(out / name)
        report = evaluate(clf, splits["test"], slices=[e.slices for e in corpus["test"]])
        (out / name / "eval").mkdir(parents=True, exist_ok=True)
        (out / name / "eval" / "report.json").write_text(  # as `headwise eval` writes it
            json.dumps(report, indent=2, ensure_ascii=False, default=str) + "\n",
            encoding="utf-8")
        echo(format_report(report))
        results[name] = {"title": TITLES[name], "report": report,
                         "parameters": sum(p.numel() for p in clf.model.parameters()),
                         "train_seconds": trained.train_seconds,
                         "directory": str(out / name)}
    return results


def compare_compound_models(out_dir: str | Path, settings: DemoSettings | None,
                            results: dict[str, dict[str, Any]], *,
                            echo: Callable[[str], Any] = print) -> dict[str, Any]:
    """The comparison of trained compound models (:func:`train_compound_models`'s
    results, in the order of the table's rows): the table beside the case study's
    figures, value accuracy per slot type, exact match per slice and a few answers of the
    Transformer (when it is among them), printed and written to
    ``out_dir/compound/summary.json`` (the tables to ``comparison.md``).

    Returns:
        ``{"settings", "corpus", "models": results, "table", "values", "slices",
        "examples"}``.

    Raises:
        ValueError: no results.
    """
    if not results:
        raise ValueError("no compound model to compare")
    s = settings or DemoSettings()
    out = Path(out_dir) / "compound"
    _, splits, counts = _corpus(s)
    table = compound_table(results)
    values = value_table(results)
    per_slice = slice_table(results)
    echo(f"\ncompound questions, held-out test split ({counts['test']['questions']} "
         f"questions, {counts['test']['compound']} with several intents):\n{table}\n"
         f"\n{case_study_line()}\n"
         f"\nend-to-end value accuracy per slot type (span exact and normalised value "
         f"right, of the gold slots with a value):\n{values}\n"
         f"\nexact match per slice (compound: several intents; unseen_pair: a pair of "
         f"intents no training question has; dropped_request: a request taken back; "
         f"numbers_in_second: a value in a later request):\n{per_slice}")
    answers: list[dict[str, Any]] = []
    if "transformer" in results:
        clf = CompoundClassifier.load(results["transformer"]["directory"])
        answers = _examples(clf, splits["test"])
        echo(f"\nexample answers of the Transformer (dates resolved against the corpus's "
             f"own today, {REFERENCE_DATE.isoformat()}, which the saved models keep; "
             f"--reference-date overrides it):")
        for a in answers:
            intents = ", ".join(x["intent"] for x in a["intents"]) or "OUT OF SCOPE"
            echo(f"  {a['text']}  ->  {intents}")
            for slot in a["slots"]:
                echo(f"      {slot['name']}: {slot['text']} = "
                     f"{json.dumps(slot['value'], ensure_ascii=False)}")
    echo(f"compound models, evaluation reports and summary.json are in {out}/ (headwise "
         f"predict {out}/<name> --json answers a question)")
    summary = {"settings": s.__dict__, "corpus": counts, "models": results, "table": table,
               "values": values, "slices": per_slice, "examples": answers}
    out.mkdir(parents=True, exist_ok=True)
    (out / "summary.json").write_text(json.dumps(summary, indent=2, ensure_ascii=False,
                                                 default=str) + "\n", encoding="utf-8")
    (out / "comparison.md").write_text(
        f"{table}\n\n{case_study_line()}\n\n{values}\n\n{per_slice}\n", encoding="utf-8")
    return summary


def case_study_line() -> str:
    """The case study's figures, named as such beside the demo's table."""
    figures = ", ".join(f"{model} {share}" for model, share in CASE_STUDY)
    return (f"the case study's figures, not measured here: exact match {figures} on its own "
            f"compound questions; this corpus over seeds: docs/benchmarks/compound.md, "
            f"`compound:cpu`")


def compound_table(results: dict[str, dict[str, Any]]) -> str:
    """The Markdown comparison table of the compound models: exact match with its 95 %
    interval, intent micro/macro-F1, slot-span F1 and the share of values right end to
    end (all slot types pooled)."""
    rows = ["| model | parameters | exact match [95 % CI] | intent micro-F1 | macro-F1 | "
            "slot-span F1 | values right | train s |", "|" + " --- |" * 8]
    for name, r in results.items():
        report = r["report"]
        m = report["intents"]
        low, high = m["exact_match_interval"]
        span = report.get("slots", {}).get("f1")
        rows.append(f"| {name} ({r['title']}) | {r['parameters']:,} | "
                    f"{m['exact_match']:.1%} [{low:.1%}, {high:.1%}] | {m['micro_f1']:.4f} | "
                    f"{m['macro_f1']:.4f} | {'-' if span is None else f'{span:.4f}'} | "
                    f"{_pooled(report.get('values', {}))} | {r['train_seconds']:.0f} |")
    return "\n".join(rows)


def value_table(results: dict[str, dict[str, Any]]) -> str:
    """The Markdown table of end-to-end value accuracy per slot type and model."""
    names = sorted({t for r in results.values() for t in r["report"].get("values", {})})
    rows = ["| slot | gold | " + " | ".join(results) + " |", "|" + " --- |" * (len(results) + 2)]
    for slot in names:
        cells = [r["report"].get("values", {}).get(slot) for r in results.values()]
        n = next(c["n"] for c in cells if c)
        rows.append(f"| {slot} | {n} | " + " | ".join(
            "-" if c is None else f"{c['end_to_end']:.1%}" for c in cells) + " |")
    return "\n".join(rows)


def slice_table(results: dict[str, dict[str, Any]]) -> str:
    """The Markdown table of exact match per test slice (and every question) and model,
    each with its 95 % interval."""
    first = next(iter(results.values()))["report"].get("slices", [])
    rows = ["| slice | n | " + " | ".join(results) + " |", "|" + " --- |" * (len(results) + 2)]
    for k, row in enumerate(first):
        cells = []
        for r in results.values():
            x = r["report"]["slices"][k]
            low, high = x["exact_match_interval"]
            cells.append(f"{x['exact_match']:.1%} [{low:.1%}, {high:.1%}]")
        rows.append(f"| {row['slice']} | {row['n']} | " + " | ".join(cells) + " |")
    return "\n".join(rows)


def _pooled(values: dict[str, dict[str, Any]]) -> str:
    n = sum(v["n"] for v in values.values())
    if not n:
        return "-"
    return f"{sum(v['end_to_end'] * v['n'] for v in values.values()) / n:.1%}"


def _examples(clf: Any, test: list[Example]) -> list[dict[str, Any]]:
    """The classifier's answers to a few test questions: three compound ones, three with
    one intent and slots."""
    picked = [e for e in test if len(e.intents) > 1][:3] + \
        [e for e in test if len(e.intents) == 1 and e.slots][:3]
    return [p.to_dict() for p in clf.predict([e.text for e in picked])]
