"""Streaming batch prediction over large files: what ``headwise predict MODEL --data FILE
--out FILE`` runs.

:func:`predict_file` reads texts a chunk at a time, predicts each chunk with a
predictor (:func:`headwise.intent.inference.load_predictor` returns one for every kind of
saved model, on onnxruntime when the model directory holds its ONNX export: the one path
from texts to answers that the library and the service run too) and writes the answers as
they come, so memory stays constant however large the input is::

    from headwise.intent.inference import load_predictor
    predictor = load_predictor("runs/intent", max_rows=64)
    result = predict_file(predictor, "chats.csv", "labels.jsonl")
    result.written, result.skipped

Input (``input_format``, default from the extension): CSV or TSV with a header, the text
in the first of :data:`~headwise.text.readers.TEXT_KEYS` (``text_column`` names it),
as :func:`~headwise.text.readers.read_examples` reads them; JSON lines (one object per
line, same keys); plain text, one text per line; or an Excel sheet (``.xlsx``, the first
or ``sheet``), read as its CSV would be. A text file's encoding is detected as the readers
detect it (UTF-8, GB18030/GBK, UTF-16/32 with a byte-order mark) or named (``encoding``).
Blank lines are skipped, as the readers do; a bad row (undecodable bytes, empty text, a
missing field, invalid JSON, a CSV row with the wrong number of fields) is skipped and
counted (``strict=False``, the default) or raises
:class:`~headwise.text.readers.DataError` ``FILE:LINE: problem`` (``strict=True``). A CSV
header without the text column is a problem with the whole file and always raises, and so
does an input none of whose rows is usable (naming the first problems, and the encoding to
try when bytes did not decode), leaving no output.

Output (``output_format``, default from the extension): JSON lines whose objects are those
``headwise predict --json`` prints (:func:`answer_record`), led by ``line``, the input line
where the row starts; or CSV with the columns of :data:`CSV_COLUMNS` (nested fields as
JSON). ``keep_columns`` names input columns (JSON keys) whose values each record carries
right after ``line`` (a session id, an agent). The answers go to ``OUT.partial`` and the
file is renamed to ``OUT`` when the last one is written: a run that fails or is killed never
leaves a file that looks complete.

Resuming (``resume=True``) continues an interrupted run without repeating or losing a
line: the partial file's last complete record (a line cut short by ``kill -9`` is
truncated away) names the last input line done, and reading continues after it. The
options of the run are kept beside the partial file (``OUT.partial.json``) and must match
on resume. Resuming a complete ``OUT`` appends the answers to input lines past its last
record (a log that grew); its options went with its partial file, so only the kind of
model and the layout are checked then (the record fields, the CSV header).

An answer does not depend on the texts it was batched with: the predictors pad a forward
pass to its longest row, and PyTorch's kernels round differently (in the 7th digit) for
another width of a short sequence, or for a product of few rows (one row; up to 15 on
AVX-512 CPUs), so the predictor's runtime is made to pad every pass to its length bucket and
to at least 16 rows (:class:`BatchInvariantRuntime`). A resumed run, a run with another
chunk or batch size and a Ray Data run (:mod:`headwise.integrations.ray`) therefore write
the very records of an uninterrupted run. (An ensemble's networks batch texts themselves
and keep that rounding difference.)

One concept a module: the records (:mod:`~headwise.intent.batch.records`), the input
(:mod:`~headwise.intent.batch.reader`), the output (:mod:`~headwise.intent.batch.writer`),
batch invariance (:mod:`~headwise.intent.batch.invariance`) and the run
(:mod:`~headwise.intent.batch.run`); the public names are this package's, each imported
from its module on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from headwise._lazy import lazy_names

if TYPE_CHECKING:
    from headwise.intent.batch.invariance import BatchInvariantRuntime, make_batch_invariant
    from headwise.intent.batch.reader import INPUT_FORMATS, InputRow, RowReader, input_format_of
    from headwise.intent.batch.records import (
        CSV_COLUMNS,
        ECHO_CHARS,
        JSONL_KEYS,
        answer_record,
        echo,
        format_records,
        record,
    )
    from headwise.intent.batch.run import (
        DEFAULT_BATCH_SIZE,
        DEFAULT_CHUNK_SIZE,
        LISTED_BAD_ROWS,
        BatchPredictResult,
        predict_file,
    )
    from headwise.intent.batch.writer import (
        OUTPUT_FORMATS,
        OutputFile,
        output_format_of,
        partial_path,
        state_path,
    )

#: public name -> the module that defines it (PEP 562: imported on first use)
_LAZY: dict[str, str] = {
    "CSV_COLUMNS": "headwise.intent.batch.records",
    "DEFAULT_BATCH_SIZE": "headwise.intent.batch.run",
    "DEFAULT_CHUNK_SIZE": "headwise.intent.batch.run",
    "ECHO_CHARS": "headwise.intent.batch.records",
    "INPUT_FORMATS": "headwise.intent.batch.reader",
    "JSONL_KEYS": "headwise.intent.batch.records",
    "LISTED_BAD_ROWS": "headwise.intent.batch.run",
    "OUTPUT_FORMATS": "headwise.intent.batch.writer",
    "BatchInvariantRuntime": "headwise.intent.batch.invariance",
    "BatchPredictResult": "headwise.intent.batch.run",
    "InputRow": "headwise.intent.batch.reader",
    "OutputFile": "headwise.intent.batch.writer",
    "RowReader": "headwise.intent.batch.reader",
    "echo": "headwise.intent.batch.records",
    "answer_record": "headwise.intent.batch.records",
    "format_records": "headwise.intent.batch.records",
    "input_format_of": "headwise.intent.batch.reader",
    "make_batch_invariant": "headwise.intent.batch.invariance",
    "output_format_of": "headwise.intent.batch.writer",
    "partial_path": "headwise.intent.batch.writer",
    "predict_file": "headwise.intent.batch.run",
    "record": "headwise.intent.batch.records",
    "state_path": "headwise.intent.batch.writer",
}

__all__ = ["CSV_COLUMNS", "DEFAULT_BATCH_SIZE", "DEFAULT_CHUNK_SIZE", "ECHO_CHARS",
           "INPUT_FORMATS", "JSONL_KEYS", "LISTED_BAD_ROWS", "OUTPUT_FORMATS",
           "BatchInvariantRuntime", "BatchPredictResult", "InputRow", "OutputFile",
           "RowReader", "echo", "answer_record", "format_records",
           "input_format_of", "make_batch_invariant", "output_format_of", "partial_path",
           "predict_file", "record", "state_path"]

__getattr__, __dir__ = lazy_names(__name__, globals(), _LAZY)
