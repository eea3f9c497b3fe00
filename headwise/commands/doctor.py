"""``headwise doctor``: what is wrong with a labelled data set, before training
(:mod:`headwise.intent.doctor`), and a cleaned copy on request."""

from __future__ import annotations

import argparse
import csv
import json
from pathlib import Path

from headwise.commands._common import (
    add_data_options,
    check_out_dir,
    check_out_file,
    read,
    read_compound,
)


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "doctor", help="find duplicates, conflicts, likely mislabels and leakage in data",
        description="Examine a labelled data file (CSV, JSON lines, Excel; JSON lines with "
        "several intents per row, as train reads them) before training: exact and near "
        "duplicates and the ones with conflicting labels, likely mislabels (confident "
        "learning with cleanlab, multi-label too, on out-of-fold probabilities of a TF-IDF "
        "model), intents the data makes confusable, intents with too few rows, intents "
        "whose rows are near-copies of one template, rows that look out of scope, and "
        "validation rows that repeat training rows. Writes OUT/index.html (offline), "
        "OUT/issues.csv and OUT/summary.json, with the time of each step; --fix writes a "
        "cleaned copy and never touches the input.")
    p.add_argument("data", metavar="DATA", help="labelled data file")
    p.add_argument("--valid", help="validation file, checked for rows leaked from DATA")
    p.add_argument("--out", required=True, help="report directory")
    p.add_argument("--model", metavar="DIR",
                   help="a saved model as a frozen feature extractor: a logistic-regression "
                   "head is cross-validated on its sentence embeddings (a TF-IDF model: its "
                   "n-gram features) instead of retraining the network once per fold, and "
                   "near duplicates are compared by the embeddings' cosine similarity")
    p.add_argument("--fix", choices=("drop", "relabel"),
                   help="with --out-data: drop the flagged rows, or relabel likely mislabels "
                   "with the suggested label (exact repeats and conflicting repeats are "
                   "dropped either way; same-label near duplicates are only reported)")
    p.add_argument("--out-data", metavar="FILE",
                   help="where --fix writes the cleaned copy (CSV; JSON lines for "
                   "multi-label data, each row as it was with its intents fixed)")
    p.add_argument("--near", type=float, default=0.9,
                   help="cosine similarity (of character n-grams, or of --model's "
                   "embeddings) from which two texts are near duplicates")
    add_data_options(p)
    p.set_defaults(func=run)


def _write_multi_label(source: str, target: Path, kept: dict[int, tuple[str, ...]],
                       encoding: str | None) -> None:
    """The kept rows of a multi-label JSON file, each object as it was but with its fixed
    ``intents`` (and a ``label`` that is still one of them), as JSON lines."""
    from headwise.text.decoding import detect_encoding
    from headwise.text.labels import OOS_LABEL
    from headwise.text.readers import json_objects

    data = Path(source).read_bytes()
    with open(target, "w", encoding="utf-8") as f:
        for line, obj, _ in json_objects(data, Path(source), encoding or detect_encoding(data)):
            if line not in kept or not isinstance(obj, dict):
                continue
            obj = dict(obj)
            obj["intents"] = list(kept[line])
            if "label" in obj and obj["label"] not in kept[line]:
                obj["label"] = kept[line][0] if kept[line] else OOS_LABEL
            f.write(json.dumps(obj, ensure_ascii=False) + "\n")


def run(args: argparse.Namespace) -> int:
    import sys

    from tqdm import tqdm

    from headwise.intent.doctor import examine, fixed_rows, write_report
    from headwise.text.annotations import looks_multi_label

    if (args.fix is None) != (args.out_data is None):
        raise ValueError("--fix and --out-data go together: --fix drop|relabel --out-data "
                         "FILE writes the cleaned copy")
    out = check_out_dir(args.out)
    target = check_out_file(args.out_data, "--out-data") if args.out_data else None
    if target is not None and target.resolve() == Path(args.data).resolve():
        raise ValueError("--out-data is the input file: the doctor never overwrites its input")
    multi = looks_multi_label(args.data)
    if multi:
        data = read_compound(args.data, args)
        labels: list = [e.intents for e in data.examples]
        valid = read_compound(args.valid, args) if args.valid else None
    else:
        data = read(args.data, args)
        labels = data.labels
        valid = read(args.valid, args, require_labels=False) if args.valid else None
    lines = [e.line for e in data.examples]
    bar = tqdm(desc="doctor: cross-validation", unit=" fold", file=sys.stderr, disable=None)

    def progress(done: int, total: int) -> None:
        bar.total = total
        bar.update(1)

    try:
        exam = examine(data.texts, labels, lines, near=args.near, model=args.model,
                       valid=(valid.texts, [e.line for e in valid.examples]) if valid else None,
                       progress=progress)
    finally:
        bar.close()
    write_report(exam, out, str(args.data))
    found = ", ".join(f"{k} {n}" for k, n in exam.counts.items() if n) or "no issue"
    print(f"{exam.rows} rows, {len(exam.intents)} intents: {found}")
    for c in exam.confusions[:3]:
        print(f"  confusable: {c.count} rows of {c.label} predicted {c.predicted}")
    for t in exam.templates[:3]:
        print(f"  template: {t.copies} of {t.rows} rows of {t.intent} ({t.skeleton})")
    print("  time: " + ", ".join(f"{k} {v:.1f} s" for k, v in exam.steps.items()))
    print(f"report: {out / 'index.html'}, {out / 'issues.csv'}")
    if target is not None:
        rows = fixed_rows(data.texts, labels, lines, exam, args.fix)
        target.parent.mkdir(parents=True, exist_ok=True)
        if multi:
            _write_multi_label(args.data, target, {line: y for line, _, y in rows},
                               args.encoding)
        else:
            with open(target, "w", newline="", encoding="utf-8") as f:
                w = csv.writer(f)
                w.writerow(["text", "label"])
                w.writerows((t, y) for _, t, y in rows)
        print(f"cleaned copy ({args.fix}): {len(rows)} of {exam.rows} rows in {target}")
    return 0
