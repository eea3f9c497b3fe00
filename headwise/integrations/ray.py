"""Ray Data: intent predictions over a cluster (``pip install headwise[ray]``).

:class:`IntentPredictor` is a callable class for :meth:`ray.data.Dataset.map_batches`:
each Ray actor loads the model once (the predictor the service runs, on onnxruntime when the model
directory holds its ONNX export) and answers every batch it is given with the records
``headwise predict --json`` prints::

    import ray
    from headwise.integrations.ray import IntentPredictor

    ds = ray.data.read_parquet("s3://bank/chats/")                 # a "text" column
    ds = ds.map_batches(IntentPredictor, fn_constructor_kwargs={"model": "/models/intent"},
                        compute=ray.data.ActorPoolStrategy(size=4), batch_size=256)
    ds.write_parquet("s3://bank/labels/")

Batches may be dicts of numpy arrays (``batch_format="numpy"``) or pandas DataFrames
(``batch_format="pandas"``); the answer has the same form: the batch's other columns, then
one column per field of the record (``text`` is the echoed text, as in the record). The
nested fields (``top_k``, ``long_text``; ``intents`` and ``slots`` for a compound model)
hold Python lists and dicts; Ray stores them as Arrow lists and structs. With
``output="json"`` the answer is the other columns and ``record``, each record as its JSON
text, the exact line ``headwise predict --json`` prints.

:func:`predict_files` is ``headwise predict MODEL --data DIR_OR_GLOB --out DIR --ray
[ADDRESS]``: every input file (CSV, JSON lines or plain text, read as
:func:`headwise.intent.batch.predict_file` reads them, on the workers) becomes
``DIR/NAME.jsonl`` (or ``.csv``) holding exactly the records ``headwise predict --data FILE
--out DIR/NAME.jsonl`` writes, in input order: answers do not depend on how texts are
batched (:class:`~headwise.intent.batch.BatchInvariantRuntime`). The driver writes the
files, each as ``NAME.jsonl.partial`` renamed when complete; the workers must be able to
read the input paths (a local cluster, or storage every node mounts) and have headwise
installed.
"""

from __future__ import annotations

import glob
import json
import logging
import sys
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from headwise.intent.batch import (
    DEFAULT_BATCH_SIZE,
    DEFAULT_CHUNK_SIZE,
    JSONL_KEYS,
    BatchPredictResult,
    OutputFile,
    RowReader,
    answer_record,
    format_records,
    make_batch_invariant,
)
from headwise.intent.prediction import check_answer_options
from headwise.text.readers import DataError

__all__ = ["INSTALL_HINT", "IntentPredictor", "expand_inputs", "import_ray", "predict_files"]

#: what to install for this module
INSTALL_HINT = "pip install headwise[ray]"
#: the record fields, in order, for every kind of model (``text`` is the echoed text)
RECORD_FIELDS = JSONL_KEYS[1:]
_DTYPES = {"out_of_scope": np.bool_, "text_chars": np.int64}
#: the largest block of rows read from a file (Ray's default is 128 MiB): a large input
#: file is read into many blocks, which the actors share
BLOCK_BYTES = 4 << 20


def import_ray() -> Any:
    """The ``ray`` module with Ray Data.

    Raises:
        ImportError: Ray Data is not installed (the message names :data:`INSTALL_HINT`).
    """
    try:
        import ray
        import ray.data  # noqa: F401 - the Data library is a separate extra of ray
    except ImportError as e:
        raise ImportError(f"Ray Data is not installed ({e}); {INSTALL_HINT}") from None
    return ray


