"""``headwise train``: train, calibrate and save an intent classifier."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from headwise.commands._common import add_data_options, read
from headwise.intent.recipe import IntentRecipe, train_intent_classifier
from headwise.text.readers import unseen_labels


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "train", help="train an intent classifier",
        description="Train a Transformer, BiLSTM or imported BERT-family intent classifier on "
        "labelled data (CSV, JSON lines, BANKING77 or CLUE layout), calibrate its confidence "
        "and choose the out-of-scope threshold on the validation data, and save it.")
    p.add_argument("--data", required=True, help="training data file")
    p.add_argument("--valid", help="validation data file (default: 10%% of --data, stratified)")
    p.add_argument("--model", default="transformer",
                   help="transformer, bilstm or pretrained:DIR (default transformer)")
    p.add_argument("--config", help="JSON file of recipe fields (sizes, epochs, lr, ...)")
    p.add_argument("--out", required=True, help="directory to save the classifier in")
    p.add_argument("--epochs", type=int, help="override the recipe's epochs")
    p.add_argument("--seed", type=int, help="override the recipe's seed")
    p.add_argument("--resume", action="store_true",
                   help="continue an interrupted run from its last checkpoint in --out")
    p.add_argument("--keep-checkpoints", action="store_true",
                   help="keep the training checkpoints (OUT/checkpoints)")
    p.add_argument("--quiet", action="store_true", help="no progress bars")
    add_data_options(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    recipe = IntentRecipe.from_json(args.config) if args.config else IntentRecipe()
    changes = {"model": args.model}
    if args.epochs is not None:
        changes["epochs"] = args.epochs
    if args.seed is not None:
        changes["seed"] = args.seed
    if args.quiet:
        changes["progress"] = False
    recipe = IntentRecipe.from_dict({**recipe.to_dict(), **changes})
    train = read(args.data, args)
    valid = read(args.valid, args) if args.valid else None
    print(f"training data: {len(train)} rows, {len(train.label_set())} intents ({args.data})")
    if valid is not None:
        new = unseen_labels(train, valid)
        print(f"validation data: {len(valid)} rows ({args.valid})")
        if new:
            print("  intents only in the validation data (out-of-scope rows are used for the "
                  "threshold, others are left out): "
                  + ", ".join(f"{k} ({v})" for k, v in new.items()))
    result = train_intent_classifier(train, valid, recipe, out_dir=args.out, resume=args.resume,
                                     keep_checkpoints=args.keep_checkpoints)
    th = result.threshold
    print(f"trained {recipe.model} in {result.train_seconds:.1f} s")
    print(f"validation: accuracy {result.valid_metrics.get('accuracy', float('nan')):.4f}, "
          f"macro-F1 {result.valid_metrics.get('macro_f1', float('nan')):.4f}, "
          f"temperature {result.classifier.temperature:.3f}")
    oos = "" if th.oos_recall is None else f", out-of-scope recall {th.oos_recall:.4f}"
    print(f"out-of-scope threshold {th.threshold:.3f} ({th.method}): in-scope accuracy "
          f"{th.in_scope_accuracy_no_reject:.4f} -> {th.in_scope_accuracy:.4f}, "
          f"{th.reject_rate:.1%} of in-scope rejected{oos}")
    print(f"saved to {Path(args.out)}")
    (Path(args.out) / "train_summary.json").write_text(
        json.dumps(result.classifier.info, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    return 0
