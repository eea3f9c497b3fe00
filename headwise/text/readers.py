"""Dataset readers: CSV/TSV, JSON lines, BANKING77 and CLUE layouts, with line-numbered errors.

:func:`read_examples` turns a file of labelled (or unlabelled) texts into a
:class:`~headwise.text.dataset.Dataset` of :class:`~headwise.text.dataset.Example` rows, each
with its label as its one intent (none when unlabelled) and no slots::

    train = read_examples("banking77/train.csv")              # CSV `text,category`
    dev = read_examples("dataclue_cic/dev.json")              # CLUE JSON lines
    new = read_examples("queries.csv", require_labels=False)  # predict-only, no intents

Every bad row raises :class:`DataError` whose message is ``PATH:LINE: problem``, the line
being the physical line where the row starts (or, for a byte that does not decode, the line
of that byte; for an Excel sheet, the row's number). With ``skip_bad_rows=True`` the bad
rows are left out and listed in ``Dataset.skipped``; problems with the file as a whole
(no such file, no text or label column, no rows at all, a broken JSON array) still raise.

Encodings (``encoding=``, ``--encoding``): UTF-8 with or without a byte-order mark,
GB18030/GBK (Chinese Excel's CSV), UTF-16 or UTF-32 with a byte-order mark, detected
(:func:`~headwise.text.decoding.detect_encoding`); any other that Python knows when named.

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
  eval`` reports accuracy per slice (``Example.slices``).
- ``"xlsx"``: an Excel workbook (``openpyxl``), its first sheet (``sheet`` names another)
  read as a CSV file is: a header row, then one row per example; empty rows are skipped and
  a row's "line" is its row number. Numbers that are whole read as integers (``12`` not
  ``12.0``), dates in ISO form.
- ``"auto"``: by extension (``.csv``, ``.tsv``, ``.jsonl``, ``.json``, ``.ndjson``,
  ``.xlsx``, ``.xlsm``; other names by their first character), and the CLUE layout when the
  first object has both ``sentence`` and ``label_des``.
"""

from __future__ import annotations

import csv
import datetime
import json
import re
from collections import Counter
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from headwise.text.dataset import Dataset, Example
from headwise.text.decoding import ENCODING_HINT, check_encoding, decode_lines, detect_encoding

FORMATS = ("auto", "csv", "jsonl", "banking77", "clue", "xlsx")
#: the extensions of Excel workbooks read with ``openpyxl``
XLSX_SUFFIXES = (".xlsx", ".xlsm")
#: default text columns/keys, the first one present wins
TEXT_KEYS = ("text", "sentence", "query", "utterance")
#: default label columns of a CSV file
CSV_LABEL_KEYS = ("label", "intent", "category", "label_des")
#: default label keys of a JSON object
JSON_LABEL_KEYS = ("label", "intent", "label_des")


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


