"""The input of a batch prediction: its layout (CSV/TSV, JSON lines, plain text, an Excel
sheet), encoding and rows, read a line at a time, bad rows kept with what is wrong with them,
and the other columns of a row that the output carries (``keep_columns``)."""

from __future__ import annotations

import csv
import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from headwise.intent.batch.records import CSV_COLUMNS, JSONL_KEYS
from headwise.text.decoding import ENCODING_HINT, check_encoding, decode_lines, detect_encoding
from headwise.text.readers import (
    TEXT_KEYS,
    XLSX_SUFFIXES,
    DataError,
    _pick,
    _pick_key,
    all_bad_message,
    check_workbook_options,
    header_hint,
    json_type_name,
    sheet_rows,
)

__all__ = ["INPUT_FORMATS", "InputRow", "RowReader", "input_format_of"]

#: input layouts: ``"auto"`` (by extension), CSV/TSV, JSON lines, plain text (a text a
#: line), an Excel workbook's sheet
INPUT_FORMATS = ("auto", "csv", "jsonl", "text", "xlsx")
#: bytes read at a time, and the head of the file its encoding is detected from
_BLOCK = 1 << 16


def input_format_of(path: str | Path, input_format: str = "auto") -> str:
    """The layout of an input file: ``input_format`` unless ``"auto"``, else by extension
    (``.csv``/``.tsv``: csv; ``.jsonl``/``.ndjson``/``.json``: jsonl; ``.txt``/``.text``/
    ``.log``: text; ``.xlsx``/``.xlsm``: xlsx) and, for other names, by the first character
    that is not blank (``{``: jsonl, anything else: text).

    Raises:
        ValueError: an unknown ``input_format``.
    """
    if input_format not in INPUT_FORMATS:
        raise ValueError(f"input format must be one of {INPUT_FORMATS}, got {input_format!r}")
    if input_format != "auto":
        return input_format
    suffix = Path(path).suffix.lower()
    by_suffix = {".csv": "csv", ".tsv": "csv", ".jsonl": "jsonl", ".ndjson": "jsonl",
                 ".json": "jsonl", ".txt": "text", ".text": "text", ".log": "text"}
    if suffix in by_suffix:
        return by_suffix[suffix]
    if suffix in XLSX_SUFFIXES:
        return "xlsx"
    with open(path, "rb") as f:
        head = f.read(4096)
    text = head.decode(detect_encoding(head, whole=False), errors="ignore")
    return "jsonl" if text.lstrip("\ufeff \t\r\n")[:1] == "{" else "text"


@dataclass(frozen=True)
class InputRow:
    """One row of an input file.

    Attributes:
        line: the 1-based physical line where the row starts (a sheet's row number).
        text: the text, stripped (None for a bad row).
        problem: what is wrong with a bad row, in the readers' words (None otherwise).
        kept: the values of the reader's ``keep_columns``, in order (CSV and sheet cells
            as text; JSON values as they are, None for a missing key); ``()`` for a bad row.
    """

    line: int
    text: str | None
    problem: str | None = None
    kept: tuple[Any, ...] = ()