class IntentPredictor:
    """A callable class for ``Dataset.map_batches``: loads the model once per actor and
    answers batches of texts with the records of ``headwise predict --json``.

    Args:
        model: the model directory (written by ``headwise train``, ``soup`` or
            ``ensemble``; a compound classifier too), readable where the actor runs.
        text_column: the column holding the texts.
        top_k: intents listed per text.
        threshold: override of the model's out-of-scope threshold (0 disables it).
        runtime: ``"auto"`` (onnxruntime when ``MODEL/model.onnx`` or ``onnx_path`` is an
            export of these weights, else PyTorch), ``"torch"`` or ``"onnx"``.
        onnx_path: the ONNX file for ``"auto"`` / ``"onnx"``.
        batch_size: rows in one forward pass (the predictor splits a larger batch).
        threads: intra-op threads of the runtime (0: the library's default).
        output: ``"columns"`` (one column per record field) or ``"json"`` (a ``record``
            column of JSON texts).
        keep_columns: the input columns to pass through (default: all but the text
            column).

    Raises:
        ValueError: an unknown ``output``, ``top_k < 1``, a threshold outside [0, 1], or
            what loading the model raises (no such directory, a mismatching ONNX file).

    Calling it with a batch (a dict of numpy arrays or a pandas DataFrame) returns the
    answer in the same form.

    Raises (on call):
        KeyError: no text column (or a kept column missing) in the batch.
        ValueError: a row whose text is missing, not a string or blank (its index and the
            column are named; filter those out first), or a kept column that has the name
            of a record field.
    """

    def __init__(self, model: str | Path, *, text_column: str = "text", top_k: int = 3,
                 threshold: float | None = None, runtime: str = "auto",
                 onnx_path: str | Path | None = None, batch_size: int = DEFAULT_BATCH_SIZE,
                 threads: int = 0, output: str = "columns",
                 keep_columns: Sequence[str] | None = None) -> None:
        if output not in ("columns", "json"):
            raise ValueError(f"output must be 'columns' or 'json', got {output!r}")
        check_answer_options(top_k, 0.0 if threshold is None else threshold)
        from headwise.intent.inference.load import load_predictor

        self.model = str(model)
        self.predictor = make_batch_invariant(load_predictor(
            self.model, runtime=runtime, onnx_path=None if onnx_path is None else str(onnx_path),
            max_rows=batch_size, threads=threads,
            report=lambda line: print(f"IntentPredictor: {line}", file=sys.stderr)))
        self.task: str = self.predictor.task
        self.text_column = text_column
        self.top_k, self.threshold = top_k, threshold
        self.output = output
        self.keep_columns = None if keep_columns is None else list(keep_columns)

    @property
    def fields(self) -> tuple[str, ...]:
        """The columns an answer adds: the record's fields, or ``("record",)``."""
        return RECORD_FIELDS if self.output == "columns" else ("record",)

    def records(self, texts: Sequence[str]) -> list[dict[str, Any]]:
        """The ``headwise predict --json`` record of each text."""
        if not len(texts):
            return []
        answers = self.predictor.predict(list(texts), top_k=self.top_k, threshold=self.threshold)
        return [answer_record(a) for a in answers]

    def _texts(self, values: Sequence[Any]) -> list[str]:
        texts = []
        for i, t in enumerate(values):
            if not isinstance(t, str) or not t.strip():
                what = "blank" if isinstance(t, str) else f"{type(t).__name__} {t!r}"[:60]
                raise ValueError(f"IntentPredictor: row {i} of the batch has no text in "
                                 f"column {self.text_column!r} ({what}); filter such rows "
                                 f"out before map_batches")
            texts.append(t.strip())
        return texts

    def _kept(self, names: Sequence[str]) -> list[str]:
        kept = [c for c in names if c != self.text_column] if self.keep_columns is None \
            else self.keep_columns
        missing = [c for c in kept if c not in names]
        if missing:
            raise KeyError(f"keep_columns {missing} are not in the batch (columns: "
                           f"{', '.join(map(str, names))})")
        clash = sorted(set(kept) & set(self.fields))
        if clash:
            raise ValueError(f"input columns {clash} have the names of answer fields; "
                             f"rename them, or pass keep_columns= without them")
        return kept

    def _columns(self, records: list[dict[str, Any]]) -> dict[str, np.ndarray]:
        if self.output == "json":
            return {"record": _objects([json.dumps(r, ensure_ascii=False, default=str)
                                        for r in records])}
        out = {}
        for name in self.fields:
            values = [r[name] for r in records]
            out[name] = np.array(values, dtype=_DTYPES[name]) if name in _DTYPES \
                else _objects(values)
        return out

    def __call__(self, batch: Any) -> Any:
        """Answer a batch: a dict of numpy arrays or a pandas DataFrame with
        :attr:`text_column`; the answer is of the same form (see the class)."""
        if isinstance(batch, dict):
            if self.text_column not in batch:
                raise KeyError(f"no text column {self.text_column!r} in the batch (columns: "
                               f"{', '.join(map(str, batch))}); name it with text_column=")
            kept = self._kept(list(batch))
            answers = self._columns(self.records(self._texts(list(batch[self.text_column]))))
            return {**{c: batch[c] for c in kept}, **answers}
        import pandas as pd

        if not isinstance(batch, pd.DataFrame):
            raise TypeError(f"IntentPredictor takes a dict of numpy arrays or a pandas "
                            f"DataFrame (batch_format 'numpy' or 'pandas'), got "
                            f"{type(batch).__name__}")
        if self.text_column not in batch.columns:
            raise KeyError(f"no text column {self.text_column!r} in the batch (columns: "
                           f"{', '.join(map(str, batch.columns))}); name it with "
                           f"text_column=")
        kept = self._kept(list(batch.columns))
        answers = self._columns(self.records(self._texts(batch[self.text_column].tolist())))
        out = batch[kept].copy()
        for name, values in answers.items():
            out[name] = pd.Series(list(values) if values.dtype == object else values,
                                  index=batch.index, dtype=values.dtype)
        return out


