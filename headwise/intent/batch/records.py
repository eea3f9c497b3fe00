"""The records of a batch prediction: what ``headwise predict --json`` prints for a text,
and their text as JSON lines or CSV rows (:func:`format_records`)."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["CSV_COLUMNS", "ECHO_CHARS", "JSONL_KEYS", "echo", "answer_record",
           "format_records", "record"]

#: characters of a text that an answer repeats (a longer one is cut, and marked with …)
ECHO_CHARS = 200
#: the CSV columns of an output, for every kind of model; the nested fields (``intents``,
#: ``slots``, ``top_k``, ``decision``, ``long_text``) are JSON, null as an empty cell
CSV_COLUMNS: tuple[str, ...] = ("line", "text", "text_chars", "intents", "out_of_scope",
                                "slots", "top_k", "decision", "long_text")
#: the keys of a JSON-lines record, in order, for every kind of model (those of
#: :meth:`Prediction.to_dict <headwise.intent.prediction.Prediction.to_dict>`, then the
#: line, the text's length and the long-text note)
JSONL_KEYS: tuple[str, ...] = ("line", "text", "intents", "out_of_scope", "slots", "top_k",
                               "decision", "text_chars", "long_text")


def echo(text: str, limit: int = ECHO_CHARS) -> str:
    """``text`` as an answer repeats it: whole up to ``limit`` characters, else its first
    ``limit`` characters and ``…``."""
    return text if len(text) <= limit else text[:limit] + "…"


def record(answer: dict[str, Any], text: str, note: dict[str, Any] | None) -> dict[str, Any]:
    """An answer's ``headwise predict --json`` object: ``answer`` (``to_dict()`` of a
    prediction) with its text cut by :func:`echo`, ``text_chars`` and ``long_text``."""
    return {**answer, "text": echo(text), "text_chars": len(text), "long_text": note}


def _rounded(scores: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{**s, "confidence": round(s["confidence"], 6)} for s in scores]


def answer_record(answer: Mapping[str, Any]) -> dict[str, Any]:
    """The ``headwise predict --json`` object of a predictor's answer record (its
    ``predict``'s records: probabilities not rounded, ``long_text`` inside): the fields of
    the prediction's ``to_dict()`` (probabilities to 6 decimals), then :func:`record`'s.

    Args:
        answer: one record of a predictor's ``predict``
            (:class:`~headwise.intent.inference.predictor.Predictor`).

    Returns:
        The object ``headwise predict --json`` prints for that text.
    """
    out = {}
    for key, value in answer.items():
        if key == "long_text":
            continue
        if key in ("top_k", "intents"):
            value = _rounded(value)
        elif key == "decision" and value is not None:
            value = {**value, "value": round(value["value"], 6),
                     "threshold": round(value["threshold"], 6)}
        out[key] = value
    return record(out, answer["text"], answer.get("long_text"))


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return value
    if isinstance(value, int | float):
        return repr(value)
    return json.dumps(value, ensure_ascii=False, default=str)


def format_records(lines: Sequence[int], records: Sequence[Mapping[str, Any]], fmt: str,
                   kept: Sequence[Mapping[str, Any]] | None = None) -> str:
    """The text of output records: JSON lines (``{"line": LINE, **kept, **record}``) or CSV
    rows (:data:`CSV_COLUMNS`, the kept columns after ``line``), each ended by a newline.

    Args:
        lines: the input line of each record.
        records: the records (:func:`answer_record`).
        fmt: ``"jsonl"`` or ``"csv"``.
        kept: per record, the input's columns it carries (name -> value, in the order of
            ``--columns TEXT,KEEP...``; the same names for every record); None: none.

    Returns:
        The text to append to the output.
    """
    extra: Sequence[Mapping[str, Any]] = kept if kept is not None else [{}] * len(records)
    if fmt == "jsonl":
        return "".join(json.dumps({"line": int(n), **k, **r}, ensure_ascii=False, default=str)
                       + "\n" for n, k, r in zip(lines, extra, records, strict=True))
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    columns = CSV_COLUMNS[1:]
    for n, k, r in zip(lines, extra, records, strict=True):
        writer.writerow([str(int(n)), *(_cell(v) for v in k.values()),
                         *(_cell(r.get(c)) for c in columns)])
    return buf.getvalue()