def read_examples(path: str | Path, *, format: str = "auto", text_column: str | None = None,
                  label_column: str | None = None, skip_bad_rows: bool = False,
                  require_labels: bool = True, encoding: str | None = None,
                  sheet: str | None = None) -> Dataset:
    """Read a labelled (or unlabelled) text-classification file.

    Args:
        path: the file.
        format: one of :data:`FORMATS` (see the module docstring).
        text_column: the CSV column or JSON key of the text (default: the first of
            :data:`TEXT_KEYS` present).
        label_column: the CSV column or JSON key of the label (default: the first of
            :data:`CSV_LABEL_KEYS` / :data:`JSON_LABEL_KEYS` present).
        skip_bad_rows: leave bad rows out (recorded in :attr:`Dataset.skipped`) instead of
            raising.
        require_labels: every row must have a non-empty label; when False, a file without
            a label column (or a row with an empty label) gives a row without intents
            (``label`` None).
        encoding: the text file's encoding (any Python codec name); default: detected
            (the module docstring). Not for an Excel workbook.
        sheet: the Excel sheet to read (default: the first); only for a workbook.

    Returns:
        The :class:`~headwise.text.dataset.Dataset`: each row's label is its one intent.

    Raises:
        DataError: a bad row (unless ``skip_bad_rows``), or a problem with the whole file:
            no such file, no text (or required label) column, no rows, not a workbook, no
            such sheet.
        ValueError: an unknown ``format`` or ``encoding``; ``encoding`` for a workbook,
            ``sheet`` for a text file.
    """
    if format not in FORMATS:
        raise ValueError(f"format must be one of {FORMATS}, got {format!r}")
    path = Path(path)
    if encoding is not None:
        encoding = check_encoding(encoding)
    if not path.is_file():
        raise DataError(path, None, "no such file")
    kind = "xlsx" if format == "auto" and path.suffix.lower() in XLSX_SUFFIXES else format
    check_workbook_options(path, kind == "xlsx", encoding, sheet)
    if kind == "banking77":
        text_column = text_column or "text"
        label_column = label_column or "category"
    rows = _Rows(path, skip_bad_rows)
    if kind == "xlsx":
        _read_table(sheet_rows(path, sheet), rows, text_column, label_column,
                    require_labels, exact=False)
    else:
        data = path.read_bytes()
        given = encoding is not None
        encoding = encoding or detect_encoding(data)
        rows.encoding = encoding
        rows.hint = f"is --encoding {encoding} the file's encoding?" if given \
            else ENCODING_HINT
        kind = _resolve_format(path, data, format, encoding)
        if kind in ("csv", "banking77"):
            delimiter = "\t" if path.suffix.lower() == ".tsv" else ","
            _read_table(_csv_rows(path, data, delimiter, encoding), rows, text_column,
                        label_column, require_labels, exact=True)
        else:
            _read_json(data, rows, text_column, label_column, require_labels,
                       clue=kind == "clue", encoding=encoding)
    if not rows.examples:
        raise DataError(path, None, "no rows" if not rows.skipped else
                        all_bad_message(rows.skipped, rows.hint))
    return Dataset(rows.examples, path, rows.skipped)


def all_bad_message(bad: list[tuple[int, str]], hint: str | None = None, *,
                    total: int | None = None) -> str:
    """What a file none of whose rows is usable is told: how many, the first three
    ``line: problem``, and ``hint`` when some did not decode.

    Args:
        bad: ``(line, problem)`` of the bad rows (the first ones at least).
        hint: what undecodable bytes suggest (:data:`ENCODING_HINT` by default).
        total: how many rows were bad (default: ``len(bad)``).
    """
    total = len(bad) if total is None else total
    shown = "; ".join(f"line {line}: {problem}" for line, problem in bad[:3])
    more = ", ..." if total > 3 else ""
    text = f"no usable rows (all {total} were bad: {shown}{more})"
    if any(is_encoding_problem(p) for _, p in bad):
        text += f"; {hint or ENCODING_HINT}"
    return text


def is_encoding_problem(problem: str) -> bool:
    """Whether a row's problem is bytes that do not decode (``"not UTF-8 (byte ..."``)."""
    return problem.startswith("not ") and "(byte 0x" in problem


def header_hint(header: list[str], encoding: str | None) -> str:
    """What a header without the wanted columns adds, when it may be in another encoding:
    NUL characters (UTF-16 read as something else), or the encoding it was read as when
    not UTF-8; else nothing."""
    if any("\x00" in name for name in header):
        return "; the header has NUL characters: is the file UTF-16? try --encoding utf-16"
    if encoding not in (None, "utf-8"):
        return f" (the file was read as {encoding}: is that its encoding? --encoding names it)"
    return ""


def check_workbook_options(path: Path, workbook: bool, encoding: str | None,
                           sheet: str | None) -> None:
    """Refuse an option that does not apply: ``encoding`` for an Excel workbook,
    ``sheet`` for a text file, and an ``.xls`` file (Excel 97-2003).

    Raises:
        ValueError: an option that does not apply.
        DataError: an ``.xls`` file.
    """
    if not workbook and path.suffix.lower() == ".xls":
        raise DataError(path, None, "an .xls workbook (Excel 97-2003) cannot be read: save "
                                    "it as .xlsx (or as CSV)")
    if workbook and encoding is not None:
        raise ValueError(f"--encoding {encoding} is for text files; {path} is an Excel "
                         f"workbook, which has none")
    if not workbook and sheet is not None:
        raise ValueError(f"--sheet {sheet} names a sheet of an Excel workbook (.xlsx); "
                         f"{path} is read as a text file")


