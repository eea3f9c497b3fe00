"""Streaming batch prediction over large files: what ``headwise predict MODEL --data FILE
--out FILE`` runs.

:func:`predict_file` reads texts a chunk at a time, predicts each chunk with a
:class:`Predictor` (the service's engines qualify: :func:`headwise.serve.load_engine`
returns one for every kind of saved model, on onnxruntime when the model directory holds
its ONNX export) and writes the answers as they come, so memory stays constant however
large the input is::

    from headwise.serve import ServeConfig, load_engine
    engine = load_engine(ServeConfig(model_dir="runs/intent", max_batch_size=64))
    result = predict_file(engine, "chats.csv", "labels.jsonl")
    result.written, result.skipped

Input (``input_format``, default from the extension): CSV or TSV with a header, the text
in the first of :data:`~headwise.text.readers.TEXT_KEYS` (``text_column`` names it),
as :func:`~headwise.text.readers.read_examples` reads them; JSON lines (one object per
line, same keys); or plain text, one text per line. Blank lines are skipped, as the
readers do; a bad row (undecodable bytes, empty text, a missing field, invalid JSON, a CSV
row with the wrong number of fields) is skipped and counted (``strict=False``, the
default) or raises :class:`~headwise.text.readers.DataError` ``FILE:LINE: problem``
(``strict=True``). A CSV header without the text column is a problem with the whole file
and always raises.

Output (``output_format``, default from the extension): JSON lines whose objects are those
``headwise predict --json`` prints (:func:`engine_record`), led by ``line``, the input line
where the row starts; or CSV with the columns of :data:`CSV_COLUMNS` (nested fields as
JSON). The answers go to ``OUT.partial`` and the file is renamed to ``OUT`` when the last
one is written: a run that fails or is killed never leaves a file that looks complete.

Resuming (``resume=True``) continues an interrupted run without repeating or losing a
line: the partial file's last complete record (a line cut short by ``kill -9`` is
truncated away) names the last input line done, and reading continues after it. The
options of the run are kept beside the partial file (``OUT.partial.json``) and must match
on resume. Resuming a complete ``OUT`` appends the answers to input lines past its last
record (a log that grew); its options went with its partial file, so only the kind of
model and the layout are checked then (the record fields, the CSV header).

An answer does not depend on the texts it was batched with: the engines pad a forward
pass to its longest row, and PyTorch's kernels round differently (in the 7th digit) for
another width of a short sequence, or for a single row, so the engine's runtime is made
to pad every pass to its length bucket and to run a single row as two
(:class:`BatchInvariantRuntime`). A resumed run, a run with another chunk or batch size
and a Ray Data run (:mod:`headwise.integrations.ray`) therefore write the very records of
an uninterrupted run. (An ensemble's networks batch texts themselves and keep that
rounding difference.)
"""

from __future__ import annotations

import csv
import io
import itertools
import json
import os
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from headwise.intent.classifier import check_answer_options
from headwise.text.readers import (
    TEXT_KEYS,
    DataError,
    _decode_lines,
    _pick,
    _pick_key,
    json_type_name,
)

__all__ = ["CSV_COLUMNS", "DEFAULT_BATCH_SIZE", "DEFAULT_CHUNK_SIZE", "ECHO_CHARS",
           "INPUT_FORMATS", "OUTPUT_FORMATS", "BatchPredictResult", "InputRow", "OutputFile",
           "Predictor", "RowReader", "BatchInvariantRuntime", "echo",
           "engine_record", "format_records", "make_batch_invariant", "input_format_of",
           "output_format_of", "partial_path", "predict_file", "record", "state_path"]