def _objects(values: Sequence[Any]) -> np.ndarray:
    """A 1-d object array of ``values`` (lists and dicts kept whole, not broadcast)."""
    arr = np.empty(len(values), dtype=object)
    for i, v in enumerate(values):
        arr[i] = v
    return arr


# -- headwise predict --data DIR --ray ---------------------------------------------------
def expand_inputs(data: str | Path) -> list[Path]:
    """The input files ``--data`` names: a directory's files (not its sub-directories or
    hidden files), the files a glob matches, or one file; sorted.

    Raises:
        FileNotFoundError: nothing matches.
    """
    path = Path(data)
    if path.is_dir():
        files = sorted(p for p in path.iterdir() if p.is_file() and not p.name.startswith("."))
    elif path.is_file():
        files = [path]
    else:
        files = sorted(Path(p) for p in glob.glob(str(data)) if Path(p).is_file())
    if not files:
        raise FileNotFoundError(f"--data {data} names no input file (a file, a directory of "
                                f"files, or a glob such as 'logs/*.csv')")
    return files


def _read_rows(batch: dict[str, np.ndarray], *, input_format: str, text_column: str | None,
               chunk_size: int) -> Iterator[dict[str, np.ndarray]]:
    """The read stage: each input file's rows (bad ones with their problem), a chunk at a
    time, as ``file``, ``line``, ``text`` and ``problem`` columns."""
    for name in batch["path"]:
        rows = iter(RowReader(name, input_format=input_format, text_column=text_column))
        while True:
            chunk = [r for _, r in zip(range(chunk_size), rows, strict=False)]
            if not chunk:
                break
            yield {"file": _objects([str(name)] * len(chunk)),
                   "line": np.array([r.line for r in chunk], dtype=np.int64),
                   "text": _objects([r.text or "" for r in chunk]),
                   "problem": _objects([r.problem or "" for r in chunk])}


