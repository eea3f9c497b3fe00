"""A tiny English banking corpus of three intents, shared by the intent and serve tests
(importable from every test folder: tests/conftest.py puts this folder on sys.path)."""

from __future__ import annotations

import csv
import json
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

INTENTS = {
    "card_lost": ["i lost my card", "my card was stolen", "card missing since yesterday",
                  "someone took my card", "cannot find my card anywhere"],
    "transfer": ["send money to my friend", "transfer 50 pounds to john",
                 "make a transfer to my savings", "how do i send money abroad",
                 "wire money to another bank"],
    "balance": ["what is my balance", "how much money do i have", "show my account balance",
                "balance of my current account", "check how much is left"],
}


def write_csv(path: Path, rows: Iterable[Sequence[str]], header: Sequence[str] = ("text", "label")
              ) -> Path:
    """``rows`` as a UTF-8 CSV file under ``header``; the path back."""
    with open(path, "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(header)
        w.writerows(rows)
    return path


def write_annotated(path: Path, examples: Iterable[Any]) -> Path:
    """Annotated examples (``Example``: text, intents, slot spans) as a JSON-lines
    file ``headwise.text.annotations.read_annotated`` reads; the path back."""
    with open(path, "w", encoding="utf-8") as f:
        for e in examples:
            f.write(json.dumps({"text": e.text, "intents": list(e.intents), "slots": [
                {"name": s.name, "start": s.start, "end": s.end, "text": s.text,
                 "value": s.value} for s in e.slots]}, ensure_ascii=False) + "\n")
    return path
