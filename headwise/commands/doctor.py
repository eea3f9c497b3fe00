"""``headwise doctor``: what is wrong with a labelled data set, before training
(:mod:`headwise.intent.doctor`), and a cleaned copy on request."""

from __future__ import annotations

import argparse
import csv
from pathlib import Path

from headwise.commands._common import add_data_options, check_out_dir, check_out_file, read


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "doctor", help="find duplicates, conflicts, likely mislabels and leakage in data",
        description="Examine a labelled data file (CSV, JSON lines, Excel) before training: "
        "exact and near duplicates and the ones with conflicting labels, likely mislabels "
        "(confident learning with cleanlab on out-of-fold probabilities of a TF-IDF model), "
        "intents the data makes confusable, intents with too few rows, and validation rows "
        "that repeat training rows. Writes OUT/index.html (offline), OUT/issues.csv and "
        "OUT/summary.json; --fix writes a cleaned copy and never touches the input.")
    p.add_argument("data", metavar="DATA", help="labelled data file")
    p.add_argument("--valid", help="validation file, checked for rows leaked from DATA")
    p.add_argument("--out", required=True, help="report directory")
    p.add_argument("--fix", choices=("drop", "relabel"),
                   help="with --out-data: drop the flagged rows, or relabel likely mislabels "
                   "with the suggested label (exact repeats and conflicting repeats are "
                   "dropped either way; same-label near duplicates are only reported)")
    p.add_argument("--out-data", metavar="FILE", help="where --fix writes the cleaned CSV")
    p.add_argument("--near", type=float, default=0.9,
                   help="cosine similarity of character n-grams from which two texts are "
                   "near duplicates")
    add_data_options(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    import sys

    from tqdm import tqdm

    from headwise.intent.doctor import examine, fixed_rows, write_report

    if (args.fix is None) != (args.out_data is None):
        raise ValueError("--fix and --out-data go together: --fix drop|relabel --out-data "
                         "FILE writes the cleaned copy")
    out = check_out_dir(args.out)
    target = check_out_file(args.out_data, "--out-data") if args.out_data else None
    if target is not None and target.resolve() == Path(args.data).resolve():
        raise ValueError("--out-data is the input file: the doctor never overwrites its input")
    steps = tqdm(total=3, desc="doctor", unit=" step", file=sys.stderr, disable=None)
    data = read(args.data, args)
    valid = read(args.valid, args, require_labels=False) if args.valid else None
    steps.update(1)
    lines = [e.line for e in data.examples]
    exam = examine(data.texts, data.labels, lines, near=args.near,
                   valid=(valid.texts, [e.line for e in valid.examples]) if valid else None)
    steps.update(1)
    write_report(exam, out, str(args.data))
    steps.update(1)
    steps.close()
    found = ", ".join(f"{k} {n}" for k, n in exam.counts.items() if n) or "no issue"
    print(f"{exam.rows} rows, {len(exam.intents)} intents: {found}")
    for c in exam.confusions[:3]:
        print(f"  confusable: {c.count} rows of {c.label} predicted {c.predicted}")
    print(f"report: {out / 'index.html'}, {out / 'issues.csv'}")
    if target is not None:
        rows = fixed_rows(data.texts, data.labels, lines, exam, args.fix)
        target.parent.mkdir(parents=True, exist_ok=True)
        with open(target, "w", newline="", encoding="utf-8") as f:
            w = csv.writer(f)
            w.writerow(["text", "label"])
            w.writerows(rows)
        print(f"cleaned copy ({args.fix}): {len(rows)} of {exam.rows} rows in {target}")
    return 0