def sheet_rows(path: Path, sheet: str | None = None
               ) -> Iterator[tuple[int, int, list[str] | None, tuple[int, str] | None]]:
    """``(row, row, cells, None)`` per row of an Excel workbook's sheet (the first, or
    ``sheet``), read a row at a time (``openpyxl``'s read-only mode), its cells as text:
    empty ones ``""``, whole numbers as integers, dates in ISO form (a date at midnight as
    the day alone); the empty cells that end a row are left out.

    Raises:
        DataError: not a workbook openpyxl reads, no such sheet.
    """
    import zipfile

    try:
        from openpyxl import load_workbook
        from openpyxl.utils.exceptions import InvalidFileException
    except ImportError:
        raise DataError(path, None, "reading an Excel workbook needs openpyxl (pip install "
                                    "openpyxl)") from None
    try:
        book = load_workbook(path, read_only=True, data_only=True)
    except (InvalidFileException, zipfile.BadZipFile, KeyError, OSError) as e:
        raise DataError(path, None, f"not an Excel workbook (.xlsx) openpyxl reads: "
                                    f"{e}") from None
    try:
        if sheet is None:
            ws = book.worksheets[0]
        elif sheet in book.sheetnames:
            ws = book[sheet]
        else:
            raise DataError(path, None, f"no sheet {sheet!r} (sheets: "
                                        f"{', '.join(book.sheetnames)})")
        for number, values in enumerate(ws.iter_rows(min_row=1, values_only=True), 1):
            cells = [_cell_text(v) for v in values]
            while cells and not cells[-1].strip():
                cells.pop()
            yield number, number, cells, None
    finally:
        book.close()


def _cell_text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if isinstance(value, datetime.datetime) and value.time() == datetime.time():
        return value.date().isoformat()  # Excel's dates are datetimes at midnight
    if isinstance(value, datetime.datetime | datetime.date | datetime.time):
        return value.isoformat()
    return str(value)


def unseen_labels(train: Dataset | Iterable[str], test: Dataset) -> dict[str, int]:
    """Labels of ``test`` that ``train`` never has, with how often each occurs in ``test``.

    A model cannot predict a label it never saw; report these rather than crash on them.

    Args:
        train: the training data, or its labels.
        test: the data to check.

    Returns:
        label -> count in ``test``, most frequent first (ties by label).
    """
    known = set(train.intent_names()) if isinstance(train, Dataset) else set(train)
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
        self.hint: str | None = None  # what an undecodable row suggests
        self.encoding: str | None = None  # a text file's

    def bad(self, line: int, problem: str) -> None:
        if not self.skip:
            if self.hint is not None and is_encoding_problem(problem):
                problem = f"{problem}; {self.hint}"
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
        self.examples.append(Example(text, () if label is None else (label,), (), line,
                                     slices))


def _resolve_format(path: Path, data: bytes, format: str, encoding: str) -> str:
    if format != "auto":
        return format
    by_suffix = {".csv": "csv", ".tsv": "csv", ".jsonl": "jsonl", ".json": "jsonl",
                 ".ndjson": "jsonl"}
    head = data[:4096].decode(encoding, errors="ignore").lstrip("\ufeff \t\r\n")
    return by_suffix.get(path.suffix.lower(), "jsonl" if head[:1] in ("{", "[") else "csv")


def _pick(names: list[str], wanted: str | None, defaults: tuple[str, ...]) -> int | None:
    """Index of the wanted column (exact), or of the first default (case-insensitive)."""
    if wanted is not None:
        return names.index(wanted) if wanted in names else None
    lowered = [n.lower() for n in names]
    return next((lowered.index(key) for key in defaults if key in lowered), None)


def _csv_rows(path: Path, data: bytes, delimiter: str, encoding: str
              ) -> Iterator[tuple[int, int, list[str] | None, tuple[int, str] | None]]:
    """``(first line, last line, fields, problem)`` per CSV row (blank lines too); the
    problem ``(line, what)`` of the first undecodable line of a row, if any."""
    problems: dict[int, str] = {}
    nul = False

    def lines() -> Iterator[str]:
        nonlocal nul
        for number, line, problem in decode_lines([data], encoding):
            if problem is not None:
                problems[number] = problem
            nul = nul or "\x00" in line
            yield line

    reader = csv.reader(lines(), delimiter=delimiter)
    done = 0  # physical lines consumed by the rows read so far
    try:
        for row in reader:
            start, done = done + 1, reader.line_num
            bad = [n for n in range(start, done + 1) if n in problems]
            yield start, done, row, (bad[0], problems[bad[0]]) if bad else None
    except csv.Error as e:
        hint = " (NUL characters: is the file UTF-16? try --encoding utf-16)" if nul else ""
        raise DataError(path, reader.line_num, f"unreadable CSV: {e}{hint}") from None