#: input layouts: ``"auto"`` (by extension), CSV/TSV, JSON lines, plain text (a text a line)
INPUT_FORMATS = ("auto", "csv", "jsonl", "text")
#: output layouts: ``"auto"`` (by extension), JSON lines, CSV
OUTPUT_FORMATS = ("auto", "jsonl", "csv")
#: characters of a text that an answer repeats (a longer one is cut, and marked with …)
ECHO_CHARS = 200
#: texts read, predicted and written at a time: the memory bound and the unit of progress
DEFAULT_CHUNK_SIZE = 1024
#: rows in one forward pass: the fastest of the in-process batch sweep of
#: ``benchmarks/serve.py`` (1, 8, 32, 64) on PyTorch and onnxruntime alike
DEFAULT_BATCH_SIZE = 64
#: the CSV columns of an output, by the kind of model (``Predictor.kind``); the nested
#: fields (``top_k``, ``intents``, ``slots``, ``long_text``) are JSON, null as an empty cell
CSV_COLUMNS: dict[str, tuple[str, ...]] = {
    "intent": ("line", "text", "text_chars", "intent", "confidence", "out_of_scope", "top_k",
               "long_text"),
    "compound": ("line", "text", "text_chars", "out_of_scope", "intents", "top_k", "slots",
                 "long_text"),
}
#: the keys of a JSON-lines record, in order, by the kind of model
JSONL_KEYS: dict[str, tuple[str, ...]] = {
    "intent": ("line", "text", "intent", "confidence", "out_of_scope", "top_k", "text_chars",
               "long_text"),
    "compound": ("line", "text", "out_of_scope", "intents", "top_k", "slots", "text_chars",
                 "long_text"),
}
#: bad rows kept in :attr:`BatchPredictResult.bad_rows` (all are counted)
LISTED_BAD_ROWS = 100
_BOM = b"\xef\xbb\xbf"
_STATE_VERSION = 1


# -- the records --------------------------------------------------------------------------
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


def engine_record(answer: Mapping[str, Any]) -> dict[str, Any]:
    """The ``headwise predict --json`` object of a serve engine's answer (its
    ``predict``'s records: probabilities not rounded, ``long_text`` inside): the fields of
    the prediction's ``to_dict()`` (probabilities to 6 decimals), then :func:`record`'s.

    Args:
        answer: one record of ``InferenceEngine``, ``CompoundEngine`` or
            ``ProbabilityEngine.predict``.

    Returns:
        The object ``headwise predict --json`` prints for that text.
    """
    out = {}
    for key, value in answer.items():
        if key == "long_text":
            continue
        if key == "confidence":
            value = round(value, 6)
        elif key in ("top_k", "intents"):
            value = _rounded(value)
        out[key] = value
    return record(out, answer["text"], answer.get("long_text"))


class Predictor(Protocol):
    """What :func:`predict_file` predicts with: the service's engines
    (``InferenceEngine``, ``CompoundEngine``, ``ProbabilityEngine``) are predictors.

    Attributes:
        kind: ``"intent"`` (single-label answers) or ``"compound"`` (intents and slots).
        labels: the intents the model answers.
    """

    kind: str
    labels: list[str]

    def predict(self, texts: Sequence[str], *, top_k: int = 3,
                threshold: float | None = None) -> list[dict[str, Any]]:
        """One answer record per text (the engines' response records)."""
        ...


class BatchInvariantRuntime:
    """A runtime whose answer for a row does not depend on the rows it is batched with.

    The engines pad a forward pass to its longest row, and PyTorch's kernels round
    differently (by ~1e-7) for another sequence width below ~16 tokens, and for a single
    row (a matrix-vector product). So every forward pass is padded to a width fixed by
    its rows' length bucket (the power of two >= 8 at or above its width, capped at the
    model's maximum length; the engines group rows by that bucket) and a single row is run
    as two; the outputs are cut back to the rows and width asked for. Everything else is
    the wrapped runtime's (``name``, ``model``, ...).

    Args:
        runtime: a ``TorchRuntime`` or ``OnnxRuntime`` (``forward``, and
            ``forward_joint`` for a compound model).
        pad_id: the tokenizer's padding id.
        max_length: the model's maximum length in tokens (no pass is padded beyond it).
    """

    def __init__(self, runtime: Any, *, pad_id: int, max_length: int) -> None:
        self.inner = runtime
        self.name = runtime.name
        self.pad_id, self.max_length = int(pad_id), int(max_length)

    def __getattr__(self, name: str) -> Any:
        if name == "inner":  # not set yet (unpickling): no recursion
            raise AttributeError(name)
        return getattr(self.inner, name)

    def pad(self, input_ids: np.ndarray, attention_mask: np.ndarray
            ) -> tuple[np.ndarray, np.ndarray]:
        """The batch as it is run: at least two rows, padded to its bucket's width."""
        rows, width = input_ids.shape
        bucket = max(8, 1 << max(0, width - 1).bit_length())
        target = max(width, min(bucket, self.max_length))
        ids = np.full((max(rows, 2), target), self.pad_id, dtype=np.int64)
        mask = np.zeros((max(rows, 2), target), dtype=np.int64)
        ids[:rows, :width], mask[:rows, :width] = input_ids, attention_mask
        if rows == 1:
            ids[1], mask[1] = ids[0], mask[0]
        return ids, mask

    def forward(self, input_ids: np.ndarray, attention_mask: np.ndarray
                ) -> tuple[np.ndarray, np.ndarray]:
        """The wrapped runtime's ``forward`` on :meth:`pad`'s batch, cut back."""
        logits, pooled = self.inner.forward(*self.pad(input_ids, attention_mask))
        rows = len(input_ids)
        return logits[:rows], pooled[:rows]

    def forward_joint(self, input_ids: np.ndarray, attention_mask: np.ndarray
                      ) -> tuple[np.ndarray, np.ndarray | None]:
        """The wrapped runtime's ``forward_joint`` on :meth:`pad`'s batch, cut back."""
        logits, tags = self.inner.forward_joint(*self.pad(input_ids, attention_mask))
        rows, width = input_ids.shape
        return logits[:rows], None if tags is None else tags[:rows, :width]


