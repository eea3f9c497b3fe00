"""``headwise train``: train, calibrate and save an intent classifier."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import TYPE_CHECKING

from headwise.commands._common import (
    add_data_options,
    check_out_dir,
    plural,
    read,
    read_compound,
    report_trained,
)

if TYPE_CHECKING:
    from headwise.intent.training.recipe import IntentRecipe


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
                   help="continue an interrupted run from its last checkpoint in --out (says "
                   "so and starts from the beginning when there is none yet)")
    p.add_argument("--overwrite", action="store_true",
                   help="replace what --out already holds; the new model is trained beside it "
                   "and swapped in only once saved, so a failed run leaves the old one intact "
                   "(without it, a --out that holds files is refused)")
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
    p.add_argument("--linear-probe", action=argparse.BooleanOptionalAction, default=None,
                   help="fit the head on the frozen encoder's features before fine-tuning "
                   "(LP-FT; for pretrained:DIR, where it is the default, and the "
                   "Transformer); --no-linear-probe fine-tunes a fresh head directly")
    p.add_argument("--label-smoothing", type=float,
                   help="override the recipe's label smoothing (default 0.1; networks only, "
                   "for compound training each intent's sigmoid target)")
    p.add_argument("--blend", choices=("none", "tfidf"),
                   help="tfidf: after training the network, fit a TF-IDF model on the same "
                   "rows and blend their probabilities, the TF-IDF share (0-0.9) chosen on the "
                   "validation data; share 0 saves the network alone (recipe field blend; "
                   "default: the recipe's, none)")
    add_data_options(p)
    p.epilog = ("An option or recipe field that the chosen model does not use (--epochs for "
                "tfidf, --linear-probe for bilstm, ...) is refused with a message naming it, "
                "never ignored.")
    p.set_defaults(func=run)


def _given_settings(args: argparse.Namespace) -> list[str]:
    """The training-call settings (``headwise.intent.training.recipe_paths.SETTING_USES``) given."""
    given = {"resume": args.resume, "keep_checkpoints": args.keep_checkpoints,
             "per_intent_thresholds": args.per_intent_thresholds, "no_slots": args.no_slots,
             "format": args.format != "auto", "text_column": args.text_column is not None,
             "label_column": args.label_column is not None}
    return [name for name, on in given.items() if on]


def run(args: argparse.Namespace) -> int:
    target = check_out_dir(args.out)
    work = prepare_out_dir(target, resume=args.resume, overwrite=args.overwrite)
    try:
        code = _train(args, work)
    except BaseException:
        if work != target:  # a failed --overwrite run: the old model stays, untouched
            import shutil

            shutil.rmtree(work, ignore_errors=True)
        raise
    if work != target:
        swap_into(work, target)
    print(f"saved to {target}")
    return code


def prepare_out_dir(out: Path, *, resume: bool, overwrite: bool) -> Path:
    """The directory a run writes into: ``out`` itself when it is missing or empty (or the
    run resumes in it), a fresh staging folder beside it when it holds files and
    ``overwrite`` is set (see :func:`swap_into`).

    Raises:
        ValueError: ``out`` holds files and neither ``resume`` nor ``overwrite`` is set; both
            are set.
    """
    if resume and overwrite:
        raise ValueError("--resume continues the run in --out and --overwrite replaces it; "
                         "give one of them")
    held = sorted(p.name for p in out.iterdir()) if out.is_dir() else []
    if resume:
        from headwise.train import find_latest_checkpoint

        if find_latest_checkpoint(out / "checkpoints") is None:
            print(f"--resume: no checkpoint in {out / 'checkpoints'} yet; training from the "
                  f"start")
        return out
    if not held:
        return out
    if not overwrite:
        shown = ", ".join(held[:5]) + (", ..." if len(held) > 5 else "")
        raise ValueError(f"--out {out} already holds files ({shown}); pass --overwrite to "
                         f"replace them, --resume to continue an interrupted run there, or "
                         f"name another directory")
    staging = out.parent / f".{out.name}.headwise-new"
    if staging.exists():  # left by an interrupted --overwrite run
        import shutil

        shutil.rmtree(staging)
    return staging


def swap_into(staging: Path, out: Path) -> None:
    """Replace ``out`` by the freshly written ``staging`` folder: ``out`` is moved aside,
    ``staging`` renamed into its place (both on one file system: two atomic renames), then
    the old contents are removed. Whatever fails before, ``out`` still holds the old model.
    """
    import shutil

    old = out.parent / f".{out.name}.headwise-old"
    if old.exists():
        shutil.rmtree(old)
    out.rename(old)
    staging.rename(out)
    shutil.rmtree(old, ignore_errors=True)


def _train(args: argparse.Namespace, out: Path) -> int:
    """Train as the arguments say, writing the classifier into ``out``."""
    # imported here, not at start: `headwise --help` stays light
    from headwise.intent.training.builders import default_blend, default_model
    from headwise.intent.training.pipeline import train_intent_classifier
    from headwise.intent.training.recipe import IntentRecipe
    from headwise.intent.training.recipe_paths import check_recipe_paths, recipe_path
    from headwise.text.annotations import looks_multi_label
    from headwise.text.readers import unseen_labels

    config = IntentRecipe.read_config(args.config) if args.config else {}
    named = "model" in config
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
        base = config.get("model_overrides", {})  # not an object: the type check names it
        changes["model_overrides"] = {**base, **overrides} if isinstance(base, dict) else base
    if args.pretrain_epochs is not None:
        changes["pretrain_epochs"] = args.pretrain_epochs
    if args.linear_probe is not None:
        changes["linear_probe"] = args.linear_probe
    if args.label_smoothing is not None:
        changes["label_smoothing"] = args.label_smoothing
    if args.blend is not None:
        changes["blend"] = args.blend
    if args.no_valid:
        if args.valid:
            raise ValueError("--no-valid and --valid exclude each other")
        changes["valid_fraction"] = 0.0
    fields = {**config, **changes}
    # what the user set on purpose: refused, even at its default, by a path that ignores it
    explicit = set(fields)
    settings = _given_settings(args)
    compound = args.multi_label or looks_multi_label(args.data)
    if compound or args.model or named:  # the model is known: check the recipe before reading
        recipe = IntentRecipe.from_dict(fields)
        check_recipe_paths(recipe, {recipe_path(recipe, compound=compound)}, explicit=explicit,
                           settings=settings)
    if compound:
        return _run_compound(args, recipe, out)
    train = read(args.data, args)
    valid = read(args.valid, args) if args.valid else None
    print(f"training data: {plural(len(train), 'row')}, "
          f"{plural(len(train.label_set()), 'intent')} ({args.data})")
    if not args.model and not named:
        model, reason = default_model([ex.text for ex in train])
        chosen = {"model": model}
        if default_blend(fields, valid is not None):
            chosen["blend"] = "tfidf"
            reason += ("; a TF-IDF model is fitted beside it and blended in when the "
                       "validation data shows a significant gain (--blend none: the network "
                       "alone)")
        print(reason)
        recipe = IntentRecipe.from_dict({**fields, **chosen})
        check_recipe_paths(recipe, {recipe_path(recipe)}, explicit=explicit, settings=settings)
    if valid is not None:
        new = unseen_labels(train, valid)
        print(f"validation data: {plural(len(valid), 'row')} ({args.valid})")
        if new:
            print("  intents only in the validation data (out-of-scope rows are used for the "
                  "threshold, others are left out): "
                  + ", ".join(f"{k} ({v})" for k, v in new.items()))
    result = train_intent_classifier(train, valid, recipe, out_dir=out, resume=args.resume,
                                     keep_checkpoints=args.keep_checkpoints, report=print)
    print(f"trained {recipe.model} in {result.train_seconds:.1f} s")
    info = result.classifier.info
    if info.get("selection"):
        sel = info["selection"]
        print(f"chosen by {sel['by']}: C {sel['c']:g}"
              + ("" if sel["tau"] is None else f", prior correction tau {sel['tau']:g}"))
    elif info.get("prior_correction"):
        print(f"prior correction tau {info['prior_correction']['tau']:g}")
    report_trained(result, out)
    return 0


def _run_compound(args: argparse.Namespace, recipe: IntentRecipe, out: Path) -> int:
    from headwise.intent.compound.training import train_compound_classifier

    train = read_compound(args.data, args)
    valid = read_compound(args.valid, args) if args.valid else None
    print(f"training data (multi-label): {plural(len(train), 'text')}, "
          f"{plural(len(train.intent_names()), 'intent')}, "
          f"{plural(len(train.slot_names()), 'slot name')} ({args.data})")
    result = train_compound_classifier(train, valid, recipe, out_dir=out,
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
    (out / "train_summary.json").write_text(
        json.dumps(result.classifier.info, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    return 0
