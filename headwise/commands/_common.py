"""Options and helpers shared by the data-reading sub-commands.

Imported while ``headwise`` builds its parser, so it imports nothing heavy itself (no
torch, scikit-learn or pandas): the readers and classifiers are imported by the helpers
that use them, when a command runs.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from headwise.text.dataset import Dataset

#: the runtimes ``predict --runtime`` and ``serve --runtime`` take:
#: ``headwise.intent.inference.RUNTIMES``, repeated so that building the parser imports
#: nothing heavy (a test keeps them equal)
RUNTIMES = ("auto", "torch", "onnx")
#: the long-text policies ``predict --long-text`` takes:
#: ``headwise.intent.inference.LONG_TEXT_POLICIES``, repeated likewise
LONG_TEXT_POLICIES = ("auto", "truncate", "head_tail", "chunk", "chunk_max", "chunk_in_scope",
                      "chunk_span", "reject")
#: the policies ``--long-text POLICY:N`` gives a window width: the chunked ones
#: (``headwise.intent.inference.bucketing.CHUNK_POOLING``, repeated likewise) and ``auto``
#: (a single network's ``chunk_max``)
CHUNKED_POLICIES = ("auto", "chunk", "chunk_max", "chunk_in_scope", "chunk_span")
#: ``--long-text``'s help: what ``POLICY:N`` means
LONG_TEXT_WINDOW_HELP = "; POLICY:N: windows N tokens wide (>= 8) or N of the length (0.5)"


def runtime_choice(text: str) -> tuple[str, str | None]:
    """A ``--runtime`` value: ``(runtime, ONNX file)``: one of :data:`RUNTIMES` with the
    default file (None); a ``.onnx`` file, served by onnxruntime (``("onnx", FILE)``); or
    ``auto:FILE.onnx``, that file when it is an export of the model's weights, else PyTorch
    (``("auto", FILE)``)."""
    if text in RUNTIMES:
        return text, None
    auto, colon, path = text.partition(":")
    if colon and auto == "auto" and path.lower().endswith(".onnx"):
        return "auto", path
    if text.lower().endswith(".onnx"):
        return "onnx", text
    raise argparse.ArgumentTypeError(f"give {', '.join(RUNTIMES)}, an ONNX file (FILE.onnx) "
                                     f"or auto:FILE.onnx, got {text!r}")


def long_text_choice(text: str) -> tuple[str, int | float | None]:
    """A ``--long-text`` value: ``(policy, chunk_length)``: one of
    :data:`LONG_TEXT_POLICIES` (``chunk_length`` None: the default width), or
    ``POLICY:N`` for a policy of :data:`CHUNKED_POLICIES`, N the width of its windows:
    an integer, that many tokens, or a number with a point, that fraction of the model's
    maximum length (:func:`headwise.intent.inference.bucketing.check_chunk_length`; the
    model's own limits are checked when it loads).

    Raises:
        argparse.ArgumentTypeError: an unknown policy, a width for a policy that does not
            chunk, or a width that is not one.
    """
    policy, colon, width = text.partition(":")
    if policy not in LONG_TEXT_POLICIES:
        raise argparse.ArgumentTypeError(f"give one of {', '.join(LONG_TEXT_POLICIES)}, "
                                         f"optionally :N for a chunked one, got {text!r}")
    if not colon:
        return policy, None
    if policy not in CHUNKED_POLICIES:
        raise argparse.ArgumentTypeError(
            f"{text}: N is the width of a chunked policy's windows "
            f"({', '.join(CHUNKED_POLICIES)}); {policy} does not cut a text into windows")
    try:
        value: int | float = int(width) if width.strip().lstrip("+-").isdigit() \
            else float(width)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text}: N must be a number of tokens (16) or a "
                                         f"fraction of the maximum length (0.5)") from None
    from headwise.intent.inference.bucketing import check_chunk_length

    try:
        return policy, check_chunk_length(value)
    except ValueError as e:
        raise argparse.ArgumentTypeError(f"{text}: {e}") from None


def parse_assignment(item: str, what: str = "PART.FIELD") -> tuple[str, Any]:
    """A ``--set`` item ``NAME=VALUE``: the name and the value, read as JSON (``16``,
    ``true``, ``null``, ``["a"]``) or else taken as a string.

    Raises:
        ValueError: no ``=``.
    """
    name, eq, raw = item.partition("=")
    if not eq or not name.strip():
        raise ValueError(f"--set {item!r}: give {what}=VALUE")
    try:
        return name.strip(), json.loads(raw)
    except json.JSONDecodeError:
        return name.strip(), raw


def typed_value(cls: type, name: str, value: Any) -> Any:
    """``value`` for the field ``name`` of the dataclass ``cls``, checked against its
    annotation (bool, int, float, str or None; an int for a float field becomes a float).

    Raises:
        ValueError: a value of another type, naming the field and its type.
    """
    import typing

    hint = typing.get_type_hints(cls)[name]
    kinds = typing.get_args(hint) or (hint,)
    for t in kinds:
        if t is type(None) and value is None:
            return None
        if t is bool and isinstance(value, bool):
            return value
        if t is int and isinstance(value, int) and not isinstance(value, bool):
            return value
        if t is float and isinstance(value, int | float) and not isinstance(value, bool):
            return float(value)
        if t is str and isinstance(value, str):
            return value
    want = " or ".join("null" if t is type(None) else getattr(t, "__name__", str(t))
                       for t in kinds)
    raise ValueError(f"--set {name}={json.dumps(value, ensure_ascii=False)}: {name} is {want}")


def scalar_fields(cls: type) -> tuple[str, ...]:
    """The fields of the dataclass ``cls`` that ``--set`` can give: those of type bool,
    int, float or str (or None)."""
    import dataclasses
    import typing

    hints = typing.get_type_hints(cls)
    return tuple(f.name for f in dataclasses.fields(cls)
                 if set(typing.get_args(hints[f.name]) or (hints[f.name],))
                 <= {bool, int, float, str, type(None)})


def settings_of(cls: type, items: list[str] | None) -> dict[str, Any]:
    """The fields of the dataclass ``cls`` that ``--set FIELD=VALUE`` items give (one rule:
    FIELD is a field's name, VALUE JSON or a string; a later item wins), each checked by
    :func:`typed_value`.

    Raises:
        ValueError: a malformed item, a field ``cls`` has not (listing those it has) or a
            value of the wrong type.
    """
    names = scalar_fields(cls)
    out = {}
    for item in items or []:
        name, value = parse_assignment(item, "FIELD")
        if name not in names:
            raise ValueError(f"--set {name}: no such setting; the settings: "
                             f"{', '.join(names)}")
        out[name] = typed_value(cls, name, value)
    return out


#: the data layouts ``--format`` takes: ``headwise.text.readers.FORMATS`` (repeated here so
#: that building the parser does not import the readers; a test keeps the two equal)
FORMATS = ("auto", "csv", "jsonl", "banking77", "clue", "xlsx")


def column_list(text: str) -> tuple[str | None, ...]:
    """A ``--columns`` value: comma-separated CSV columns / JSON keys, an empty one standing
    for the default (``",intent"``: the default text column, the intent in ``intent``)."""
    names = tuple(c.strip() or None for c in text.split(","))
    if not any(names):
        raise argparse.ArgumentTypeError(f"names no column: {text!r}")
    return names


def labelled_columns(text: str) -> tuple[str | None, str | None]:
    """``--columns TEXT[,LABEL]`` of a labelled data file: the text's and the intent's
    CSV column / JSON key (None: found by name)."""
    names = column_list(text)
    if len(names) > 2:
        raise argparse.ArgumentTypeError(f"give TEXT[,LABEL], two columns at most: {text!r}")
    return names[0], names[1] if len(names) > 1 else None


def add_data_options(p: argparse.ArgumentParser) -> None:
    """``--format``, ``--columns``, ``--skip-bad-rows``, ``--encoding``, ``--sheet``."""
    p.add_argument("--format", choices=FORMATS, default="auto",
                   help="data layout (default: from the extension and content)")
    p.add_argument("--columns", type=labelled_columns, default=(None, None),
                   metavar="TEXT[,LABEL]", help="CSV columns / JSON keys of the text and of "
                   "the intent, e.g. query,intent or ,intent (default: found by name)")
    p.add_argument("--skip-bad-rows", action="store_true",
                   help="skip malformed rows (counted) instead of stopping at the first")
    add_encoding_options(p)


def add_encoding_options(p: argparse.ArgumentParser) -> None:
    """``--encoding`` (of a text file) and ``--sheet`` (of an Excel workbook)."""
    p.add_argument("--encoding", metavar="NAME",
                   help="text encoding, e.g. gb18030 (GBK), utf-16, big5 (default: "
                   "detected: BOM, UTF-8, else GB18030)")
    p.add_argument("--sheet", metavar="NAME",
                   help="the sheet of an Excel workbook (.xlsx) to read (default: the first)")


def read(path: str, args: argparse.Namespace, *, require_labels: bool = True) -> Dataset:
    """Read a data file with the command's data options; report skipped rows on stderr."""
    from headwise.text.readers import read_examples

    text_column, label_column = args.columns
    data = read_examples(path, format=args.format, text_column=text_column,
                         label_column=label_column, skip_bad_rows=args.skip_bad_rows,
                         require_labels=require_labels, encoding=args.encoding,
                         sheet=args.sheet)
    _report_skipped(path, data.skipped)
    return data


def read_compound(path: str, args: argparse.Namespace) -> Dataset:
    """Read a file of annotated examples (several intents, slot spans) with the command's
    ``--skip-bad-rows``; report skipped rows on stderr."""
    from headwise.text.annotations import read_annotated

    if args.sheet is not None:
        raise ValueError(f"--sheet {args.sheet}: annotated examples (several intents, slot "
                         f"spans) are JSON, not an Excel workbook")
    data = read_annotated(path, skip_bad_rows=args.skip_bad_rows, encoding=args.encoding)
    _report_skipped(path, data.skipped)
    return data


def is_compound_model(directory: str) -> bool:
    """Whether a saved model directory holds a multi-label kind (the compound classifier;
    :func:`headwise.intent.kinds.is_multi_label`, which imports nothing heavy)."""
    from headwise.intent.kinds import is_multi_label

    return is_multi_label(directory)


def plural(n: int, noun: str, nouns: str | None = None) -> str:
    """``"1 intent"``, ``"3 intents"``: a count with its noun in the right number
    (``nouns`` when the plural is not ``noun + "s"``)."""
    return f"{n:,} {noun if n == 1 else (nouns or noun + 's')}"


def check_out_dir(path: str | Path, option: str = "--out") -> Path:
    """Check that ``path`` can be a directory to write in: it is one already, or it does
    not exist and the nearest existing folder above it is a directory (it will be
    created). Call it before any work, so that ``--out train.csv`` is refused at once in
    one line, not after training with ``[Errno 20] Not a directory``.

    Args:
        path: the output directory a command was given.
        option: how the message names it (``"--out"``, ``"OUT"``).

    Returns:
        ``path`` as a :class:`~pathlib.Path`.

    Raises:
        ValueError: ``path``, or a folder above it, is an existing file (not a directory).
    """
    out = Path(path)
    for p in (out, *out.parents):
        if p.exists():
            if p.is_dir():
                return out
            where = "is" if p == out else f"cannot be made: {p} is"
            raise ValueError(f"{option} {out} {where} a file, not a directory; name a "
                             f"directory (created when missing)")
    return out


def check_out_file(path: str | Path, option: str) -> Path:
    """Check that ``path`` can be written as a file: it is not a directory, and the
    nearest existing folder above it is a directory (missing ones are created).

    Raises:
        ValueError: ``path`` is a directory, or a folder above it is a file.
    """
    out = Path(path)
    if out.is_dir():
        raise ValueError(f"{option} {out} is a directory; name the file to write")
    for p in out.parents:
        if p.exists():
            if p.is_dir():
                return out
            raise ValueError(f"{option} {out} cannot be written: {p} is a file, not a "
                             f"directory")
    return out


def _report_skipped(path: str, skipped: list[tuple[int, str]]) -> None:
    if skipped:
        first = "; ".join(f"line {line}: {why}" for line, why in skipped[:3])
        more = f" (and {len(skipped) - 3} more)" if len(skipped) > 3 else ""
        print(f"{path}: skipped {len(skipped)} bad rows: {first}{more}", file=sys.stderr)


def save_and_score(combined: Any, members: list[Any], args: argparse.Namespace, what: str
                   ) -> None:
    """Save ``combined`` (a soup or an ensemble of ``members``) to ``args.out``; with
    ``args.data``, score the members and it side by side (compound members on an annotated
    file)."""
    combined.save(args.out)
    n = len(members)
    print(f"wrote the {what} of {n} model{'s' if n != 1 else ''} to {args.out}",
          file=sys.stderr)
    if args.data:
        scores = score_side_by_side(
            {**dict(zip(args.models, members, strict=True)), what: combined}, args.data, args)
        warning = below_best_member(scores, what, args.data)
        if warning:
            print(f"headwise {what}: warning: {warning}", file=sys.stderr)


#: the two scores of :func:`score_side_by_side`, by the kind of gold: ``(key, words)``, the
#: first deciding and the second breaking ties in :func:`below_best_member`
SIDE_BY_SIDE = {"single_label": (("accuracy", "accuracy"), ("macro_f1", "macro-F1")),
                "multi_label": (("exact_match", "exact match"), ("micro_f1", "micro-F1"))}


def below_best_member(scores: dict[str, dict[str, float]], what: str, data: str
                      ) -> str | None:
    """Why a combination (``scores[what]``) is worse than using its best member alone on
    ``data`` (by accuracy, then macro-F1; compound models by exact match, then micro-F1),
    naming the member and both scores; None when it is not below that member."""
    (first, first_words), (second, second_words) = SIDE_BY_SIDE[
        "single_label" if "accuracy" in scores[what] else "multi_label"]

    def key(s: dict[str, float]) -> tuple[float, float]:
        return s[first], s[second]

    combined = scores[what]
    name, best = max(((n, s) for n, s in scores.items() if n != what),
                     key=lambda item: key(item[1]))
    if key(combined) >= key(best):
        return None
    return (f"the {what} scores {100 * combined[first]:.2f}% {first_words} ({second_words} "
            f"{100 * combined[second]:.2f}%) on {data}, below its best member {name} "
            f"alone ({100 * best[first]:.2f}%, {second_words} {100 * best[second]:.2f}%); "
            f"serve that member instead, or combine other models")


def score_side_by_side(models: dict[str, Any], path: str, args: argparse.Namespace
                       ) -> dict[str, dict[str, float]]:
    """Score every classifier in ``models`` (name -> classifier) on the labelled file
    ``path`` and print two scores per model (``args.json``: as JSON): accuracy and
    macro-F1, or, for compound (multi-label) models, exact match and micro-F1 on the
    annotated file (:data:`SIDE_BY_SIDE`); the scores, name -> ``{score: value}``."""
    from headwise.intent.evaluation import evaluate
    from headwise.intent.kinds import kind_of_classifier

    compound = any(kind_of_classifier(clf).multi_label for clf in models.values())
    task = "multi_label" if compound else "single_label"
    names = SIDE_BY_SIDE[task]
    scores = {}
    if compound:
        examples = read_compound(path, args).examples
        for name, clf in models.items():
            r = evaluate(clf, examples)["intents"]
            scores[name] = {key: r[key] for key, _ in names}
    else:
        data = read(path, args)
        for name, clf in models.items():
            r = evaluate(clf, data.texts, data.labels)
            scores[name] = {key: r[key] for key, _ in names}
    if args.json:
        print(json.dumps(scores, indent=2))
        return scores
    width = max(len(n) for n in scores)
    (a, a_words), (b, b_words) = names
    print(f"{'model':<{width}}  {a_words:>11}  {b_words:>9}")
    for name, s in scores.items():
        print(f"{name:<{width}}  {100 * s[a]:10.2f}%  {100 * s[b]:8.2f}%")
    return scores


def format_threshold(th: Any) -> str:
    """One line on an out-of-scope threshold choice (a ``ThresholdChoice``): the threshold,
    how it was chosen and what it does on the validation rows."""
    if th.method == "none":
        return f"{th.threshold:.3f} (no validation rows: nothing is rejected)"
    oos = "" if th.oos_recall is None else f", out-of-scope recall {th.oos_recall:.4f}"
    bound = ""
    if th.reject_bound is not None and th.reject_budget is not None:
        bound = (f" ({th.reject_confidence:.0%} upper bound {th.reject_bound:.1%}, budget "
                 f"{th.reject_budget:.0%})")
        if th.reject_bound > th.reject_budget:  # only thresholds rejecting none were allowed
            bound += (f"; {th.n_in_scope} in-scope rows are too few to keep the budget with "
                      f"any rejection: give more validation data")
    free = getattr(th, "unbudgeted", None)
    allows = ""
    if free and th.reject_bound is not None and th.reject_budget is not None \
            and th.reject_bound <= th.reject_budget:  # else: too few rows, said above
        from headwise.intent.decision.oos import allowed_rejections

        k = allowed_rejections(th.n_in_scope, th.reject_budget, th.reject_confidence)
        allows = (f" (kept with {th.reject_confidence:.0%} confidence, it lets a threshold "
                  f"reject at most {k} of the {th.n_in_scope} in-scope validation rows, "
                  f"{k / th.n_in_scope:.1%}; more in-scope validation rows let it reject "
                  f"closer to {th.reject_budget:.0%})")
    budget = "" if not free else (
        f"; the reject budget decided{allows}: without it the best balance on the validation "
        f"rows rejects {free['reject_rate']:.1%} of in-scope rows for out-of-scope recall "
        f"{free['oos_recall']:.4f} (threshold {free['threshold']:.3f})")
    return (f"{th.threshold:.3f} ({th.method}): in-scope accuracy "
            f"{th.in_scope_accuracy_no_reject:.4f} -> {th.in_scope_accuracy:.4f}, "
            f"{th.reject_rate:.1%} of in-scope rejected{bound}{oos}{budget}")


def add_combination_arguments(p: argparse.ArgumentParser, what: str) -> None:
    """``OUT``, ``MODEL...``, ``--data``, ``--json`` and the data options of a command that
    combines saved classifiers into ``what`` ("soup", "ensemble")."""
    p.add_argument("out", metavar="OUT", help=f"directory to write the {what} to")
    p.add_argument("models", metavar="MODEL", nargs="+",
                   help="two or more directories saved by `headwise train`")
    p.add_argument("--data", metavar="FILE",
                   help=f"labelled data to score the members and the {what} on")
    p.add_argument("--json", action="store_true", help="print the scores as JSON")
    add_data_options(p)


def check_combination(out: str, models: list[str], what: str) -> None:
    """Check that there are two models or more, ``out`` is none of them (``what``:
    "a soup", "an ensemble") and can be a directory (:func:`check_out_dir`).

    Raises:
        ValueError: a check failed.
    """
    if len(models) < 2:
        raise ValueError(f"{what} needs at least two models, got {len(models)}")
    check_out_dir(out, option="OUT")
    if Path(out).resolve() in {Path(m).resolve() for m in models}:
        raise ValueError(f"OUT {out} is one of the members; write {what} elsewhere")


def report_trained(result: Any, out: Path) -> None:
    """What ``train`` and ``distill`` print after training a single-label classifier (the
    validation scores and temperature, a small-validation warning, the out-of-scope
    threshold), and its info written to ``out/train_summary.json``."""
    import json

    if result.valid_metrics:
        m = result.valid_metrics
        t = getattr(result.classifier, "temperature", None)  # an ensemble keeps its members'
        print(f"validation: accuracy {m['accuracy']:.4f}, macro-F1 {m['macro_f1']:.4f}, "
              + (f"temperature {t:.3f}" if t is not None else "the members' temperatures"))
        if m.get("small_validation"):
            print(f"warning: {m['small_validation']['note']}")
    else:
        print("no validation data: the last epoch's weights are kept and confidence is not "
              "calibrated (temperature 1; `headwise calibrate` fits it on held-out data)")
    score = getattr(result.threshold, "score", "max_prob")
    what = "top probability" if score == "max_prob" else f"{score} detector score"
    print(f"out-of-scope threshold on the {what} {format_threshold(result.threshold)}")
    (Path(out) / "train_summary.json").write_text(
        json.dumps(result.classifier.info, indent=2, ensure_ascii=False) + "\n",
        encoding="utf-8")
