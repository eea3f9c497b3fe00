"""Readers of annotated examples (several intents, slot spans), with line-numbered errors.

They give the one dataset type, a :class:`~headwise.text.dataset.Dataset` of
:class:`~headwise.text.dataset.Example` rows: each utterance with every intent it expresses
and the character spans of its slots::

    ds = read_annotated("nlupp_banking/fold0.json")      # NLU++ JSON array
    ds = read_annotated("demo/train.jsonl")               # the demo corpus's JSON lines
    ds = read_nlupp("nlupp_banking", folds=range(8))      # several NLU++ folds at once
    ex = ds[1]
    ex.intents        # ('make_open_apply_setup_get_activate', 'acknowledge')
    ex.slots          # (SlotSpan('time_from', 26, 45, '9 05 in the morning', {...}), ...)

Layouts (each row a JSON object; the file one JSON array of them, or JSON lines):

- NLU++: ``{"text", "intents": [...], "slots": {name: {"text", "span": [start, end],
  "value" | "values"}}}``; ``intents`` and ``slots`` may be absent (no intent, no slot).
- the demo corpus (:mod:`headwise.demo.corpus`): ``{"text", "label", "intents": [...],
  "slots": [{"name", "start", "end", "text", "value"}]}``; its out-of-scope rows have
  ``"label": "oos"`` and ``"intents": []``.
- a plain ``"label"`` string without ``intents`` is read as one intent (``"oos"`` as none).
- any layout: a row may carry ``"reference_date": "YYYY-MM-DD"``, the "today" its relative
  dates (下个月5号, next Friday) were resolved against; the rows that carry one must agree,
  and the date is the dataset's ``Dataset.reference_date`` (the demo corpus's
  files carry it; a model trained on them keeps it).

Rules, each broken one a :class:`~headwise.text.readers.DataError` ``PATH:LINE: problem``
(``LINE`` is the line where the row's object starts, in a JSON array too):

- ``text`` is a non-empty string, kept exactly as written (not stripped: the spans index
  into it);
- ``intents`` is a list of non-empty strings (repeats are dropped, order kept); when both
  ``label`` and a non-empty ``intents`` are given, the label must be one of them;
- a slot span satisfies ``0 <= start < end <= len(text)``, and its ``text``, when given,
  equals ``text[start:end]``; two slots may not overlap (a character belongs to at most one
  slot, which BIO tagging needs);
- ``slots`` is an NLU++ object or a demo list; anything else is an unknown layout.

Slots are kept in order of their start. With ``skip_bad_rows=True`` bad rows are left out and
listed in ``Dataset.skipped``; problems with the file as a whole (no such file,
not JSON, no rows) still raise.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from datetime import date
from numbers import Integral
from pathlib import Path
from typing import Any

from headwise.text.dataset import Dataset, Example, SlotSpan
from headwise.text.decoding import check_encoding, decode_lines, detect_encoding
from headwise.text.labels import OOS_LABEL, is_oos_label
from headwise.text.readers import DataError, json_objects, json_type_name

#: how many rows :func:`looks_multi_label` looks at
SNIFF_ROWS = 50


def read_annotated(path: str | Path, *, skip_bad_rows: bool = False,
                   encoding: str | None = None) -> Dataset:
    """Read a file of multi-intent examples with slot spans (NLU++ or demo layout).

    Args:
        path: a JSON array or JSON lines file.
        skip_bad_rows: leave bad rows out (recorded in ``Dataset.skipped``)
            instead of raising.
        encoding: the file's encoding; default: detected as the readers do
            (:func:`~headwise.text.decoding.detect_encoding`: UTF-8, a byte-order mark
            allowed; GB18030; UTF-16).

    Returns:
        The :class:`~headwise.text.dataset.Dataset`.

    Raises:
        DataError: a bad row (unless ``skip_bad_rows``; see the module docstring), or a
            problem with the whole file: no such file, not a JSON array or JSON lines,
            invalid JSON in an array, no rows.
        ValueError: an unknown ``encoding``.
    """
    path = Path(path)
    examples, skipped, reference = _read(path, skip_bad_rows,
                                         None if encoding is None else check_encoding(encoding))
    return Dataset(examples, path, skipped, reference)


def read_nlupp(directory: str | Path, folds: Iterable[int], *,
               skip_bad_rows: bool = False) -> Dataset:
    """Read folds of an NLU++ directory (``fold0.json`` ... ``fold9.json``) as one dataset.

    Args:
        directory: the NLU++ domain directory (``nlupp_banking/``).
        folds: the fold numbers, read in this order.
        skip_bad_rows: as in :func:`read_annotated`; a skipped problem starts with the fold's
            file name (``"fold3.json: ..."``), the line being in that file.

    Returns:
        A :class:`~headwise.text.dataset.Dataset` whose ``path`` is ``directory``; each
        example's ``line`` is in its own fold's file.

    Raises:
        DataError: missing fold files (the message names them and lists the folds there
            are) or a bad row (its message names the fold's file and line).
        ValueError: no folds, a repeated fold, or a fold that is not a non-negative integer.
    """
    directory = Path(directory)
    folds = list(folds)
    if not folds:
        raise ValueError("folds is empty: name at least one fold")
    for i, fold in enumerate(folds):
        if isinstance(fold, bool) or not isinstance(fold, Integral) or fold < 0:
            raise ValueError(f"a fold is a non-negative integer, got {fold!r}")
        folds[i] = int(fold)
    if len(set(folds)) != len(folds):
        raise ValueError(f"folds repeat: {folds}")
    examples: list[Example] = []
    skipped: list[tuple[int, str]] = []
    missing = [f for f in folds if not (directory / f"fold{f}.json").is_file()]
    if missing:
        there = sorted(int(p.stem[4:]) for p in directory.glob("fold*.json")
                       if p.stem[4:].isdigit()) if directory.is_dir() else []
        have = ", ".join(map(str, there)) if there else "none"
        name = f"fold{missing[0]}.json" if len(missing) == 1 else "fold{" + \
            ",".join(map(str, missing)) + "}.json"
        raise DataError(directory / name, None, f"no such NLU++ fold file (folds in "
                                                f"{directory}: {have})")
    for fold in folds:
        path = directory / f"fold{fold}.json"
        rows, bad, _ = _read(path, skip_bad_rows)
        examples += rows
        skipped += [(line, f"{path.name}: {problem}") for line, problem in bad]
    return Dataset(examples, directory, skipped)


def looks_multi_label(path: str | Path) -> bool:
    """Whether a data file holds multi-intent rows: a JSON array or JSON lines file one of
    whose first :data:`SNIFF_ROWS` objects has an ``intents`` list.

    A CSV/TSV file, a file that is not valid JSON and a JSON file without ``intents`` give
    False (the single-label readers then report any problem). The demo corpus's ``*.jsonl``
    files carry ``intents``, so they count as multi-label.

    Args:
        path: the data file.

    Returns:
        True for multi-intent data.

    Raises:
        DataError: no such file.
    """
    path = Path(path)
    if not path.is_file():
        raise DataError(path, None, "no such file")
    data = path.read_bytes()
    encoding = detect_encoding(data)
    first = data[:4096].decode(encoding, errors="ignore").lstrip("\ufeff \t\r\n")[:1]
    rows: list[Any] = []
    if first == "[":
        try:
            value = json.loads(data.decode(encoding).removeprefix("\ufeff"))
        except (UnicodeDecodeError, json.JSONDecodeError):
            return False
        rows = value[:SNIFF_ROWS] if isinstance(value, list) else []
    elif first == "{":
        for _, line, problem in decode_lines([data], encoding):
            if len(rows) >= SNIFF_ROWS:
                break
            if problem is None and line.strip():
                try:
                    rows.append(json.loads(line))
                except json.JSONDecodeError:
                    continue
    return any(isinstance(r, dict) and isinstance(r.get("intents"), list) for r in rows)


# -- internals -------------------------------------------------------------------------------
class _BadRow(Exception):
    """A problem with one row (becomes a DataError or a skipped entry)."""


def _read(path: Path, skip_bad_rows: bool, encoding: str | None = None
          ) -> tuple[list[Example], list[tuple[int, str]], date | None]:
    if not path.is_file():
        raise DataError(path, None, "no such file")
    data = path.read_bytes()
    encoding = encoding or detect_encoding(data)
    if data[:4096].decode(encoding, errors="ignore").lstrip("\ufeff \t\r\n")[:1] \
            not in ("[", "{"):
        raise DataError(path, None, "unknown layout: expected a JSON array or JSON lines of "
                                    "objects with text, intents and slots")
    examples: list[Example] = []
    skipped: list[tuple[int, str]] = []
    reference: date | None = None
    for line, obj, problem in json_objects(data, path, encoding):
        try:
            if problem is not None:
                raise _BadRow(problem)
            example = _example(obj, line)
            day = _reference_date(obj)
            if day is not None and reference is not None and day != reference:
                raise DataError(path, line, f"reference_date {day.isoformat()} differs from "
                                            f"{reference.isoformat()} of the rows before; a "
                                            f"file has one reference date")
            reference = day or reference
            examples.append(example)
        except _BadRow as e:
            if not skip_bad_rows:
                raise DataError(path, line, str(e)) from None
            skipped.append((line, str(e)))
    if not examples:
        raise DataError(path, None, "no rows" if not skipped else
                        f"no usable rows (all {len(skipped)} were bad)")
    return examples, skipped, reference


def _reference_date(obj: dict[str, Any]) -> date | None:
    """A row's ``reference_date`` (None when it has none)."""
    raw = obj.get("reference_date")
    if raw is None:
        return None
    if isinstance(raw, str) and len(raw) == 10:
        try:
            return date.fromisoformat(raw)
        except ValueError:
            pass
    raise _BadRow(f"reference_date must be a date YYYY-MM-DD, got {raw!r}")


def _example(obj: Any, line: int) -> Example:
    if not isinstance(obj, dict):
        raise _BadRow(f"expected a JSON object, got {json_type_name(obj)}")
    if "text" not in obj:
        raise _BadRow(f"missing text (fields: {', '.join(obj) or 'none'})")
    text = obj["text"]
    if not isinstance(text, str):
        raise _BadRow(f"text must be a string, got {json_type_name(text)}")
    if not text.strip():
        raise _BadRow("empty text")
    slots = _slots(obj.get("slots"), text)
    return Example(text, _intents(obj), slots, line)


def _intents(obj: dict[str, Any]) -> tuple[str, ...]:
    label = obj.get("label")
    if label is not None and not isinstance(label, str):
        raise _BadRow(f"label must be a string, got {json_type_name(label)}")
    if "intents" not in obj or obj["intents"] is None:
        return () if label is None or label.strip() == "" or is_oos_label(label) \
            else (label.strip(),)
    intents = obj["intents"]
    if not isinstance(intents, list):
        raise _BadRow(f"intents must be a list of strings, got {json_type_name(intents)}")
    for i, intent in enumerate(intents):
        if not isinstance(intent, str) or not intent.strip():
            got = "an empty string" if isinstance(intent, str) else json_type_name(intent)
            raise _BadRow(f"intents must be a list of strings, got {got} at position {i}")
    kept = tuple(dict.fromkeys(i.strip() for i in intents))
    if label is not None and kept and label.strip() not in kept:
        raise _BadRow(f"label {label!r} is not one of the intents {list(kept)}")
    if label is not None and not kept and label.strip() != "" and not is_oos_label(label):
        raise _BadRow(f"label {label!r} but intents is empty (only {OOS_LABEL!r} has none)")
    return kept


def _slots(slots: Any, text: str) -> tuple[SlotSpan, ...]:
    if slots is None:
        return ()
    if isinstance(slots, dict):  # NLU++: {name: {"text", "span": [s, e], "value(s)"}}
        spans = []
        for name, slot in slots.items():
            if not isinstance(slot, dict):
                raise _BadRow(f"slot {name!r} must be an object with text and span, got "
                              f"{json_type_name(slot)}")
            span = slot.get("span")
            if not isinstance(span, list) or len(span) != 2:
                raise _BadRow(f"slot {name!r}: span must be [start, end], got "
                              f"{json.dumps(span, ensure_ascii=False)}")
            value = slot["value"] if "value" in slot else slot.get("values")
            spans.append(_span(name, span[0], span[1], slot.get("text"), value, text))
    elif isinstance(slots, list):  # demo: [{"name", "start", "end", "text", "value"}]
        spans = []
        for i, slot in enumerate(slots):
            if not isinstance(slot, dict) or not isinstance(slot.get("name"), str):
                raise _BadRow(f"slots[{i}] must be an object with a name, start and end")
            spans.append(_span(slot["name"], slot.get("start"), slot.get("end"),
                               slot.get("text"), slot.get("value"), text))
    else:
        raise _BadRow(f"unknown layout: slots must be an object {{name: {{text, span}}}} "
                      f"(NLU++) or a list of {{name, start, end}} (demo), got "
                      f"{json_type_name(slots)}")
    spans.sort(key=lambda s: (s.start, s.end, s.name))
    for a, b in zip(spans, spans[1:], strict=False):
        if b.start < a.end:
            raise _BadRow(f"slots {a.name!r} [{a.start}, {a.end}) {a.text!r} and {b.name!r} "
                          f"[{b.start}, {b.end}) {b.text!r} overlap")
    return tuple(spans)


def _span(name: str, start: Any, end: Any, said: Any, value: Any, text: str) -> SlotSpan:
    if not name.strip():
        raise _BadRow("a slot has an empty name")
    for what, v in (("start", start), ("end", end)):
        if isinstance(v, bool) or not isinstance(v, int):
            raise _BadRow(f"slot {name!r}: {what} must be an integer, got {json_type_name(v)}")
    if not 0 <= start < end <= len(text):
        raise _BadRow(f"slot {name!r}: span [{start}, {end}) is out of range for a text of "
                      f"{len(text)} characters (0 <= start < end <= {len(text)})")
    if said is not None and said != text[start:end]:
        raise _BadRow(f"slot {name!r}: its text {said!r} is not text[{start}:{end}] "
                      f"{text[start:end]!r}")
    return SlotSpan(name, start, end, text[start:end], value)