def make_batch_invariant(engine: Any) -> Any:
    """Give a serve engine that runs a network (PyTorch or onnxruntime) a
    :class:`BatchInvariantRuntime` (in place); a TF-IDF model's or an ensemble's engine
    is left as it is (an ensemble's networks batch texts themselves). Returns the engine."""
    runtime = getattr(engine, "runtime", None)
    if getattr(runtime, "name", None) in ("torch", "onnx") \
            and not isinstance(runtime, BatchInvariantRuntime):
        engine.runtime = BatchInvariantRuntime(runtime, pad_id=engine.pad_id,
                                               max_length=engine.max_length)
    return engine


# -- input --------------------------------------------------------------------------------
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


def output_format_of(path: str | Path, output_format: str = "auto") -> str:
    """The layout of an output file: ``output_format`` unless ``"auto"``, else by
    extension (``.jsonl``/``.ndjson``/``.json``: jsonl; ``.csv``/``.tsv``: csv).

    Raises:
        ValueError: an unknown ``output_format``, or ``"auto"`` with another extension.
    """
    if output_format not in OUTPUT_FORMATS:
        raise ValueError(f"output format must be one of {OUTPUT_FORMATS}, got "
                         f"{output_format!r}")
    if output_format != "auto":
        return output_format
    suffix = Path(path).suffix.lower()
    by_suffix = {".jsonl": "jsonl", ".ndjson": "jsonl", ".json": "jsonl", ".csv": "csv",
                 ".tsv": "csv"}
    if suffix not in by_suffix:
        raise ValueError(f"--out {path}: cannot tell the output format from the extension "
                         f"{suffix or '(none)'}; name the file .jsonl or .csv, or pass "
                         f"--output-format jsonl|csv")
    return by_suffix[suffix]


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


# -- output -------------------------------------------------------------------------------
def partial_path(out: str | Path) -> Path:
    """Where a run writes before its output is complete: ``OUT.partial``."""
    out = Path(out)
    return out.with_name(out.name + ".partial")


def state_path(out: str | Path) -> Path:
    """The options of an unfinished run, checked on resume: ``OUT.partial.json``."""
    out = Path(out)
    return out.with_name(out.name + ".partial.json")


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
                   kind: str) -> str:
    """The text of output records: JSON lines (``{"line": LINE, **record}``) or CSV rows
    (:data:`CSV_COLUMNS`), each ended by a newline.

    Args:
        lines: the input line of each record.
        records: the records (:func:`engine_record`).
        fmt: ``"jsonl"`` or ``"csv"``.
        kind: ``"intent"`` or ``"compound"`` (the CSV columns).

    Returns:
        The text to append to the output.
    """
    if fmt == "jsonl":
        return "".join(json.dumps({"line": int(n), **r}, ensure_ascii=False, default=str)
                       + "\n" for n, r in zip(lines, records, strict=True))
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    columns = CSV_COLUMNS[kind][1:]
    for n, r in zip(lines, records, strict=True):
        writer.writerow([str(int(n)), *(_cell(r.get(c)) for c in columns)])
    return buf.getvalue()


