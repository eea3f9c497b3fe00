"""The input of a batch prediction: its layout (CSV/TSV, JSON lines, plain text) and its
rows, read a line at a time, bad rows kept with what is wrong with them."""

from __future__ import annotations

import csv
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from headwise.text.readers import (
    TEXT_KEYS,
    DataError,
    _decode_lines,
    _pick,
    _pick_key,
    json_type_name,
)

__all__ = ["INPUT_FORMATS", "InputRow", "RowReader", "input_format_of"]

#: input layouts: ``"auto"`` (by extension), CSV/TSV, JSON lines, plain text (a text a line)
INPUT_FORMATS = ("auto", "csv", "jsonl", "text")
_BOM = b"\xef\xbb\xbf"


def input_format_of(path: str | Path, input_format: str = "auto") -> str:
    """The layout of an input file: ``input_format`` unless ``"auto"``, else by extension
    (``.csv``/``.tsv``: csv; ``.jsonl``/``.ndjson``/``.json``: jsonl; ``.txt``/``.text``/
    ``.log``: text) and, for other names, by the first byte that is not blank (``{``:
    jsonl, anything else: text).

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
    with open(path, "rb") as f:
        head = f.read(4096)
    head = head[len(_BOM):] if head.startswith(_BOM) else head
    return "jsonl" if head.lstrip()[:1] == b"{" else "text"


@dataclass(frozen=True)
class InputRow:
    """One row of an input file.

    Attributes:
        line: the 1-based physical line where the row starts.
        text: the text, stripped (None for a bad row).
        problem: what is wrong with a bad row, in the readers' words (None otherwise).
    """

    line: int
    text: str | None
    problem: str | None = None


class RowReader:
    """The rows of an input file, read a line at a time (constant memory).

    Args:
        path: the file (UTF-8; a byte-order mark allowed).
        input_format: one of :data:`INPUT_FORMATS`.
        text_column: the CSV column or JSON key of the text (default: the first of
            :data:`~headwise.text.readers.TEXT_KEYS` present, matched case-insensitively
            in a CSV header); not for plain text.

    Attributes:
        format: the resolved layout (``"csv"``, ``"jsonl"`` or ``"text"``).
        size: the file's size in bytes.
        bytes_read: how far iteration has read (for progress).

    Iterating yields :class:`InputRow` objects in file order, bad rows included (with
    their ``problem``); problems with the whole file raise :class:`DataError`.

    Raises:
        DataError: no such file.
        ValueError: an unknown format, or ``text_column`` for plain text.
    """

    def __init__(self, path: str | Path, *, input_format: str = "auto",
                 text_column: str | None = None) -> None:
        self.path = Path(path)
        if not self.path.is_file():
            raise DataError(self.path, None, "no such file")
        self.format = input_format_of(self.path, input_format)
        if self.format == "text" and text_column is not None:
            raise ValueError(f"--text-column {text_column} names a CSV column or JSON key; "
                             f"{self.path} is read as plain text (one text a line)")
        self.text_column = text_column
        self.size = self.path.stat().st_size
        self.bytes_read = 0

    def __iter__(self) -> Iterator[InputRow]:
        self.bytes_read = 0
        if self.format == "csv":
            return self._csv()
        if self.format == "jsonl":
            return self._jsonl()
        return self._text()

    def _lines(self) -> Iterator[bytes]:
        """The file's physical lines as the readers count them (``\\n``, ``\\r\\n`` or a
        lone ``\\r`` ends one), the byte-order mark dropped."""
        with open(self.path, "rb") as f:
            first = True
            for raw in f:
                self.bytes_read += len(raw)
                if first:
                    first = False
                    if raw.startswith(_BOM):
                        raw = raw[len(_BOM):]
                        if not raw:
                            continue
                if b"\r" in raw:
                    yield from raw.splitlines(keepends=True)
                else:
                    yield raw

    def _decoded(self) -> Iterator[tuple[int, str, str | None]]:
        """``(line, text, problem)`` per physical line (the readers' decoding)."""
        for number, raw in enumerate(self._lines(), start=1):
            _, text, problem = next(_decode_lines(raw))
            yield number, text, problem

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
            yield _text_row(number, obj[key])

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
        text_at = 0
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
                        raise DataError(self.path, bad_at[0], bad[0])
                    header = [name.strip() for name in row]
                    text_at = self._text_index(header, start)
                    continue
                if bad:
                    yield InputRow(bad_at[0], None, bad[0])
                elif len(row) != len(header):
                    hint = " (an unclosed quote?)" if done > start else ""
                    yield InputRow(start, None, f"expected {len(header)} fields "
                                                f"({', '.join(header)}), got {len(row)}{hint}")
                else:
                    yield _text_row(start, row[text_at])
        except csv.Error as e:
            raise DataError(self.path, reader.line_num, f"unreadable CSV: {e}") from None

    def _text_index(self, header: list[str], line: int) -> int:
        at = _pick(header, self.text_column, TEXT_KEYS)
        if at is None:
            wanted = repr(self.text_column) if self.text_column else \
                f"one of {', '.join(TEXT_KEYS)}"
            raise DataError(self.path, line, f"no text column {wanted} in the header "
                                             f"({', '.join(header)}); name it with "
                                             f"--text-column")
        return at


def _text_row(line: int, text: Any) -> InputRow:
    if not isinstance(text, str):
        return InputRow(line, None, f"text must be a string, got {json_type_name(text)}")
    text = text.strip()
    return InputRow(line, text) if text else InputRow(line, None, "empty text")
