"""Options and helpers shared by the data-reading sub-commands."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from headwise.intent.classifier import IntentClassifier
from headwise.intent.compound import COMPOUND_FILE
from headwise.intent.ensemble import ENSEMBLE_FILE, EnsembleClassifier
from headwise.text.annotations import AnnotatedDataset, read_annotated
from headwise.text.readers import FORMATS, Dataset, read_examples


def add_data_options(p: argparse.ArgumentParser) -> None:
    """``--format``, ``--text-column``, ``--label-column``, ``--skip-bad-rows``."""
    p.add_argument("--format", choices=FORMATS, default="auto",
                   help="data layout (default: from the extension and content)")
    p.add_argument("--text-column", help="CSV column / JSON key of the text")
    p.add_argument("--label-column", help="CSV column / JSON key of the intent")
    p.add_argument("--skip-bad-rows", action="store_true",
                   help="skip malformed rows (counted) instead of stopping at the first")


def read(path: str, args: argparse.Namespace, *, require_labels: bool = True) -> Dataset:
    """Read a data file with the command's data options; report skipped rows on stderr."""
    data = read_examples(path, format=args.format, text_column=args.text_column,
                         label_column=args.label_column, skip_bad_rows=args.skip_bad_rows,
                         require_labels=require_labels)
    _report_skipped(path, data.skipped)
    return data


def read_compound(path: str, args: argparse.Namespace) -> AnnotatedDataset:
    """Read a file of annotated examples (several intents, slot spans) with the command's
    ``--skip-bad-rows``; report skipped rows on stderr."""
    data = read_annotated(path, skip_bad_rows=args.skip_bad_rows)
    _report_skipped(path, data.skipped)
    return data


def load_single_label(directory: str) -> IntentClassifier | EnsembleClassifier:
    """A saved intent classifier, or a saved ensemble of them (``ensemble.json``)."""
    if (Path(directory) / ENSEMBLE_FILE).is_file():
        return EnsembleClassifier.load(directory)
    return IntentClassifier.load(directory)


def is_compound_model(directory: str) -> bool:
    """Whether a saved model directory holds a compound (multi-label) classifier."""
    return (Path(directory) / COMPOUND_FILE).is_file()


def _report_skipped(path: str, skipped: list[tuple[int, str]]) -> None:
    if skipped:
        first = "; ".join(f"line {line}: {why}" for line, why in skipped[:3])
        more = f" (and {len(skipped) - 3} more)" if len(skipped) > 3 else ""
        print(f"{path}: skipped {len(skipped)} bad rows: {first}{more}", file=sys.stderr)
