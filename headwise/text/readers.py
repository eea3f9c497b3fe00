"""Dataset readers: CSV/TSV, JSON lines, BANKING77 and CLUE layouts, with line-numbered errors.

:func:`read_examples` turns a file of labelled (or unlabelled) texts into a :class:`Dataset`
of :class:`Example` rows::

    train = read_examples("banking77/train.csv")              # CSV `text,category`
    dev = read_examples("dataclue_cic/dev.json")              # CLUE JSON lines
    new = read_examples("queries.csv", require_labels=False)  # predict-only, labels None

Every bad row raises :class:`DataError` whose message is ``PATH:LINE: problem``, the line
being the physical line where the row starts (or, for a byte that is not UTF-8, the line
of that byte). With ``skip_bad_rows=True`` the bad rows are left out and listed in
:attr:`Dataset.skipped`; problems with the file as a whole (no such file, no text or label
column, no rows at all, a broken JSON array) still raise.

Formats (``format=``):

- ``"csv"``: a header row, then one row per example (``csv`` module quoting, so quoted
  commas and newlines work); ``.tsv`` files are tab-separated. Default columns: the text is
  the first of :data:`TEXT_KEYS` in the header, the label the first of
  :data:`CSV_LABEL_KEYS` (matched case-insensitively); ``text_column``/``label_column``
  name them exactly.
- ``"jsonl"``: one JSON object per line (blank lines skipped); the text key is the first of
  :data:`TEXT_KEYS` in each object, the label key the first of :data:`JSON_LABEL_KEYS`. A
  file whose content is one JSON array of objects is read the same way.
- ``"banking77"``: CSV ``text,category`` (BANKING77's layout).
- ``"clue"``: DataCLUE CIC's JSON lines ``{"id", "label", "sentence", "label_des"}``: the
  text is ``sentence``, the label ``label_des`` (the readable intent), or ``str(label)``
  when ``label_des`` is absent.
- a ``slices`` CSV column or JSON field, when present, names the slices (phenomena) a row
  exercises: names joined by ``;`` or ``,`` (a JSON list of strings also works); ``headwise
  eval`` reports accuracy per slice (:attr:`Example.slices`).
- ``"auto"``: by extension (``.csv``, ``.tsv``, ``.jsonl``, ``.json``, ``.ndjson``; other
  names by their first character), and the CLUE layout when the first object has both
  ``sentence`` and ``label_des``.
"""

from __future__ import annotations

import csv
import json
import re
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

FORMATS = ("auto", "csv", "jsonl", "banking77", "clue")
#: default text columns/keys, the first one present wins
TEXT_KEYS = ("text", "sentence", "query", "utterance")
#: default label columns of a CSV file
CSV_LABEL_KEYS = ("label", "intent", "category", "label_des")
#: default label keys of a JSON object
JSON_LABEL_KEYS = ("label", "intent", "label_des")
_BOM = b"\xef\xbb\xbf"


class DataError(ValueError):
    """A problem with a data file, located by path and (when it has one) line.

    Attributes:
        path: the file.
        line: the 1-based line, or None for a problem with the whole file.
        problem: what is wrong, in words.
    """

    def __init__(self, path: str | Path, line: int | None, problem: str) -> None:
        self.path = Path(path)
        self.line = line
        self.problem = problem
        super().__init__(str(self))

    def __str__(self) -> str:
        where = f"{self.path}:{self.line}" if self.line is not None else f"{self.path}"
        return f"{where}: {self.problem}"

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.path, self.line, self.problem))


@dataclass(frozen=True)
class Example:
    """One row of a dataset.

    Attributes:
        text: the text, stripped of surrounding whitespace (never empty).
        label: the label, stripped; None when the file has no labels.
        line: the 1-based line of the source file where the row starts.
        slices: the slice names of the row's ``slices`` column or field (``()`` when it is
            empty), None when the file has none.
    """

    text: str
    label: str | None
    line: int
    slices: tuple[str, ...] | None = None