class OutputFile:
    """The output of a run: written as ``OUT.partial``, renamed to ``OUT`` by
    :meth:`commit`.

    A fresh run (``resume=False``) replaces any earlier partial file. ``resume=True``
    continues ``OUT.partial`` when there is one (its saved options must equal ``state``),
    else a complete ``OUT`` (moved back to ``OUT.partial`` until done), else starts afresh;
    the last complete record gives :attr:`last_line`, and a record cut short is truncated
    away.

    Args:
        path: ``OUT``.
        fmt: ``"jsonl"`` or ``"csv"``.
        kind: ``"intent"`` or ``"compound"``.
        resume: continue an earlier output.
        state: the run's options, saved beside the partial file and checked on resume
            (None: none saved, the output cannot be resumed with a check).

    Attributes:
        last_line: the input line of the last record kept (None: none).
        records: records kept from an earlier run.
        resumed: whether an earlier output was continued.

    Raises:
        ValueError: on resume, options that differ from the saved ones, a partial file
            without them, or an output that is not one of these records.
    """

    def __init__(self, path: str | Path, *, fmt: str, kind: str, resume: bool = False,
                 state: Mapping[str, Any] | None = None) -> None:
        if fmt not in ("jsonl", "csv"):
            raise ValueError(f"output format must be jsonl or csv, got {fmt!r}")
        if kind not in CSV_COLUMNS:
            raise ValueError(f"model kind must be one of {tuple(CSV_COLUMNS)}, got {kind!r}")
        self.path, self.fmt, self.kind = Path(path), fmt, kind
        self.partial, self.state_file = partial_path(path), state_path(path)
        self.last_line: int | None = None
        self.records = 0
        self.resumed = False
        state = None if state is None else {"version": _STATE_VERSION, **state}
        self.path.parent.mkdir(parents=True, exist_ok=True)
        if resume and self.partial.exists():
            self._check_state(state)
            self.resumed = True
        elif resume and self.path.exists():
            self._save_state(state)
            os.replace(self.path, self.partial)
            self.resumed = True
        else:
            self._save_state(state)
            self.partial.write_bytes(b"")
        keep = self._scan() if self.resumed else 0
        self._file = open(self.partial, "r+b")
        self._file.truncate(keep)
        self._file.seek(keep)
        if keep == 0 and fmt == "csv":
            self.write(",".join(CSV_COLUMNS[kind]) + "\n")

    # -- resume -------------------------------------------------------------------------
    def _save_state(self, state: Mapping[str, Any] | None) -> None:
        if state is None:
            self.state_file.unlink(missing_ok=True)
            return
        tmp = self.state_file.with_name(self.state_file.name + ".tmp")
        tmp.write_text(json.dumps(state, indent=1, default=str), encoding="utf-8")
        os.replace(tmp, self.state_file)

    def _check_state(self, state: Mapping[str, Any] | None) -> None:
        if state is None:
            return
        if not self.state_file.is_file():
            raise ValueError(f"cannot resume {self.partial}: {self.state_file}, which holds "
                             f"the options of the run, is missing; start again without "
                             f"--resume")
        saved = json.loads(self.state_file.read_text(encoding="utf-8"))
        now = json.loads(json.dumps(state, default=str))
        differ = [k for k in sorted(set(saved) | set(now)) if saved.get(k) != now.get(k)]
        if differ:
            what = "; ".join(f"{k}: {saved.get(k)!r} then, {now.get(k)!r} now" for k in differ)
            raise ValueError(f"cannot resume {self.partial} with other options than it was "
                             f"started with ({what}); rerun with the same options, or "
                             f"without --resume to start again")

    def _scan(self) -> int:
        """Bytes of the partial file up to the end of its last complete record (sets
        :attr:`last_line` and :attr:`records`)."""
        if self.fmt == "jsonl":
            return self._scan_jsonl()
        return self._scan_csv()

    def _not_ours(self, why: str) -> ValueError:
        return ValueError(f"cannot resume {self.partial}: {why}; it is not the output of "
                          f"`headwise predict --data` for a {self.kind} classifier in "
                          f"{self.fmt} (start again without --resume)")

    def _scan_jsonl(self) -> int:
        size = self.partial.stat().st_size
        with open(self.partial, "rb") as f:
            end = _rfind_newline(f, size)  # a tail after the last newline is cut short
            if end < 0:
                return 0
            start = _rfind_newline(f, end) + 1
            f.seek(start)
            last = f.read(end - start)
            f.seek(0)
            left, self.records = end + 1, 0
            while left > 0:
                block = f.read(min(left, 1 << 20))
                self.records += block.count(b"\n")
                left -= len(block)
        try:
            rec = json.loads(last)
        except (json.JSONDecodeError, UnicodeDecodeError):
            raise self._not_ours("its last complete line is not JSON") from None
        if not isinstance(rec, dict) or tuple(rec) != JSONL_KEYS[self.kind] \
                or not isinstance(rec["line"], int):
            raise self._not_ours("its last record does not have the fields "
                                 + ", ".join(JSONL_KEYS[self.kind]))
        self.last_line = rec["line"]
        return end + 1

    def _scan_csv(self) -> int:
        keep, consumed = 0, 0
        ended = True  # whether the lines read so far end with a newline

        def lines() -> Iterator[str]:
            nonlocal consumed, ended
            with open(self.partial, "rb") as f:
                for raw in f:
                    consumed += len(raw)
                    ended = raw.endswith(b"\n")
                    yield raw.decode("utf-8", errors="replace")

        size = self.partial.stat().st_size
        reader = csv.reader(lines())
        columns = list(CSV_COLUMNS[self.kind])
        header = None
        self.records = 0
        try:
            for row in reader:
                if not ended:
                    break  # the tail, cut short
                if header is None:
                    header = row
                    if header != columns:
                        raise self._not_ours(f"its header is {','.join(header)}, not "
                                             f"{','.join(columns)}")
                    keep = consumed
                    continue
                if len(row) != len(columns) or not row[0].isdigit():
                    if consumed == size:
                        break  # a quoted field cut short after one of its newlines
                    raise self._not_ours(f"a row ending at byte {consumed} is not a record")
                self.last_line, keep = int(row[0]), consumed
                self.records += 1
        except csv.Error:  # a quoted field cut short at the end of the file
            pass
        return keep

    # -- writing ------------------------------------------------------------------------
    def write(self, text: str) -> None:
        """Append ``text`` (whole records) and flush it to the operating system."""
        self._file.write(text.encode("utf-8"))
        self._file.flush()

    def commit(self) -> Path:
        """Sync the partial file to disk, rename it to ``OUT`` and drop the saved options.

        Returns:
            ``OUT``.
        """
        self._file.flush()
        os.fsync(self._file.fileno())
        self._file.close()
        os.replace(self.partial, self.path)
        self.state_file.unlink(missing_ok=True)
        return self.path

    def close(self) -> None:
        """Close the file (the partial file stays, for ``resume``, unless committed)."""
        if not self._file.closed:
            self._file.close()


