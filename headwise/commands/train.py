"""``headwise train``: train, calibrate and save an intent classifier."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import TYPE_CHECKING

from headwise.commands._common import (
    add_data_options,
    check_out_dir,
    format_threshold,
    read,
    read_compound,
)

if TYPE_CHECKING:
    from headwise.intent.recipe import IntentRecipe


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "train", help="train an intent classifier",
        description="Train a Transformer, BiLSTM or imported BERT-family intent classifier on "
        "labelled data (CSV, JSON lines, BANKING77 or CLUE layout), calibrate its confidence "
        "and choose the out-of-scope threshold on the validation data, and save it.")
    p.add_argument("--data", required=True, help="training data file")
    p.add_argument("--valid", help="validation data file (default: 10%% of --data, stratified)")
    p.add_argument("--no-valid", action="store_true",
                   help="train on all of --data with no validation: every epoch runs, the last "
                   "weights are kept, confidence is not calibrated (temperature 1) and no "
                   "out-of-scope threshold is set (recipe valid_fraction 0)")
    p.add_argument("--model",
                   help="transformer, bilstm, tfidf or pretrained:NAME_OR_DIR (a Hugging Face "
                   "BERT/RoBERTa/XLM-R directory, or multilingual-e5-small / all-minilm-l6-v2 "
                   "when installed); default: the recipe's model if --config names one, else "
                   "the strongest installed pretrained encoder, else transformer")
    p.add_argument("--config", help="JSON file of recipe fields (sizes, epochs, lr, ...)")
    p.add_argument("--out", required=True, help="directory to save the classifier in")
    p.add_argument("--epochs", type=int, help="override the recipe's epochs (default: the "
                   "recipe's; else 20 for transformer and bilstm, 4 for pretrained encoders)")
    p.add_argument("--seed", type=int, help="override the recipe's seed (default: the "
                   "recipe's, 0)")
    p.add_argument("--resume", action="store_true",
                   help="continue an interrupted run from its last checkpoint in --out")
    p.add_argument("--keep-checkpoints", action="store_true",
                   help="keep the training checkpoints (OUT/checkpoints)")
    p.add_argument("--quiet", action="store_true", help="no progress bars")
    p.add_argument("--multi-label", action="store_true",
                   help="train a compound classifier: several intents per text (one sigmoid "
                   "each) and slot spans; detected on its own when the data rows carry an "
                   "'intents' list")
    p.add_argument("--per-intent-thresholds", action="store_true",
                   help="multi-label: tune one threshold per intent instead of one for all")
    p.add_argument("--no-slots", action="store_true",
                   help="multi-label: no slot tagger even when the data has slots")
    p.add_argument("--number-heads", type=lambda s: [int(x) for x in s.split(",") if x],
                   help="heads (comma-separated, e.g. 0,1) of every layer that get a learned "
                   "bias towards number tokens")
    p.add_argument("--negation-heads", type=lambda s: [int(x) for x in s.split(",") if x],
                   help="heads (comma-separated, e.g. 2,3) of every layer that get a learned "
                   "bias towards negation cues (不, 没, not, never, ...)")
    p.add_argument("--pretrain-epochs", type=int,
                   help="epochs of masked-LM pre-training on the training texts before "
                   "fine-tuning (from-scratch Transformer)")
    p.add_argument("--linear-probe", action="store_true",
                   help="fit the head on the frozen encoder's features before fine-tuning "
                   "(LP-FT; for pretrained:DIR and the Transformer)")
    add_data_options(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    check_out_dir(args.out)
    # imported here, not at start: `headwise --help` stays light
    from headwise.intent.builders import default_model
    from headwise.intent.recipe import IntentRecipe, train_intent_classifier
    from headwise.text.annotations import looks_multi_label
    from headwise.text.readers import unseen_labels

    recipe = IntentRecipe.from_json(args.config) if args.config else IntentRecipe()
    named = args.config and "model" in json.loads(Path(args.config).read_text(encoding="utf-8"))
    changes = {"model": args.model} if args.model else {}
    if args.epochs is not None:
        changes["epochs"] = args.epochs
    if args.seed is not None:
        changes["seed"] = args.seed
    if args.quiet:
        changes["progress"] = False
    overrides = {name: getattr(args, name) for name in ("number_heads", "negation_heads")
                 if getattr(args, name)}
    if overrides:
        changes["model_overrides"] = {**recipe.model_overrides, **overrides}
    if args.pretrain_epochs is not None:
        changes["pretrain_epochs"] = args.pretrain_epochs
    if args.linear_probe:
        changes["linear_probe"] = True
    if args.no_valid:
        if args.valid:
            raise ValueError("--no-valid and --valid exclude each other")
        changes["valid_fraction"] = 0.0
    recipe = IntentRecipe.from_dict({**recipe.to_dict(), **changes})
    if args.multi_label or looks_multi_label(args.data):
        return _run_compound(args, recipe)
    train = read(args.data, args)
    valid = read(args.valid, args) if args.valid else None
    print(f"training data: {len(train)} rows, {len(train.label_set())} intents ({args.data})")
    if not args.model and not named:
        model, reason = default_model([ex.text for ex in train])
        recipe = IntentRecipe.from_dict({**recipe.to_dict(), "model": model})
        print(reason)
    if valid is not None:
        new = unseen_labels(train, valid)
        print(f"validation data: {len(valid)} rows ({args.valid})")
        if new:
            print("  intents only in the validation data (out-of-scope rows are used for the "
                  "threshold, others are left out): "
                  + ", ".join(f"{k} ({v})" for k, v in new.items()))
    result = train_intent_classifier(train, valid, recipe, out_dir=args.out, resume=args.resume,
                                     keep_checkpoints=args.keep_checkpoints, report=print)
    th = result.threshold
    print(f"trained {recipe.model} in {result.train_seconds:.1f} s")
    info = result.classifier.info
    if info.get("selection"):
        sel = info["selection"]
        print(f"chosen by {sel['by']}: C {sel['c']:g}"
              + ("" if sel["tau"] is None else f", prior correction tau {sel['tau']:g}"))
    elif info.get("prior_correction"):
        print(f"prior correction tau {info['prior_correction']['tau']:g}")
    if result.valid_metrics:
        m = result.valid_metrics
        print(f"validation: accuracy {m['accuracy']:.4f}, macro-F1 {m['macro_f1']:.4f}, "
              f"temperature {result.classifier.temperature:.3f}")
        if m.get("small_validation"):
            print(f"warning: {m['small_validation']['note']}")
    else:
        print("no validation data: the last epoch's weights are kept and confidence is not "
              "calibrated (temperature 1; `headwise calibrate` fits it on held-out data)")
    print(f"out-of-scope threshold {format_threshold(th)}")
    print(f"saved to {Path(args.out)}")
    (Path(args.out) / "train_summary.json").write_text(
        json.dumps(result.classifier.info, indent=2, ensure_ascii=False) + "\n",
        encoding="utf-8")
    return 0


def _run_compound(args: argparse.Namespace, recipe: IntentRecipe) -> int:
    from headwise.intent.compound_recipe import train_compound_classifier

    train = read_compound(args.data, args)
    valid = read_compound(args.valid, args) if args.valid else None
    print(f"training data (multi-label): {len(train)} texts, {len(train.intent_names())} "
          f"intents, {len(train.slot_names())} slot names ({args.data})")
    result = train_compound_classifier(train, valid, recipe, out_dir=args.out,
                                       per_intent_thresholds=args.per_intent_thresholds,
                                       slots=not args.no_slots, resume=args.resume,
                                       keep_checkpoints=args.keep_checkpoints)
    m = result.valid_metrics
    print(f"trained {recipe.model} (intents + slots) in {result.train_seconds:.1f} s")
    if m:
        print(f"validation: intent micro-F1 {m['micro_f1']:.4f}, macro-F1 {m['macro_f1']:.4f}, "
              f"exact match {m['exact_match']:.4f}; threshold "
              f"{result.thresholds.threshold:.3f}"
              + (" (per intent)" if result.thresholds.per_intent else ""))
    print(f"saved to {Path(args.out)}")
    (Path(args.out) / "train_summary.json").write_text(
        json.dumps(result.classifier.info, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    return 0
