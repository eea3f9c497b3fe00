"""``headwise predict``: top-k intents with calibrated confidence, or out-of-scope.

Each answer echoes at most :data:`ECHO_CHARS` characters of its text (then ``…``), with
the text's length in ``text_chars``, and says in ``long_text`` how a network read a text
over its ``max_length`` tokens (``--long-text``: the service's ``long_text`` note, null
otherwise); the plain output says it in words (:func:`long_text_words`).

``--data FILE --out FILE`` streams a file of any size through the model
(:func:`headwise.intent.batch.predict_file`: constant memory, batched forward
passes on onnxruntime when the model directory holds its export, a progress bar,
``--resume`` after an interruption, bad rows skipped or ``--strict``); with ``--ray
[ADDRESS]`` a directory or glob of files goes over a Ray cluster instead
(:func:`headwise.integrations.ray.predict_files`).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from typing import Any

from headwise.commands._common import (
    LONG_TEXT_POLICIES,
    LONG_TEXT_WINDOW_HELP,
    RUNTIMES,
    add_encoding_options,
    column_list,
    is_compound_model,
    long_text_choice,
    runtime_choice,
)

#: characters of a text that an answer repeats (a longer one is cut, and marked with …):
#: ``headwise.intent.batch.ECHO_CHARS``, repeated so that building the parser
#: imports nothing heavy (a test keeps them equal), as are the formats
ECHO_CHARS = 200
INPUT_FORMATS = ("auto", "csv", "jsonl", "text", "xlsx")
OUTPUT_FORMATS = ("auto", "jsonl", "csv")
#: defaults of ``--batch-size`` and ``--chunk-size`` (``headwise.intent.batch``)
DEFAULT_BATCH_SIZE = 64
DEFAULT_CHUNK_SIZE = 1024
#: the exit status of ``headwise predict TEXT...`` (or standard input) when a text was empty:
#: the others are answered, each empty one reported by its position (as the file stream
#: reports a bad row by its line, though a file's bad rows leave the status 0: a big file
#: is expected to hold some, a text given by hand is not)
EMPTY_TEXT_STATUS = 1
#: bad rows printed one by one (the others are counted)
SHOWN_BAD_ROWS = 20
#: the options that only apply with --data, and their defaults
FILE_OPTIONS = {"out": None, "format": ("auto", "auto"), "columns": (None, ()),
                "resume": False, "strict": False, "quiet": False, "batch_size": None,
                "chunk_size": None, "threads": None, "ray": None,
                "encoding": None, "sheet": None}


def _formats(text: str) -> tuple[str, str]:
    """``--format IN[,OUT]``: the input's and the output's layout (empty: auto)."""
    given = [t.strip() or "auto" for t in text.split(",")]
    if len(given) > 2:
        raise argparse.ArgumentTypeError(f"give IN[,OUT], got {text!r}")
    given += ["auto"] * (2 - len(given))
    for value, choices, what in ((given[0], INPUT_FORMATS, "IN"),
                                 (given[1], OUTPUT_FORMATS, "OUT")):
        if value not in choices:
            raise argparse.ArgumentTypeError(f"{what} must be one of {', '.join(choices)}, "
                                             f"got {value!r}")
    return given[0], given[1]


def _text_and_kept(text: str) -> tuple[str | None, tuple[str, ...]]:
    """``--columns TEXT[,KEEP...]``: the text's column (None: found by name) and the kept
    ones."""
    names = column_list(text)
    if None in names[1:]:
        raise argparse.ArgumentTypeError(f"an empty column name after the text's: {text!r}")
    return names[0], tuple(n for n in names[1:] if n is not None)


def ray_spec(text: str) -> dict[str, Any]:
    """``--ray [ADDRESS][,actors=N][,cpus=N]``: ``{"address", "actors", "cpus"}`` (None:
    the default; address None: a local cluster started here)."""
    spec: dict[str, Any] = {"address": None, "actors": None, "cpus": None}
    for item in (t.strip() for t in text.split(",")):
        key, eq, value = item.partition("=")
        if not item:
            continue
        if not eq:
            if spec["address"] is not None:
                raise argparse.ArgumentTypeError(f"two addresses in {text!r}")
            spec["address"] = item
            continue
        if key not in ("actors", "cpus"):
            raise argparse.ArgumentTypeError(f"{key!r}: give ADDRESS, actors=N or cpus=N")
        try:
            spec[key] = int(value)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{key}={value}: not an integer") from None
        if spec[key] < 1:
            raise argparse.ArgumentTypeError(f"{key} must be at least 1, got {value}")
    if spec["address"] is not None and spec["cpus"] is not None:
        raise argparse.ArgumentTypeError("cpus=N sizes the local cluster started here; the "
                                         f"one at {spec['address']} has its own")
    return spec


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "predict", help="predict the intents of texts",
        description="Top-k intents with calibrated confidence for each text, or out_of_scope "
        "below the threshold; a compound classifier answers every intent over its threshold, "
        "and the slots. An empty text is reported by its position, exit status 1. An answer "
        f"repeats its text's first {ECHO_CHARS} characters (text_chars: its length; "
        "long_text: what the model did not read). --data FILE --out FILE streams a file of "
        "any size, resumably; with --ray, over a Ray cluster.")
    p.add_argument("model", metavar="MODEL", help="directory saved by `headwise train` (or "
                   "by `headwise ensemble` or `EnsembleClassifier.save`)")
    # a default, so that TEXT is not reported missing beside a missing MODEL
    p.add_argument("texts", nargs="*", metavar="TEXT", default=(),
                   help="texts to classify (default: one a line from standard input)")
    p.add_argument("--top-k", type=int, default=3, help="intents listed per text (default 3)")
    p.add_argument("--threshold", type=float,
                   help="override the saved out-of-scope threshold (0 disables it)")
    p.add_argument("--json", action="store_true", help="one JSON object per line")
    p.add_argument("--long-text", type=long_text_choice, default="auto",
                   metavar="POLICY[:N]",
                   help="past the model's length: auto (by architecture), "
                   + ", ".join(LONG_TEXT_POLICIES[1:]) + LONG_TEXT_WINDOW_HELP)
    p.add_argument("--reference-date", type=_iso_date, metavar="YYYY-MM-DD",
                   help="compound models: the day relative dates in slot values (下个月5号, "
                   "next Friday) count from (default: the model's saved one, else today)")
    p.add_argument("--runtime", type=runtime_choice, default=("auto", None),
                   metavar="|".join(RUNTIMES) + "|FILE.onnx", help="auto (the default): "
                   "onnxruntime on MODEL/model.onnx or the cached export when it reproduces "
                   "these weights, else PyTorch (saying why, with --data); FILE.onnx: that "
                   "export; auto:FILE.onnx: that file, as auto")
    f = p.add_argument_group("files (streaming batch prediction)")
    f.add_argument("--data", help="a file of texts to predict into --out: CSV or TSV with a "
                   "header, JSON lines, plain text (one text a line) or an Excel workbook "
                   "(.xlsx); with --ray, also a directory or a glob of such files")
    f.add_argument("--out", metavar="OUT", help="with --data: the file to write, .jsonl or "
                   ".csv (written as OUT.partial, renamed when complete); with --ray: a "
                   "directory (NAME.jsonl per input NAME.EXT)")
    f.add_argument("--format", type=_formats, default=("auto", "auto"), metavar="IN[,OUT]",
                   help=f"layouts of --data ({', '.join(INPUT_FORMATS[1:])}) and of --out "
                   f"({', '.join(OUTPUT_FORMATS[1:])}), e.g. text or ,csv (default: from the "
                   f"extensions; jsonl with --ray)")
    f.add_argument("--columns", type=_text_and_kept, default=(None, ()),
                   metavar="TEXT[,KEEP...]", help="CSV columns / JSON keys: the text's "
                   "(default: text, sentence, query or utterance), then any each answer "
                   "carries, e.g. ,session")
    add_encoding_options(f)
    f.add_argument("--resume", action="store_true", help="continue an interrupted run: "
                   "after the last complete record of OUT.partial (or OUT), with the same "
                   "options")
    f.add_argument("--strict", action="store_true", help="stop at the first bad row "
                   "(default: skip it, say where, and count it)")
    f.add_argument("--quiet", action="store_true", help="no progress bar")
    f.add_argument("--batch-size", type=int, metavar="N", help=f"texts per forward pass "
                   f"(default {DEFAULT_BATCH_SIZE}, the fastest of benchmarks/serve.py's sweep)")
    f.add_argument("--chunk-size", type=int, metavar="N", help=f"texts read, predicted and "
                   f"written at a time (default {DEFAULT_CHUNK_SIZE}); answers do not depend "
                   f"on it")
    f.add_argument("--threads", type=int, metavar="N", help="intra-op threads of the runtime "
                   "(default: PyTorch's; 1 per actor with --ray)")
    f.add_argument("--ray", nargs="?", const="", type=ray_spec, metavar="ADDRESS,actors=N,"
                   "cpus=N", help="over Ray Data (pip install headwise[ray]): the cluster at "
                   "ADDRESS (auto, ray://HOST:10001), else a local one with cpus=N CPUs "
                   "(default: all); actors=N model replicas (default 1), e.g. --ray actors=4")
    p.set_defaults(func=run)


def echo(text: str, limit: int = ECHO_CHARS) -> str:
    """``text`` as an answer repeats it: whole up to ``limit`` characters, else its first
    ``limit`` characters and ``…`` (:func:`headwise.intent.batch.echo`)."""
    from headwise.intent.batch import echo as cut

    return cut(text, limit)


def record(answer: dict[str, Any], text: str, note: dict[str, Any] | None) -> dict[str, Any]:
    """An answer's ``--json`` object: ``answer`` (``to_dict()`` of a prediction) with
    its text cut by :func:`echo`, ``text_chars`` and ``long_text``
    (:func:`headwise.intent.batch.record`)."""
    from headwise.intent.batch import record as make

    return make(answer, text, note)


def long_text_words(note: dict[str, Any]) -> str:
    """How the plain output says what was done with a long text (its ``long_text`` note),
    e.g. ``long text: 180 tokens over 64, 5 chunks, answer from chunk 4`` (windows narrower
    than the maximum length: ``21 chunks of 16 tokens``; windows that follow the text's
    sentences: ``9 chunks of 16 tokens by sentence``; under ``chunk_span``, ``answer from
    tokens 41-66 read again (located by chunk 6)``)."""
    from headwise.intent.inference.bucketing import SENTENCE_STRIDE

    head = f"long text: {note['tokens']} tokens over {note['max_length']}"
    if note["policy"] == "truncated":
        return f"{head}, truncated (read the first {note['max_length']})"
    if note["policy"] == "head_tail":
        return f"{head}, read its head and tail"
    window = note.get("window") or note["max_length"]
    chunks = f"{note['chunks']} chunks" + (f" of {window} tokens"
                                           if window < note["max_length"] else "") + \
        (f" by {SENTENCE_STRIDE}" if note.get("stride") == SENTENCE_STRIDE else "")
    if note.get("span"):
        start, end = note["span"]
        return f"{head}, {chunks}, answer from tokens {start + 1}-{end} read again " \
               f"(located by chunk {note['chunk']})"
    if note.get("chunk") is not None:
        return f"{head}, {chunks}, answer from chunk {note['chunk']}"
    return f"{head}, {chunks}, pooled ({note.get('pooling') or 'mean'})"


def _note_line(text: str, note: dict[str, Any] | None) -> str:
    """The plain output's first line of an answer: the (cut) text, its length when cut,
    and what was done with a long text (:func:`long_text_words`)."""
    parts = []
    if len(text) > ECHO_CHARS:
        parts.append(f"{len(text)} characters")
    if note is not None:
        parts.append(long_text_words(note))
    return echo(text) + (f"  [{'; '.join(parts)}]" if parts else "")


def _iso_date(text: str) -> Any:
    """``--reference-date``: a calendar date written YYYY-MM-DD."""
    from datetime import date

    try:
        return date.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a date YYYY-MM-DD: {text!r}") from None


def _check_reference_date(args: argparse.Namespace) -> None:
    """``--reference-date`` is for compound models, whose slot values hold dates."""
    if getattr(args, "reference_date", None) is not None and not is_compound_model(args.model):
        raise ValueError(f"--reference-date: {args.model} is a single-label classifier, which "
                         f"answers no slot values; it is for compound (intents + slots) models")


def run(args: argparse.Namespace) -> int:
    _check_reference_date(args)
    if args.data is not None:
        return _run_data(args)
    given = [name for name, default in FILE_OPTIONS.items()
             if getattr(args, name) != default]
    if given:
        options = ", ".join("--" + name.replace("_", "-") for name in given)
        raise ValueError(f"{options}: for --data FILE (streaming a file of texts), which is "
                         f"not given")
    where = "argument" if args.texts else "line"
    given = list(args.texts) if args.texts else [ln.strip() for ln in sys.stdin]
    if not given:
        raise ValueError("no texts: pass them as arguments or on standard input")
    # an empty text is reported by its position (TEXT argument or standard-input line,
    # from 1) and the others are answered; the exit status then says that one was empty
    empty = [i for i, t in enumerate(given) if not t.strip()]
    for i in empty:
        place = f"TEXT argument {i + 1}" if args.texts else f"<stdin>:{i + 1}"
        print(f"headwise predict: {place}: empty text (skipped)", file=sys.stderr)
    texts = [t for t in given if t.strip()]
    answers: list[Any] = []
    notes: list[dict[str, Any] | None] = []
    if texts:
        from headwise.intent.inference.load import load_predictor

        # the predictor ``serve`` would run (runtime auto), on the texts' one encoding
        runtime, onnx_path = args.runtime
        policy, chunk_length = args.long_text
        predictor = load_predictor(args.model, runtime=runtime, onnx_path=onnx_path,
                                   long_text=policy, chunk_length=chunk_length)
        answers, notes = predictor.predictions(texts, top_k=args.top_k,
                                               threshold=args.threshold,
                                               reference_date=args.reference_date)
    found = iter(zip(answers, texts, notes, strict=True))
    skipped = set(empty)
    for i in range(len(given)):
        if i in skipped:
            if args.json:  # one object per input, so outputs zip with inputs
                print(json.dumps({where: i + 1, "error": "empty text"}))
            continue
        answer, text, note = next(found)
        _print_answers(args, [answer], [text], [note])
    if empty:
        print(f"headwise predict: {len(empty)} of {len(given)} texts empty, not answered",
              file=sys.stderr)
        return EMPTY_TEXT_STATUS
    return 0


def _decision_text(p: Any) -> str:
    """How the plain output says which score decided, e.g. ``max_prob 0.312 < threshold
    0.405``."""
    d = p.decision
    if d is None:
        return ""
    sign = "<" if d.rejects else ">="
    return f"{d.score} {d.value:.3f} {sign} threshold {d.threshold:.3f}"


def _print_answers(args: argparse.Namespace, answers: Sequence[Any], texts: Sequence[str],
                   notes: Sequence[dict[str, Any] | None]) -> None:
    """Print each answer (a :class:`~headwise.intent.prediction.Prediction`) with its
    ``long_text`` note: its ``--json`` object, or the plain lines (the answered intents,
    or OUT OF SCOPE with the score that decided; the most probable intents; the slots)."""
    for p, text, note in zip(answers, texts, notes, strict=True):
        if args.json:
            print(json.dumps(record(p.to_dict(), text, note), ensure_ascii=False, default=str))
            continue
        decided = _decision_text(p)
        if p.out_of_scope:
            head = f"OUT OF SCOPE  ({decided})" if decided else "OUT OF SCOPE"
        else:
            head = ", ".join(f"{name} ({prob:.3f})" for name, prob in p.intents)
        print(f"{_note_line(text, note)}\n  -> {head}")
        for name, prob in p.top_k:
            print(f"     {prob:6.3f}  {name}")
        for s in p.slots:
            print(f"     {s.name}: {s.text!r} [{s.start}:{s.end}] = "
                  f"{json.dumps(s.value, ensure_ascii=False, default=str)}")


# -- --data FILE --out FILE ----------------------------------------------------------------
def _positive(args: argparse.Namespace, name: str, default: int) -> int:
    value = getattr(args, name)
    if value is None:
        return default
    if value < 1:
        raise ValueError(f"--{name.replace('_', '-')} must be at least 1, got {value}")
    return value


def _check_data_args(args: argparse.Namespace) -> None:
    if args.texts:
        raise ValueError("pass TEXT arguments or --data FILE, not both")
    if args.json:
        raise ValueError("--json prints to standard output; with --data the answers go to "
                         "--out (JSON lines for OUT.jsonl, or --format ,jsonl)")
    if args.out is None:
        raise ValueError("--data needs --out, the file to write the answers to (.jsonl or "
                         ".csv; a directory with --ray)")
    if args.ray is not None and args.resume:
        raise ValueError("--resume is for one file (--data FILE without --ray); a Ray run "
                         "writes each output whole, as NAME.jsonl.partial until complete")
    if args.ray is not None:
        for option, given in (("--encoding", args.encoding), ("--sheet", args.sheet),
                              ("--columns ...,KEEP", args.columns[1])):
            if given:
                raise ValueError(f"{option} is for one file (--data FILE without --ray); a "
                                 f"Ray run detects each file's encoding and keeps no "
                                 f"columns")


def _bad_row_printer() -> Any:
    """A callback printing the first :data:`SHOWN_BAD_ROWS` bad rows as ``FILE:LINE:
    problem`` (beside a progress bar), then nothing (they are counted)."""
    from tqdm import tqdm

    shown = [0]

    def show(err: Exception) -> None:
        shown[0] += 1
        if shown[0] <= SHOWN_BAD_ROWS:
            tqdm.write(f"{err} (skipped)", file=sys.stderr)
        elif shown[0] == SHOWN_BAD_ROWS + 1:
            tqdm.write(f"(more bad rows are counted, not shown, after the first "
                       f"{SHOWN_BAD_ROWS})", file=sys.stderr)

    return show


def _skipped_line(path: Any, skipped: int, bad_rows: list[tuple[int, str]]) -> str:
    first = "; ".join(f"line {line}: {why}" for line, why in bad_rows[:3])
    more = f" (and {skipped - 3} more)" if skipped > 3 else ""
    return f"{path}: skipped {skipped} bad row{'s' if skipped != 1 else ''}: {first}{more}"


def _run_data(args: argparse.Namespace) -> int:
    _check_data_args(args)
    batch_size = _positive(args, "batch_size", DEFAULT_BATCH_SIZE)
    chunk_size = _positive(args, "chunk_size", DEFAULT_CHUNK_SIZE)
    if args.ray is not None:
        if args.reference_date is not None:
            raise ValueError("--reference-date with --ray: the Ray actors resolve dates "
                             "against the model's saved date or today; predict without --ray "
                             "to give another one")
        return _run_ray(args, batch_size, chunk_size)
    from pathlib import Path

    from headwise.commands._common import check_out_file
    from headwise.intent.batch import output_format_of, partial_path, predict_file
    from headwise.intent.inference.load import load_predictor

    check_out_file(args.out, "--out")
    input_format, output_format = args.format
    output_format_of(args.out, output_format)  # before loading the model
    if Path(args.data).is_dir():
        raise ValueError(f"--data {args.data} is a directory: name one file, or pass --ray "
                         f"to predict every file in it")
    if not Path(args.data).is_file():
        raise FileNotFoundError(f"--data {args.data}: no such file")
    threads = 0 if args.threads is None else args.threads
    runtime, onnx_path = args.runtime
    policy, chunk_length = args.long_text
    predictor = load_predictor(
        args.model, runtime=runtime, onnx_path=onnx_path, max_rows=batch_size,
        threads=threads, long_text=policy, chunk_length=chunk_length,
        report=lambda line: print(f"headwise predict: {line}", file=sys.stderr))
    if args.reference_date is not None:  # a compound model: its classifier's "today"
        predictor.classifier.reference_date = args.reference_date
    try:
        result = predict_file(
            predictor, args.data, args.out, input_format=input_format,
            output_format=output_format, text_column=args.columns[0],
            top_k=args.top_k, threshold=args.threshold, chunk_size=chunk_size,
            encoding=args.encoding, sheet=args.sheet, keep_columns=args.columns[1],
            resume=args.resume, strict=args.strict, progress=False if args.quiet else None,
            on_bad_row=_bad_row_printer(),
            options={"model": str(Path(args.model).resolve()),
                     "runtime": predictor.runtime.name})
    except BaseException:
        partial = partial_path(args.out)
        if partial.exists():
            print(f"headwise predict: the answers so far are in {partial}; run again with "
                  f"--resume to continue after them", file=sys.stderr)
        raise
    if result.resumed_after is not None:
        print(f"headwise predict: resumed after line {result.resumed_after} of {args.data} "
              f"({result.kept} answers kept)", file=sys.stderr)
    if result.skipped:
        print(_skipped_line(args.data, result.skipped, result.bad_rows), file=sys.stderr)
    print(f"headwise predict: wrote {result.written} answers to {result.out} in "
          f"{result.seconds:.1f} s ({result.texts_per_second:.0f} texts/s, runtime "
          f"{predictor.runtime.name})", file=sys.stderr)
    return 0


def _run_ray(args: argparse.Namespace, batch_size: int, chunk_size: int) -> int:
    from headwise.commands._common import check_out_dir

    if args.long_text != ("auto", None):
        raise ValueError("--long-text: Ray's actors run the auto policy and its default "
                         "windows; leave it out with --ray")

    try:
        from headwise.integrations.ray import import_ray, predict_files

        import_ray()
    except ImportError as e:
        raise ValueError(f"--ray needs Ray Data: {e}") from None
    out_dir = check_out_dir(args.out)
    input_format, output_format = args.format
    runtime, onnx_path = args.runtime
    results = predict_files(
        args.model, args.data, out_dir, address=args.ray["address"],
        num_cpus=args.ray["cpus"], actors=args.ray["actors"] or 1,
        input_format=input_format,
        output_format="jsonl" if output_format == "auto" else output_format,
        text_column=args.columns[0], top_k=args.top_k, threshold=args.threshold,
        runtime=runtime, onnx_path=onnx_path, batch_size=batch_size,
        chunk_size=chunk_size, threads=_positive(args, "threads", 1), strict=args.strict,
        quiet=args.quiet, on_bad_row=_bad_row_printer())
    written = sum(r.written for r in results.values())
    seconds = max((r.seconds for r in results.values()), default=0.0)
    for path, r in results.items():
        if r.skipped:
            print(_skipped_line(path, r.skipped, r.bad_rows), file=sys.stderr)
    rate = written / seconds if seconds > 0 else 0.0
    print(f"headwise predict: wrote {written} answers from {len(results)} "
          f"file{'s' if len(results) != 1 else ''} to {out_dir} in {seconds:.1f} s "
          f"({rate:.0f} texts/s over Ray)", file=sys.stderr)
    return 0