def _read_table(table: Iterable[tuple[int, int, list[str] | None, tuple[int, str] | None]],
                rows: _Rows,
                text_column: str | None, label_column: str | None, require_labels: bool,
                *, exact: bool) -> None:
    """Rows of a header and records (a CSV file's, ``exact``: every record has the header's
    fields; or an Excel sheet's, whose records may be shorter)."""
    header: list[str] | None = None
    text_at, label_at, slices_at = 0, None, None
    for start, done, row, problem in table:
        if not row or (len(row) == 1 and not row[0].strip()) or \
                (not exact and not any(c.strip() for c in row)):
            continue  # a blank line
        if header is None:
            if problem is not None:
                at, what = problem
                if rows.hint is not None and is_encoding_problem(what):
                    what = f"{what}; {rows.hint}"
                raise DataError(rows.path, at, what)
            header = [name.strip() for name in row]
            try:
                text_at, label_at = _csv_columns(rows.path, header, start, text_column,
                                                 label_column, require_labels)
            except DataError as e:
                raise DataError(e.path, e.line, e.problem + header_hint(header, rows.encoding)
                                ) from None
            slices_at = _pick(header, None, ("slices",))
            continue
        if problem is not None:
            rows.bad(*problem)
            continue
        if not exact and len(row) < len(header):
            row = row + [""] * (len(header) - len(row))
        if len(row) != len(header):
            hint = " (an unclosed quote?)" if done > start else ""
            rows.bad(start, f"expected {len(header)} fields ({', '.join(header)}), got "
                            f"{len(row)}{hint}")
            continue
        rows.add(start, row[text_at], row[label_at] if label_at is not None else None,
                 require_labels, row[slices_at] if slices_at is not None else None)


def _csv_columns(path: Path, header: list[str], line: int, text_column: str | None,
                 label_column: str | None,
                 require_labels: bool) -> tuple[int, int | None]:
    shown = ", ".join(header)
    text_at = _pick(header, text_column, TEXT_KEYS)
    if text_at is None:
        wanted = repr(text_column) if text_column else f"one of {', '.join(TEXT_KEYS)}"
        raise DataError(path, line, f"no text column {wanted} in the header ({shown}); "
                                    f"name it with --columns NAME (text_column= in Python)")
    label_at = _pick(header, label_column, CSV_LABEL_KEYS)
    if label_at is None and (label_column is not None or require_labels):
        wanted = repr(label_column) if label_column else f"one of {', '.join(CSV_LABEL_KEYS)}"
        raise DataError(path, line, f"no label column {wanted} in the header ({shown}); "
                                    f"name it with --columns TEXT,NAME (label_column= in "
                                    f"Python), or pass require_labels=False for unlabelled "
                                    f"data")
    return text_at, label_at


def _read_json(data: bytes, rows: _Rows, text_column: str | None, label_column: str | None,
               require_labels: bool, *, clue: bool, encoding: str) -> None:
    explicit = text_column is not None or label_column is not None
    first = True
    for line, obj, problem in json_objects(data, rows.path, encoding):
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


def json_objects(data: bytes, path: Path, encoding: str = "utf-8"
                 ) -> Iterator[tuple[int, Any, str | None]]:
    """``(line, value, problem)`` of each JSON line, or of each element of a JSON array, of
    ``data`` in ``encoding`` (a byte-order mark dropped)."""
    if data[:4096].decode(encoding, errors="ignore").lstrip("\ufeff \t\r\n")[:1] == "[":
        yield from _json_array(data, path, encoding)
        return
    for number, line, problem in decode_lines([data], encoding):
        if problem is not None:
            yield number, None, problem
            continue
        if not line.strip():
            continue
        try:
            yield number, json.loads(line), None
        except json.JSONDecodeError as e:
            yield number, None, f"invalid JSON: {e.msg} (column {e.colno})"


def _json_array(data: bytes, path: Path, encoding: str
                ) -> Iterator[tuple[int, Any, str | None]]:
    for number, _, problem in decode_lines([data], encoding):
        if problem is not None:  # the whole array must decode
            raise DataError(path, number, problem)
    text = data.decode(encoding).removeprefix("\ufeff")
    try:
        values = json.loads(text)  # the whole array must be valid: it cannot be resumed
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
