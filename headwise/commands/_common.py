"""Options and helpers shared by the data-reading sub-commands."""

from __future__ import annotations

import argparse
import sys

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
    if data.skipped:
        first = "; ".join(f"line {line}: {why}" for line, why in data.skipped[:3])
        more = f" (and {len(data.skipped) - 3} more)" if len(data.skipped) > 3 else ""
        print(f"{path}: skipped {len(data.skipped)} bad rows: {first}{more}", file=sys.stderr)
    return data
