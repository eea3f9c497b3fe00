"""The run of a batch prediction: read a chunk, predict it, write it, until the input ends
(:func:`predict_file`)."""

from __future__ import annotations

import itertools
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from headwise.intent.batch.invariance import make_batch_invariant
from headwise.intent.batch.reader import RowReader
from headwise.intent.batch.records import answer_record, format_records
from headwise.intent.batch.writer import OutputFile, output_format_of, partial_path
from headwise.intent.inference.predictor import Predictor
from headwise.intent.prediction import check_answer_options
from headwise.text.readers import DataError

__all__ = ["DEFAULT_BATCH_SIZE", "DEFAULT_CHUNK_SIZE", "LISTED_BAD_ROWS", "BatchPredictResult",
           "predict_file"]

#: texts read, predicted and written at a time: the memory bound and the unit of progress
DEFAULT_CHUNK_SIZE = 1024
#: rows in one forward pass: the fastest of the in-process batch sweep of
#: ``benchmarks/serve.py`` (1, 8, 32, 64) on PyTorch and onnxruntime alike
DEFAULT_BATCH_SIZE = 64
#: bad rows kept in :attr:`BatchPredictResult.bad_rows` (all are counted)
LISTED_BAD_ROWS = 100


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
                 options: Mapping[str, Any] | None = None, encoding: str | None = None,
                 sheet: str | None = None, keep_columns: Sequence[str] = ()
                 ) -> BatchPredictResult:
    """Predict every text of a file into an output file, a chunk at a time.

    Args:
        predictor: what answers
            (:func:`~headwise.intent.inference.load.load_predictor`). A predictor
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
        encoding: the input's text encoding (default: detected; :class:`RowReader`).
        sheet: the sheet of an Excel workbook (default: the first).
        keep_columns: input columns (JSON keys) whose values each record carries after
            ``line``.

    Returns:
        A :class:`BatchPredictResult`.

    Raises:
        DataError: a problem with the whole input file, or with a row when ``strict``;
            an input none of whose rows is usable (no output is left then).
        ValueError: bad options (``top_k < 1``, a threshold outside [0, 1],
            ``chunk_size < 1``, an unknown format, ``out`` being the input), or a resume
            that does not match the partial output (:class:`OutputFile`).
    """
    from tqdm import tqdm

    started = time.perf_counter()
    check_answer_options(top_k, 0.0 if threshold is None else threshold)
    if isinstance(chunk_size, bool) or not isinstance(chunk_size, int) or chunk_size < 1:
        raise ValueError(f"chunk size must be a positive integer, got {chunk_size!r}")
    reader = RowReader(data, input_format=input_format, text_column=text_column,
                       encoding=encoding, sheet=sheet, keep_columns=keep_columns)
    fmt = output_format_of(out, output_format)
    out = Path(out)
    if reader.path.resolve() in (out.resolve(), partial_path(out).resolve()):
        raise ValueError(f"--out {out} is the input file; write the answers elsewhere")
    make_batch_invariant(predictor)
    state = {"data": str(reader.path.resolve()), "input_format": reader.format,
             "text_column": text_column, "output_format": fmt, "task": predictor.task,
             "labels": list(predictor.labels), "top_k": top_k, "threshold": threshold,
             "encoding": reader.encoding, "sheet": sheet, "keep_columns": reader.keep_columns,
             **(options or {})}
    rows = iter(reader)
    first = next(rows, None)  # a problem with the whole file shows before any output
    output = OutputFile(out, fmt=fmt, resume=resume, state=state, kept=reader.keep_columns)
    result = BatchPredictResult(out, fmt, kept=output.records,
                                resumed_after=output.last_line if output.resumed else None)
    after = output.last_line or 0
    bar = tqdm(desc=reader.path.name, unit=" texts", file=sys.stderr, dynamic_ncols=True,
               disable=None if progress is None else not progress)
    texts: list[str] = []
    lines: list[int] = []
    kept: list[dict[str, Any]] = []

    def flush() -> None:
        answers = predictor.predict(texts, top_k=top_k, threshold=threshold)
        output.write(format_records(lines, [answer_record(a) for a in answers], fmt, kept))
        result.written += len(texts)
        bar.update(len(texts))
        if reader.size:
            bar.set_postfix_str(f"{100 * reader.bytes_read / reader.size:.0f}% of the input",
                                refresh=False)
        texts.clear()
        lines.clear()
        kept.clear()

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
            kept.append(dict(zip(reader.keep_columns, row.kept, strict=True)))
            if len(texts) >= chunk_size:
                flush()
        if texts:
            flush()
        if result.skipped and not result.written and not output.records:
            output.discard()  # every row was bad: no output that looks like answers
            raise reader.no_usable_rows(result.bad_rows, result.skipped)
        output.commit()
    finally:
        output.close()
        bar.close()
    result.seconds = time.perf_counter() - started
    return result