@dataclass
class Dataset:
    """The examples read from one file.

    Attributes:
        examples: the rows, in file order.
        path: the file they came from.
        skipped: ``(line, problem)`` of each row left out by ``skip_bad_rows``.
    """

    examples: list[Example]
    path: Path
    skipped: list[tuple[int, str]] = field(default_factory=list)

    @property
    def texts(self) -> list[str]:
        """The texts, in order."""
        return [e.text for e in self.examples]

    @property
    def labels(self) -> list[str | None]:
        """The labels, in order (None where a row has none)."""
        return [e.label for e in self.examples]

    @property
    def slices(self) -> list[tuple[str, ...] | None]:
        """The slice names of each row, in order (None where a row has none)."""
        return [e.slices for e in self.examples]

    def label_set(self) -> list[str]:
        """The distinct labels, sorted (None left out)."""
        return sorted({e.label for e in self.examples if e.label is not None})

    def __len__(self) -> int:
        return len(self.examples)

    def __iter__(self) -> Iterator[Example]:
        return iter(self.examples)

    def __getitem__(self, index: int) -> Example:
        return self.examples[index]


def read_examples(path: str | Path, *, format: str = "auto", text_column: str | None = None,
                  label_column: str | None = None, skip_bad_rows: bool = False,
                  require_labels: bool = True) -> Dataset:
    """Read a labelled (or unlabelled) text-classification file.

    Args:
        path: the file (UTF-8, a byte-order mark allowed).
        format: one of :data:`FORMATS` (see the module docstring).
        text_column: the CSV column or JSON key of the text (default: the first of
            :data:`TEXT_KEYS` present).
        label_column: the CSV column or JSON key of the label (default: the first of
            :data:`CSV_LABEL_KEYS` / :data:`JSON_LABEL_KEYS` present).
        skip_bad_rows: leave bad rows out (recorded in :attr:`Dataset.skipped`) instead of
            raising.
        require_labels: every row must have a non-empty label; when False, a file without
            a label column (or a row with an empty label) gives ``label=None``.

    Returns:
        The :class:`Dataset`.

    Raises:
        DataError: a bad row (unless ``skip_bad_rows``), or a problem with the whole file:
            no such file, no text (or required label) column, no rows.
        ValueError: an unknown ``format``.
    """
    if format not in FORMATS:
        raise ValueError(f"format must be one of {FORMATS}, got {format!r}")
    path = Path(path)
    if not path.is_file():
        raise DataError(path, None, "no such file")
    data = path.read_bytes()
    if data.startswith(_BOM):
        data = data[len(_BOM):]
    kind = _resolve_format(path, data, format)
    if kind == "banking77":
        text_column = text_column or "text"
        label_column = label_column or "category"
    rows = _Rows(path, skip_bad_rows)
    if kind in ("csv", "banking77"):
        delimiter = "\t" if path.suffix.lower() == ".tsv" else ","
        _read_csv(data, delimiter, rows, text_column, label_column, require_labels)
    else:
        _read_json(data, rows, text_column, label_column, require_labels,
                   clue=kind == "clue")
    if not rows.examples:
        problem = "no rows" if not rows.skipped else \
            f"no usable rows (all {len(rows.skipped)} were bad)"
        raise DataError(path, None, problem)
    return Dataset(rows.examples, path, rows.skipped)


def unseen_labels(train: Dataset | Iterable[str], test: Dataset) -> dict[str, int]:
    """Labels of ``test`` that ``train`` never has, with how often each occurs in ``test``.

    A model cannot predict a label it never saw; report these rather than crash on them.

    Args:
        train: the training data, or its labels.
        test: the data to check.

    Returns:
        label -> count in ``test``, most frequent first (ties by label).
    """
    known = set(train.label_set()) if isinstance(train, Dataset) else set(train)
    counts = Counter(e.label for e in test if e.label is not None and e.label not in known)
    return dict(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))