class _FilePredictor(IntentPredictor):
    """The predict stage of :func:`predict_files`: the answer of each good row as the text
    of its output line (``out``), bad rows passed through with an empty one."""

    def __init__(self, model: str, *, fmt: str, **kwargs: Any) -> None:
        super().__init__(model, output="columns", **kwargs)
        self.fmt = fmt

    def __call__(self, batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        good = [i for i, p in enumerate(batch["problem"]) if not p]
        records = self.records([batch["text"][i] for i in good])
        out = [""] * len(batch["line"])
        for i, rec in zip(good, records, strict=True):
            out[i] = format_records([int(batch["line"][i])], [rec], self.fmt)
        return {"file": batch["file"], "line": batch["line"], "problem": batch["problem"],
                "out": _objects(out)}


def _output_names(files: Sequence[Path], out_dir: Path, fmt: str) -> dict[Path, Path]:
    ext = ".csv" if fmt == "csv" else ".jsonl"
    names: dict[Path, Path] = {}
    by_out: dict[Path, list[Path]] = {}
    for f in files:
        names[f] = out_dir / (f.stem + ext)
        by_out.setdefault(names[f], []).append(f)
    clash = [srcs for srcs in by_out.values() if len(srcs) > 1]
    if clash:
        raise ValueError(f"--data: {', '.join(map(str, clash[0]))} would all be written to "
                         f"{out_dir / (clash[0][0].stem + ext)}; give the inputs distinct "
                         f"names")
    inputs = {f.resolve() for f in files}
    for out in names.values():
        if out.resolve() in inputs:
            raise ValueError(f"--out {out_dir}: {out} is one of the inputs; write the "
                             f"answers to another directory")
    return names


def predict_files(model: str | Path, data: str | Path, out_dir: str | Path, *,
                  address: str | None = None, num_cpus: int | None = None, actors: int = 1,
                  input_format: str = "auto", output_format: str = "jsonl",
                  text_column: str | None = None, top_k: int = 3,
                  threshold: float | None = None, runtime: str = "auto",
                  onnx_path: str | Path | None = None, batch_size: int = DEFAULT_BATCH_SIZE,
                  chunk_size: int = DEFAULT_CHUNK_SIZE, threads: int = 1,
                  strict: bool = False, quiet: bool = False,
                  on_bad_row: Callable[[DataError], None] | None = None
                  ) -> dict[Path, BatchPredictResult]:
    """Predict every text of many files on a Ray cluster, one output file per input.

    Args:
        model: the model directory (readable by the workers).
        data: a file, a directory of files or a glob (:func:`expand_inputs`).
        out_dir: the directory of the outputs (created), ``NAME.jsonl`` (or ``.csv``) per
            input ``NAME.EXT``.
        address: a running cluster's address (``"auto"``, ``"ray://host:10001"``); None or
            ``"local"``: start a local one here (stopped at the end). When this process
            already has Ray initialised, that one is used.
        num_cpus: CPUs of the local cluster (default: all).
        actors: model replicas (Ray actors), each loading the model once.
        input_format: as :func:`~headwise.intent.batch.predict_file`.
        output_format: ``"jsonl"`` or ``"csv"``.
        text_column: the CSV column or JSON key of the text.
        top_k: intents listed per text.
        threshold: override of the out-of-scope threshold.
        runtime: ``"auto"``, ``"torch"`` or ``"onnx"``.
        onnx_path: the ONNX file for ``"auto"`` / ``"onnx"``.
        batch_size: rows in one forward pass.
        chunk_size: rows read per block.
        threads: intra-op threads per actor, and the CPUs each actor asks Ray for.
        strict: a bad row stops the run (raises) instead of being skipped.
        quiet: no Ray progress bars and fewer log lines.
        on_bad_row: called with each bad row skipped.

    Returns:
        Each input file's :class:`~headwise.intent.batch.BatchPredictResult`.

    Raises:
        ImportError: Ray Data is not installed.
        FileNotFoundError: no input file, or no model directory.
        DataError: a problem with a whole input file (checked before the cluster starts),
            or with a row when ``strict``.
        ValueError: bad options, or two inputs that would be written to one output.
    """
    import time

    started = time.perf_counter()
    ray = import_ray()
    check_answer_options(top_k, 0.0 if threshold is None else threshold)
    for name, value, low in (("actors", actors, 1), ("batch_size", batch_size, 1),
                             ("chunk_size", chunk_size, 1), ("threads", threads, 1)):
        if isinstance(value, bool) or not isinstance(value, int) or value < low:
            raise ValueError(f"{name} must be an integer >= {low}, got {value!r}")
    if output_format not in ("jsonl", "csv"):
        raise ValueError(f"output format must be jsonl or csv, got {output_format!r}")
    if not Path(model).is_dir():
        raise FileNotFoundError(f"no model directory at {model}")
    files = expand_inputs(data)
    out_dir = Path(out_dir)
    names = _output_names(files, out_dir, output_format)
    for f in files:  # whole-file problems (a CSV header without the text column) here
        next(iter(RowReader(f, input_format=input_format, text_column=text_column)), None)
    local = address in (None, "local")
    if not local and num_cpus is not None:
        raise ValueError("num_cpus is for a local cluster; a running one at "
                         f"{address} has its own")
    own = not ray.is_initialized()
    if not own and (num_cpus is not None or not local):
        raise ValueError("Ray is already initialised in this process: its cluster is used, "
                         "so neither an address nor num_cpus can be given")
    if own:
        ray.init(address="local" if local else address, num_cpus=num_cpus if local else None,
                 include_dashboard=False, logging_level=logging.WARNING if quiet
                 else logging.INFO, log_to_driver=not quiet)
    ctx = ray.data.DataContext.get_current()
    saved = (ctx.execution_options.preserve_order, ctx.enable_progress_bars,
             ctx.target_max_block_size)
    try:
        ctx.execution_options.preserve_order = True  # rows come back in input order
        ctx.target_max_block_size = BLOCK_BYTES  # a large file spreads over the actors
        if quiet:
            ctx.enable_progress_bars = False
            logging.getLogger("ray.data").setLevel(logging.WARNING)
        ds = ray.data.from_items([{"path": str(f)} for f in files],
                                 override_num_blocks=len(files))
        # reading asks for no CPU: the actors may hold every CPU without starving it
        ds = ds.map_batches(_read_rows, batch_size=1, num_cpus=0, fn_kwargs={
            "input_format": input_format, "text_column": text_column,
            "chunk_size": chunk_size})
        ds = ds.map_batches(
            _FilePredictor, batch_size=chunk_size, batch_format="numpy",
            compute=ray.data.ActorPoolStrategy(size=actors), num_cpus=threads,
            fn_constructor_kwargs={
                "model": str(model), "fmt": output_format, "top_k": top_k,
                "threshold": threshold, "runtime": runtime,
                "onnx_path": None if onnx_path is None else str(onnx_path),
                "batch_size": batch_size, "threads": threads})
        results = _write(ds, files, names, output_format, strict, on_bad_row)
    finally:
        (ctx.execution_options.preserve_order, ctx.enable_progress_bars,
         ctx.target_max_block_size) = saved
        if own:
            ray.shutdown()
    elapsed = time.perf_counter() - started
    for r in results.values():
        r.seconds = elapsed
    return results


def _write(ds: Any, files: list[Path], names: dict[Path, Path], fmt: str,
           strict: bool, on_bad_row: Callable[[DataError], None] | None
           ) -> dict[Path, BatchPredictResult]:
    """Drive the dataset and write each file's lines, in order, to its output."""
    by_name = {str(f): f for f in files}
    results = {f: BatchPredictResult(names[f], fmt) for f in files}
    done: set[Path] = set()
    current: tuple[Path, OutputFile] | None = None
    try:
        for batch in ds.iter_batches(batch_format="numpy", batch_size=None):
            pieces: list[str] = []
            for name, line, problem, text in zip(batch["file"], batch["line"],
                                                 batch["problem"], batch["out"], strict=True):
                f = by_name[str(name)]
                if current is None or current[0] != f:
                    if current is not None:
                        current[1].write("".join(pieces))
                        pieces = []
                        current[1].commit()
                        done.add(current[0])
                    if f in done:
                        raise RuntimeError(f"the rows of {f} came back out of order")
                    current = (f, OutputFile(names[f], fmt=fmt))
                r = results[f]
                if problem:
                    err = DataError(f, int(line), str(problem))
                    if strict:
                        current[1].write("".join(pieces))
                        raise err
                    r.skipped += 1
                    if len(r.bad_rows) < 100:
                        r.bad_rows.append((int(line), str(problem)))
                    if on_bad_row is not None:
                        on_bad_row(err)
                else:
                    pieces.append(text)
                    r.written += 1
            if current is not None:
                current[1].write("".join(pieces))
        if current is not None:
            current[1].commit()
            done.add(current[0])
            current = None
        for f in files:  # no rows at all (empty, or every row bad): an empty output
            if f not in done:
                OutputFile(names[f], fmt=fmt).commit()
    finally:
        if current is not None:
            current[1].close()
    return results