def _rfind_newline(f: Any, end: int, block: int = 1 << 16) -> int:
    """Offset of the last ``\\n`` before byte ``end`` of a binary file, or -1."""
    pos = end
    while pos > 0:
        start = max(0, pos - block)
        f.seek(start)
        found = f.read(pos - start).rfind(b"\n")
        if found >= 0:
            return start + found
        pos = start
    return -1


# -- the run ------------------------------------------------------------------------------
@dataclass
class BatchPredictResult:
    """What :func:`predict_file` did.

    Attributes:
        out: the output file (complete).
        format: its layout (``"jsonl"`` or ``"csv"``).
        written: records written by this run.
        skipped: bad rows skipped by this run.
        bad_rows: ``(line, problem)`` of the first :data:`LISTED_BAD_ROWS` of them.
        resumed_after: on resume, the input line of the last record found (None: a fresh
            start).
        kept: records kept from the earlier run.
        seconds: wall-clock time of the run.
    """

    out: Path
    format: str
    written: int = 0
    skipped: int = 0
    bad_rows: list[tuple[int, str]] = field(default_factory=list)
    resumed_after: int | None = None
    kept: int = 0
    seconds: float = 0.0

    @property
    def texts_per_second(self) -> float:
        """Records written per second of the run."""
        return self.written / self.seconds if self.seconds > 0 else 0.0


