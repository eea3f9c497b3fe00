"""``headwise distill``: train a small, fast student on a trained classifier's soft labels."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from headwise.commands._common import (
    add_data_options,
    check_out_dir,
    is_compound_model,
    parse_assignment,
    read,
    read_compound,
    report_trained,
)
from headwise.commands.train import add_field_options, apply_field_options, set_path

#: suffixes of an ``--unlabelled`` file read as CSV / JSON lines (any other: one text a line)
TABLE_SUFFIXES = (".csv", ".tsv", ".jsonl", ".json", ".ndjson")
#: the augmentation kinds (``headwise.intent.training.augmentation.AUGMENTATIONS``, repeated here so
#: that building the parser imports nothing heavy; a test keeps the two equal)
AUGMENTATIONS = ("typo", "drop", "duplicate", "width", "space", "punct")
#: the student's recipe fields with an option (the rule of ``headwise train``)
EXPOSED = ("train.epochs",)


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "distill", help="distil a trained classifier into a smaller, faster student",
        description="Train a student (a from-scratch Transformer, the BiLSTM, or the "
        "teacher's first K encoder layers) on the soft labels of a trained classifier: the "
        "KL divergence at a temperature T (scaled by T^2) mixed with the gold labels' "
        "cross-entropy, on the training texts, unlabelled texts and noisy copies of them. "
        "The teacher's probabilities are computed once and cached in --out (a resumed run "
        "reads them back). The student is calibrated and thresholded on the validation data "
        "and saved like `headwise train`'s classifiers (predict, eval, export, serve). A "
        "compound (multi-label + slots) teacher trains a compound student on annotated "
        "examples: each intent's target is the gold one mixed with the teacher's sigmoid "
        "probability by levers.distill_weight (--set levers.distill_weight=W, default 0.5), "
        "the slot tagger learns the gold tags, and the thresholds are tuned on validation.")
    p.add_argument("teacher", metavar="TEACHER",
                   help="directory of the teacher: a classifier saved by `headwise train` "
                   "(a network, tfidf or a compound model), `ensemble` or `soup`")
    p.add_argument("--data", required=True,
                   help="labelled training data file (its labels must be the teacher's "
                   "intents; a compound teacher: annotated examples, JSON lines)")
    p.add_argument("--valid", help="validation data file (default: 10%% of --data, "
                   "stratified, held out before augmentation)")
    p.add_argument("--unlabelled", metavar="FILE",
                   help="texts without labels, learnt from the teacher's soft labels alone: "
                   "a plain text file (one text a line), or CSV / JSON lines (their text "
                   "column; --columns names it)")
    p.add_argument("--out", required=True, help="directory to save the student in")
    p.add_argument("--student", default="transformer", metavar="STUDENT",
                   help="transformer (from scratch; characters for Chinese), bilstm (the "
                   "baseline) or truncate:K (the teacher's embeddings and first K encoder "
                   "layers, vocabulary trimmed; a single-label teacher's)")
    p.add_argument("--temperature", type=float, metavar="T",
                   help="softmax temperature T of the soft term (its KL divergence is "
                   "scaled by T^2; default 2; a single-label teacher's)")
    p.add_argument("--alpha", type=float, metavar="A",
                   help="the soft term's share of a labelled row's loss (the rest: the gold "
                   "label's cross-entropy; default 0.5; a single-label teacher's); rows "
                   "without a label learn from the soft term alone")
    p.add_argument("--augment", metavar="KINDS[:N]",
                   help="label-preserving character noise added as N extra copies of each "
                   "text (default 1) that the teacher labels, KINDS comma-separated: "
                   + ", ".join(AUGMENTATIONS) + " or all (digits and negation cues are never "
                   "touched), e.g. typo,width:2")
    p.add_argument("--teacher-batch-size", type=int, default=64, metavar="N",
                   help="texts per forward pass of the teacher")
    p.add_argument("--config", help="JSON file of the student's recipe parts (train, levers, "
                   "...; not the architecture's type: --student decides it)")
    p.add_argument("--set", action="append", metavar="PART.FIELD=VALUE",
                   help="set a field of the student's recipe, VALUE as JSON or a string "
                   "(e.g. --set train.seed=1); repeatable")
    add_field_options(p, EXPOSED)
    p.add_argument("--resume", action="store_true",
                   help="continue an interrupted run from its cached soft labels and last "
                   "checkpoint in --out")
    p.add_argument("--keep-checkpoints", action="store_true",
                   help="keep the training checkpoints (OUT/checkpoints)")
    p.add_argument("--quiet", action="store_true", help="no progress bars")
    add_data_options(p)
    p.set_defaults(func=run)


def _augmentation(text: str | None) -> tuple[list[str], int]:
    """``--augment KINDS[:N]``: the kinds of noise and the copies per text (default 1).

    Raises:
        ValueError: no kind, or N not a positive integer.
    """
    if not text:
        return [], 1
    names, sep, count = text.rpartition(":") if ":" in text else (text, "", "1")
    kinds = [k.strip() for k in names.split(",") if k.strip()]
    if not kinds:
        raise ValueError(f"--augment {text}: names no kind of noise")
    try:
        copies = int(count)
    except ValueError:
        copies = 0
    if copies < 1:
        raise ValueError(f"--augment {text}: the copies after ':' must be a positive "
                         f"integer")
    return kinds, copies


def read_unlabelled(path: str, args: argparse.Namespace) -> list[str]:
    """The texts of an ``--unlabelled`` file: CSV / JSON lines by their suffix (read by
    ``headwise.text.readers``; labels there are not used, and it says so), else one text a
    line (blank lines skipped).

    Raises:
        DataError: no such file, no text column, an undecodable line or no text.
    """
    from headwise.text.readers import DataError, read_examples

    file = Path(path)
    if file.suffix.lower() in TABLE_SUFFIXES:
        data = read_examples(file, text_column=args.columns[0],
                             skip_bad_rows=args.skip_bad_rows, require_labels=False)
        if data.skipped:
            print(f"{path}: skipped {len(data.skipped)} bad rows", file=sys.stderr)
        labelled = sum(y is not None for y in data.labels)
        if labelled:
            print(f"{path}: the labels of {labelled} rows are not used (--unlabelled texts "
                  f"learn from the teacher alone; give labelled rows in --data)")
        return list(data.texts)
    if not file.is_file():
        raise DataError(file, None, "no such file")
    texts = []
    for line, raw in enumerate(file.read_bytes().split(b"\n"), 1):
        try:
            text = raw.decode("utf-8-sig" if line == 1 else "utf-8").strip()
        except UnicodeDecodeError as e:
            raise DataError(file, line, f"not UTF-8 ({e.reason})") from e
        if text:
            texts.append(text)
    if not texts:
        raise DataError(file, None, "no texts")
    return texts


def read_recipe_fields(path: str) -> dict[str, Any]:
    """The student's recipe parts in a ``--config`` JSON file (its architecture is
    --student's).

    Raises:
        ValueError: not valid JSON, not an object, the flat form of earlier versions, or an
            architecture ``type``.
    """
    from headwise.intent.training.recipe import IntentRecipe

    data = IntentRecipe.read_config(path)
    named = (data.get("architecture") or {}).get("type") \
        if isinstance(data.get("architecture"), dict) else None
    if named is not None:
        raise ValueError(f"{path} names an architecture ({named!r}); the student is chosen "
                         f"by --student: remove architecture.type")
    return data


def run(args: argparse.Namespace) -> int:
    check_out_dir(args.out)
    kinds, copies = _augmentation(args.augment)
    # imported here, not at start: `headwise --help` stays light
    from headwise.intent.training.distillation import distill, parse_student

    parse_student(args.student)
    fields = read_recipe_fields(args.config) if args.config else {}
    if not isinstance(fields.setdefault("train", {}), dict):
        raise ValueError(f"{args.config}: part 'train' must be an object of its fields")
    apply_field_options(args, fields, EXPOSED)
    if args.quiet:
        set_path(fields, "train.progress", False)
    for item in args.set or []:
        set_path(fields, *parse_assignment(item))
    arch = fields.get("architecture")
    if isinstance(arch, dict) and "type" in arch:
        raise ValueError("--set architecture.type: the student is chosen by --student")
    compound = is_compound_model(args.teacher)
    reader = read_compound if compound else read
    train = reader(args.data, args)
    valid = reader(args.valid, args) if args.valid else None
    unlabelled = read_unlabelled(args.unlabelled, args) if args.unlabelled else []
    print(f"training data: {len(train)} rows, {len(train.intent_names())} intents "
          f"({args.data})")
    if valid is not None:
        print(f"validation data: {len(valid)} rows ({args.valid})")
    if args.unlabelled:
        print(f"unlabelled texts: {len(unlabelled)} ({args.unlabelled})")
    result = distill(args.teacher, train, valid, out_dir=args.out, student=args.student,
                     recipe=fields, temperature=args.temperature, alpha=args.alpha,
                     unlabelled=unlabelled, augment=kinds,
                     augment_copies=copies,
                     teacher_batch_size=args.teacher_batch_size, resume=args.resume,
                     keep_checkpoints=args.keep_checkpoints, report=print)
    info = result.classifier.info
    if compound:
        return _report_compound(result, args)
    print(f"distilled {args.student} in {result.train_seconds:.1f} s (T "
          f"{info['distill']['temperature']:g}, alpha {info['distill']['alpha']:g}, "
          f"{info['distill']['labelled']} labelled + "
          f"{info['distill']['unlabelled']} unlabelled texts"
          + (f" + {info['distill']['augmentation']['rows']} noisy copies"
             if info["distill"]["augmentation"] else "") + ")")
    report_trained(result, Path(args.out))
    print(f"saved to {Path(args.out)}")
    return 0


def _report_compound(result: Any, args: argparse.Namespace) -> int:
    """What ``distill`` prints after a compound student (its summary written to
    ``--out``/train_summary.json)."""
    import json

    info = result.classifier.info
    d = info["distill"]
    print(f"distilled {args.student} (intents + slots) in {result.train_seconds:.1f} s "
          f"(teacher weight {d['weight']:g}, {d['labelled']} labelled + {d['unlabelled']} "
          f"unlabelled texts"
          + (f" + {d['augmentation']['rows']} noisy copies" if d["augmentation"] else "")
          + ")")
    m = result.valid_metrics
    if m:
        print(f"validation: intent micro-F1 {m['micro_f1']:.4f}, macro-F1 {m['macro_f1']:.4f}, "
              f"exact match {m['exact_match']:.4f}; {result.threshold.describe()}")
    (Path(args.out) / "train_summary.json").write_text(
        json.dumps(info, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"saved to {Path(args.out)}")
    return 0