class RowReader:
    """The rows of an input file, read a line at a time (constant memory).

    Args:
        path: the file.
        input_format: one of :data:`INPUT_FORMATS`.
        text_column: the CSV column or JSON key of the text (default: the first of
            :data:`~headwise.text.readers.TEXT_KEYS` present, matched case-insensitively
            in a CSV header); not for plain text.
        encoding: the text file's encoding (a Python codec name); default: detected from
            its first 64 KiB (:func:`~headwise.text.decoding.detect_encoding`: a
            byte-order mark, else UTF-8, else GB18030 when the bytes read as Chinese).
        sheet: the sheet of an Excel workbook (default: the first).
        keep_columns: the CSV columns or JSON keys whose values each row carries to the
            output (:attr:`InputRow.kept`); not for plain text.

    Attributes:
        format: the resolved layout (``"csv"``, ``"jsonl"``, ``"text"`` or ``"xlsx"``).
        encoding: the text file's encoding (None for a workbook).
        hint: what a row whose bytes do not decode suggests (None for a workbook).
        keep_columns: as given.
        size: the file's size in bytes.
        bytes_read: how far iteration has read (for progress; a workbook counts as read
            when its last row is).

    Iterating yields :class:`InputRow` objects in file order, bad rows included (with
    their ``problem``); problems with the whole file raise :class:`DataError`.

    Raises:
        DataError: no such file; an ``.xls`` file.
        ValueError: an unknown format or encoding; ``text_column`` or ``keep_columns`` for
            plain text; ``encoding`` for a workbook, ``sheet`` for a text file;
            ``keep_columns`` named like a field of the answers.
    """

    def __init__(self, path: str | Path, *, input_format: str = "auto",
                 text_column: str | None = None, encoding: str | None = None,
                 sheet: str | None = None, keep_columns: Sequence[str] = ()) -> None:
        self.path = Path(path)
        if encoding is not None:
            encoding = check_encoding(encoding)
        if not self.path.is_file():
            raise DataError(self.path, None, "no such file")
        self.format = input_format_of(self.path, input_format)
        check_workbook_options(self.path, self.format == "xlsx", encoding, sheet)
        if self.format == "text" and text_column is not None:
            raise ValueError(f"--columns {text_column} names a CSV column or JSON key; "
                             f"{self.path} is read as plain text (one text a line)")
        self.keep_columns = tuple(keep_columns)
        taken = [n for n in self.keep_columns if n in JSONL_KEYS or n in CSV_COLUMNS]
        if taken or len(set(self.keep_columns)) < len(self.keep_columns):
            why = f"the answers have a field {', '.join(taken)} already" if taken \
                else "a column named twice"
            raise ValueError(f"--columns TEXT,{','.join(self.keep_columns)}: {why}")
        if self.format == "text" and self.keep_columns:
            raise ValueError(f"--columns TEXT,{','.join(self.keep_columns)} names CSV "
                             f"columns or JSON keys; {self.path} is read as plain text (one "
                             f"text a line)")
        self.text_column = text_column
        self.sheet = sheet
        self.size = self.path.stat().st_size
        self.bytes_read = 0
        self.encoding: str | None = None
        self.hint: str | None = None
        if self.format != "xlsx":
            if encoding is None:
                with open(self.path, "rb") as f:
                    head = f.read(_BLOCK)
                encoding = detect_encoding(head, whole=len(head) == self.size)
                self.hint = ENCODING_HINT
            else:
                self.hint = f"is --encoding {encoding} the file's encoding?"
            self.encoding = encoding

    def __iter__(self) -> Iterator[InputRow]:
        self.bytes_read = 0
        if self.format == "csv":
            return self._csv()
        if self.format == "jsonl":
            return self._jsonl()
        if self.format == "xlsx":
            return self._xlsx()
        return self._text()

    def no_usable_rows(self, bad: list[tuple[int, str]], total: int) -> DataError:
        """The error of an input none of whose rows is usable: how many, the first
        problems, and what to try when bytes did not decode
        (:func:`~headwise.text.readers.all_bad_message`).

        Args:
            bad: ``(line, problem)`` of the first bad rows.
            total: how many rows were bad.
        """
        return DataError(self.path, None, all_bad_message(bad, self.hint, total=total))

    def _blocks(self) -> Iterator[bytes]:
        with open(self.path, "rb") as f:
            for block in iter(lambda: f.read(_BLOCK), b""):
                self.bytes_read += len(block)
                yield block

    def _decoded(self) -> Iterator[tuple[int, str, str | None]]:
        """``(line, text, problem)`` per physical line (the readers' decoding: ``\\n``,
        ``\\r\\n`` or a lone ``\\r`` ends one; a byte-order mark dropped)."""
        assert self.encoding is not None
        return decode_lines(self._blocks(), self.encoding)

    def _text(self) -> Iterator[InputRow]:
        for number, line, problem in self._decoded():
            if problem is not None:
                yield InputRow(number, None, problem)
            elif line.strip():
                yield InputRow(number, line.strip())

    def _jsonl(self) -> Iterator[InputRow]:
        wanted = repr(self.text_column) if self.text_column else \
            f"one of {', '.join(TEXT_KEYS)}"
        first = True
        for number, line, problem in self._decoded():
            if problem is not None:
                yield InputRow(number, None, problem)
                continue
            if not line.strip():
                continue
            if first and line.lstrip().startswith("["):
                raise DataError(self.path, number, "a JSON array cannot be read a row at a "
                                                   "time; write one JSON object per line "
                                                   "(JSON lines)")
            first = False
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as e:
                yield InputRow(number, None, f"invalid JSON: {e.msg} (column {e.colno})")
                continue
            if not isinstance(obj, dict):
                yield InputRow(number, None,
                               f"expected a JSON object, got {json_type_name(obj)}")
                continue
            key = _pick_key(obj, self.text_column, TEXT_KEYS)
            if key is None:
                yield InputRow(number, None, f"no text field {wanted} (fields: "
                                             f"{', '.join(obj) or 'none'})")
                continue
            yield _text_row(number, obj[key], tuple(obj.get(k) for k in self.keep_columns))

    def _csv(self) -> Iterator[InputRow]:
        problems: dict[int, str] = {}

        def lines() -> Iterator[str]:
            for number, line, problem in self._decoded():
                if problem is not None:
                    problems[number] = problem
                yield line

        delimiter = "\t" if self.path.suffix.lower() == ".tsv" else ","
        reader = csv.reader(lines(), delimiter=delimiter)
        header: list[str] | None = None
        text_at, kept_at = 0, []
        done = 0  # physical lines consumed by the rows read so far
        try:
            for row in reader:
                start, done = done + 1, reader.line_num
                bad_at = [n for n in range(start, done + 1) if n in problems]
                bad = [problems.pop(n) for n in bad_at]
                if not row or (len(row) == 1 and not row[0].strip()):
                    continue  # a blank line
                if header is None:
                    if bad:
                        raise DataError(self.path, bad_at[0], f"{bad[0]}; {self.hint}")
                    header = [name.strip() for name in row]
                    text_at, kept_at = self._columns(header, start)
                    continue
                if bad:
                    yield InputRow(bad_at[0], None, bad[0])
                elif len(row) != len(header):
                    hint = " (an unclosed quote?)" if done > start else ""
                    yield InputRow(start, None, f"expected {len(header)} fields "
                                                f"({', '.join(header)}), got {len(row)}{hint}")
                else:
                    yield _text_row(start, row[text_at], tuple(row[i] for i in kept_at))
        except csv.Error as e:
            raise DataError(self.path, reader.line_num, f"unreadable CSV: {e}") from None

    def _xlsx(self) -> Iterator[InputRow]:
        header: list[str] | None = None
        text_at, kept_at = 0, []
        for number, _, cells, _ in sheet_rows(self.path, self.sheet):
            if not any(c.strip() for c in cells):
                continue  # an empty row
            if header is None:
                header = [name.strip() for name in cells]
                text_at, kept_at = self._columns(header, number)
                continue
            if len(cells) > len(header):
                yield InputRow(number, None, f"expected {len(header)} fields "
                                             f"({', '.join(header)}), got {len(cells)}")
                continue
            cells = cells + [""] * (len(header) - len(cells))
            yield _text_row(number, cells[text_at], tuple(cells[i] for i in kept_at))
        self.bytes_read = self.size

    def _columns(self, header: list[str], line: int) -> tuple[int, list[int]]:
        """The header's index of the text, and of each kept column."""
        at = _pick(header, self.text_column, TEXT_KEYS)
        if at is None:
            wanted = repr(self.text_column) if self.text_column else \
                f"one of {', '.join(TEXT_KEYS)}"
            raise DataError(self.path, line, f"no text column {wanted} in the header "
                                             f"({', '.join(header)}); name it with "
                                             f"--columns"
                                             + header_hint(header, self.encoding))
        missing = [name for name in self.keep_columns if name not in header]
        if missing:
            raise DataError(self.path, line, f"no column {', '.join(map(repr, missing))} "
                                             f"(--columns TEXT,KEEP...) in the header "
                                             f"({', '.join(header)})"
                                             + header_hint(header, self.encoding))
        return at, [header.index(name) for name in self.keep_columns]


def _text_row(line: int, text: Any, kept: tuple[Any, ...] = ()) -> InputRow:
    if not isinstance(text, str):
        return InputRow(line, None, f"text must be a string, got {json_type_name(text)}")
    text = text.strip()
    return InputRow(line, text, None, kept) if text else InputRow(line, None, "empty text")