def predict_file(predictor: Predictor, data: str | Path, out: str | Path, *,
                 input_format: str = "auto", output_format: str = "auto",
                 text_column: str | None = None, top_k: int = 3,
                 threshold: float | None = None, chunk_size: int = DEFAULT_CHUNK_SIZE,
                 resume: bool = False, strict: bool = False, progress: bool | None = None,
                 on_bad_row: Callable[[DataError], None] | None = None,
                 options: Mapping[str, Any] | None = None) -> BatchPredictResult:
    """Predict every text of a file into an output file, a chunk at a time.

    Args:
        predictor: what answers (a serve engine; see :class:`Predictor`). An engine
            running a network is given a :class:`BatchInvariantRuntime`
            (:func:`make_batch_invariant`).
        data: the input file (see the module docstring for the layouts).
        out: the output file, written as ``OUT.partial`` and renamed when complete.
        input_format: one of :data:`INPUT_FORMATS`.
        output_format: one of :data:`OUTPUT_FORMATS`.
        text_column: the CSV column or JSON key of the text.
        top_k: intents listed per text.
        threshold: override of the model's out-of-scope threshold (0 disables it).
        chunk_size: texts read, predicted and written at a time (memory and progress; an
            answer does not depend on it).
        resume: continue an interrupted run (:class:`OutputFile`).
        strict: a bad row raises instead of being skipped.
        progress: a tqdm bar on stderr with texts/s; None: only when stderr is a terminal.
        on_bad_row: called with each bad row skipped (a :class:`DataError` locating it).
        options: more of the run's options to save and check on resume (the model, the
            runtime).

    Returns:
        A :class:`BatchPredictResult`.

    Raises:
        DataError: a problem with the whole input file, or with a row when ``strict``.
        ValueError: bad options (``top_k < 1``, a threshold outside [0, 1],
            ``chunk_size < 1``, an unknown format, ``out`` being the input), or a resume
            that does not match the partial output (:class:`OutputFile`).
    """
    from tqdm import tqdm

    started = time.perf_counter()
    check_answer_options(top_k, 0.0 if threshold is None else threshold)
    if isinstance(chunk_size, bool) or not isinstance(chunk_size, int) or chunk_size < 1:
        raise ValueError(f"chunk size must be a positive integer, got {chunk_size!r}")
    reader = RowReader(data, input_format=input_format, text_column=text_column)
    fmt = output_format_of(out, output_format)
    out = Path(out)
    if reader.path.resolve() in (out.resolve(), partial_path(out).resolve()):
        raise ValueError(f"--out {out} is the input file; write the answers elsewhere")
    make_batch_invariant(predictor)
    state = {"data": str(reader.path.resolve()), "input_format": reader.format,
             "text_column": text_column, "output_format": fmt, "kind": predictor.kind,
             "labels": list(predictor.labels), "top_k": top_k, "threshold": threshold,
             **(options or {})}
    rows = iter(reader)
    first = next(rows, None)  # a problem with the whole file shows before any output
    output = OutputFile(out, fmt=fmt, kind=predictor.kind, resume=resume, state=state)
    result = BatchPredictResult(out, fmt, kept=output.records,
                                resumed_after=output.last_line if output.resumed else None)
    after = output.last_line or 0
    bar = tqdm(desc=reader.path.name, unit=" texts", file=sys.stderr, dynamic_ncols=True,
               disable=None if progress is None else not progress)
    texts: list[str] = []
    lines: list[int] = []

    def flush() -> None:
        answers = predictor.predict(texts, top_k=top_k, threshold=threshold)
        output.write(format_records(lines, [engine_record(a) for a in answers], fmt,
                                    predictor.kind))
        result.written += len(texts)
        bar.update(len(texts))
        if reader.size:
            bar.set_postfix_str(f"{100 * reader.bytes_read / reader.size:.0f}% of the input",
                                refresh=False)
        texts.clear()
        lines.clear()

    try:
        for row in itertools.chain([] if first is None else [first], rows):
            if row.line <= after:
                continue
            if row.text is None:
                err = DataError(reader.path, row.line, row.problem or "bad row")
                if strict:
                    raise err
                result.skipped += 1
                if len(result.bad_rows) < LISTED_BAD_ROWS:
                    result.bad_rows.append((row.line, err.problem))
                if on_bad_row is not None:
                    on_bad_row(err)
                continue
            texts.append(row.text)
            lines.append(row.line)
            if len(texts) >= chunk_size:
                flush()
        if texts:
            flush()
        output.commit()
    finally:
        output.close()
        bar.close()
    result.seconds = time.perf_counter() - started
    return result