# -- internals -------------------------------------------------------------------------------
class _Rows:
    """Collects examples, and either raises on a bad row or records it."""

    def __init__(self, path: Path, skip_bad_rows: bool) -> None:
        self.path = path
        self.skip = skip_bad_rows
        self.examples: list[Example] = []
        self.skipped: list[tuple[int, str]] = []

    def bad(self, line: int, problem: str) -> None:
        if not self.skip:
            raise DataError(self.path, line, problem)
        self.skipped.append((line, problem))

    def add(self, line: int, text: Any, label: Any, require_labels: bool,
            slices: Any = None) -> None:
        if not isinstance(text, str):
            return self.bad(line, f"text must be a string, got {json_type_name(text)}")
        text = text.strip()
        if not text:
            return self.bad(line, "empty text")
        if label is not None:
            if isinstance(label, bool) or not isinstance(label, (str, int)):
                return self.bad(line, f"label must be a string or an integer, got "
                                      f"{json_type_name(label)}")
            label = str(label).strip() or None
        if label is None and require_labels:
            return self.bad(line, "missing or empty label")
        if slices is not None:
            if isinstance(slices, str):
                slices = re.split(r"[;,]", slices)
            if not isinstance(slices, list) or not all(isinstance(x, str) for x in slices):
                return self.bad(line, f"slices must be a string or a list of strings, got "
                                      f"{json_type_name(slices)}")
            slices = tuple(x.strip() for x in slices if x.strip())
        self.examples.append(Example(text, label, line, slices))


def _resolve_format(path: Path, data: bytes, format: str) -> str:
    if format != "auto":
        return format
    by_suffix = {".csv": "csv", ".tsv": "csv", ".jsonl": "jsonl", ".json": "jsonl",
                 ".ndjson": "jsonl"}
    return by_suffix.get(path.suffix.lower(),
                         "jsonl" if data.lstrip()[:1] in (b"{", b"[") else "csv")


def _decode_lines(data: bytes) -> Iterator[tuple[int, str, str | None]]:
    """``(line, text, problem)`` per physical line; undecodable lines get a problem."""
    for number, raw in enumerate(data.splitlines(keepends=True), start=1):
        try:
            yield number, raw.decode("utf-8"), None
        except UnicodeDecodeError as e:
            bad = raw[e.start:e.start + 1].hex()
            column = len(raw[:e.start].decode("utf-8", errors="replace")) + 1
            yield number, raw.decode("utf-8", errors="replace"), \
                f"not UTF-8 (byte 0x{bad} at column {column})"


def _pick(names: list[str], wanted: str | None, defaults: tuple[str, ...]) -> int | None:
    """Index of the wanted column (exact), or of the first default (case-insensitive)."""
    if wanted is not None:
        return names.index(wanted) if wanted in names else None
    lowered = [n.lower() for n in names]
    return next((lowered.index(key) for key in defaults if key in lowered), None)


def _read_csv(data: bytes, delimiter: str, rows: _Rows, text_column: str | None,
              label_column: str | None, require_labels: bool) -> None:
    problems: dict[int, str] = {}

    def lines() -> Iterator[str]:
        for number, line, problem in _decode_lines(data):
            if problem is not None:
                problems[number] = problem
            yield line

    reader = csv.reader(lines(), delimiter=delimiter)
    header: list[str] | None = None
    text_at, label_at, slices_at = 0, None, None
    done = 0  # physical lines consumed by the rows read so far
    try:
        for row in reader:
            start, done = done + 1, reader.line_num
            if not row or (len(row) == 1 and not row[0].strip()):
                continue  # a blank line
            bad_lines = [n for n in range(start, done + 1) if n in problems]
            if header is None:
                if bad_lines:
                    raise DataError(rows.path, bad_lines[0], problems[bad_lines[0]])
                header = [name.strip() for name in row]
                text_at, label_at = _csv_columns(rows.path, header, start, text_column,
                                                 label_column, require_labels)
                slices_at = _pick(header, None, ("slices",))
                continue
            if bad_lines:
                rows.bad(bad_lines[0], problems[bad_lines[0]])
                continue
            if len(row) != len(header):
                hint = " (an unclosed quote?)" if done > start else ""
                rows.bad(start, f"expected {len(header)} fields ({', '.join(header)}), got "
                                f"{len(row)}{hint}")
                continue
            rows.add(start, row[text_at], row[label_at] if label_at is not None else None,
                     require_labels, row[slices_at] if slices_at is not None else None)
    except csv.Error as e:
        raise DataError(rows.path, reader.line_num, f"unreadable CSV: {e}") from None


def _csv_columns(path: Path, header: list[str], line: int, text_column: str | None,
                 label_column: str | None,
                 require_labels: bool) -> tuple[int, int | None]:
    shown = ", ".join(header)
    text_at = _pick(header, text_column, TEXT_KEYS)
    if text_at is None:
        wanted = repr(text_column) if text_column else f"one of {', '.join(TEXT_KEYS)}"
        raise DataError(path, line, f"no text column {wanted} in the header ({shown}); "
                                    f"name it with --text-column NAME (text_column= in Python)")
    label_at = _pick(header, label_column, CSV_LABEL_KEYS)
    if label_at is None and (label_column is not None or require_labels):
        wanted = repr(label_column) if label_column else f"one of {', '.join(CSV_LABEL_KEYS)}"
        raise DataError(path, line, f"no label column {wanted} in the header ({shown}); "
                                    f"name it with --label-column NAME (label_column= in "
                                    f"Python), or pass require_labels=False for unlabelled "
                                    f"data")
    return text_at, label_at


def _read_json(data: bytes, rows: _Rows, text_column: str | None, label_column: str | None,
               require_labels: bool, *, clue: bool) -> None:
    explicit = text_column is not None or label_column is not None
    first = True
    for line, obj, problem in json_objects(data, rows.path):
        if problem is not None:
            rows.bad(line, problem)
            continue
        if not isinstance(obj, dict):
            rows.bad(line, f"expected a JSON object, got {json_type_name(obj)}")
            continue
        if first and not explicit and "sentence" in obj and "label_des" in obj:
            clue = True  # DataCLUE's layout, recognised by its keys
        first = False
        if clue and text_column is None:
            text_key: str | None = "sentence"
        else:
            text_key = _pick_key(obj, text_column, TEXT_KEYS)
        if text_key is None or text_key not in obj:
            wanted = repr(text_column) if text_column else f"one of {', '.join(TEXT_KEYS)}"
            rows.bad(line, f"no text field {wanted} (fields: {', '.join(obj) or 'none'})")
            continue
        if clue and label_column is None:
            label = obj.get("label_des")
            if label is None or label == "":
                label = obj.get("label")
        else:
            label_key = _pick_key(obj, label_column, JSON_LABEL_KEYS)
            label = obj.get(label_key) if label_key is not None else None
        rows.add(line, obj[text_key], label, require_labels, obj.get("slices"))


def _pick_key(obj: dict[str, Any], wanted: str | None, defaults: tuple[str, ...]) -> str | None:
    if wanted is not None:
        return wanted if wanted in obj else None
    return next((k for k in defaults if k in obj), None)


def json_objects(data: bytes, path: Path) -> Iterator[tuple[int, Any, str | None]]:
    """``(line, value, problem)`` of each JSON line, or of each element of a JSON array."""
    if data.lstrip()[:1] == b"[":
        yield from _json_array(data, path)
        return
    for number, line, problem in _decode_lines(data):
        if problem is not None:
            yield number, None, problem
            continue
        if not line.strip():
            continue
        try:
            yield number, json.loads(line), None
        except json.JSONDecodeError as e:
            yield number, None, f"invalid JSON: {e.msg} (column {e.colno})"


def _json_array(data: bytes, path: Path) -> Iterator[tuple[int, Any, str | None]]:
    try:
        text = data.decode("utf-8")
        values = json.loads(text)  # the whole array must be valid: it cannot be resumed
    except UnicodeDecodeError as e:
        raise DataError(path, data.count(b"\n", 0, e.start) + 1,
                        f"not UTF-8 (byte 0x{data[e.start:e.start + 1].hex()})") from None
    except json.JSONDecodeError as e:
        raise DataError(path, e.lineno, f"invalid JSON: {e.msg} (column {e.colno})") from None
    # walk the (valid) text again for the line where each element starts
    decoder, between = json.JSONDecoder(), re.compile(r"[\s,]*")
    i, line, counted = text.index("[") + 1, 1, 0
    for value in values:
        i = between.match(text, i).end()
        line, counted = line + text.count("\n", counted, i), i
        yield line, value, None
        i = decoder.raw_decode(text, i)[1]


def json_type_name(value: Any) -> str:
    """How an error message names a JSON value's type ("an object", "a string", ...)."""
    names = {dict: "an object", list: "an array", str: "a string", bool: "a boolean",
             int: "a number", float: "a number", type(None): "null"}
    return names.get(type(value), type(value).__name__)
