"""Fixtures shared by several test folders: a small hand-written compound corpus, a tiny
compound model trained on it, and the tiny Transformer of the long-text tests."""

from __future__ import annotations

import random
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, settings
from threads import one_thread

# tiny_corpus.py and friends, importable from every test folder whatever the import mode
sys.path.insert(0, str(Path(__file__).parent))

from headwise.text.dataset import Example, SlotSpan

# Hypothesis profiles: "ci" (the default) keeps property tests to a few seconds; "long"
# (`pytest ... --hypothesis-profile=long`) explores far more. Tests that set max_examples
# themselves keep their own count under both. Both draw fresh examples every run, from one
# seed for the session that the report header prints; `--hypothesis-seed=N` replays a run.
# The inputs of bugs found before are pinned with @example, so every run tries them.
settings.register_profile("ci", max_examples=30, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("long", max_examples=2000, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("ci")


#: what ``precision="auto"`` takes on the CPU in the tests: fp32 on every machine, so a
#: recipe's default training (``auto``) runs as on a CPU without BF16 wherever the suite
#: runs; bf16 and the machine's own choice are tested explicitly (tests/train/test_precision.py)
PINNED_AUTO = None


@pytest.fixture(scope="session", autouse=True)
def auto_precision_is_fp32() -> Iterator[None]:
    """Pin the CPU's ``auto`` precision to fp32 for the whole session (its probe times the
    machine, and on a busy one it could choose bf16 in one process and fp32 in another).
    Session-scoped, so that the session and module fixtures that train, which are set up
    before any function-scoped fixture, are pinned too."""
    global PINNED_AUTO
    from headwise.train import precision

    PINNED_AUTO = precision.PrecisionChoice(
        "fp32", "auto: fp32 (pinned by tests/conftest.py; the machine's choice is "
        "tested in tests/train/test_precision.py)")
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(precision, "auto_cpu_precision", lambda: PINNED_AUTO)
        yield


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    """Draw the session's hypothesis seed when none is given (before hypothesis's own plugin
    reads ``--hypothesis-seed``), so that the header can print it. An xdist worker takes
    the seed its controller drew (:func:`pytest_configure_node`), so the printed seed is
    the one every worker ran."""
    if config.getoption("hypothesis_seed", None) is None:
        worker = getattr(config, "workerinput", None)
        config.option.hypothesis_seed = (
            worker["hypothesis_seed"] if worker is not None
            else str(random.SystemRandom().randrange(2**32)))


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: Any) -> None:
    """Hand the session's hypothesis seed to an xdist worker (which parses the command line
    again and would otherwise draw its own)."""
    node.workerinput["hypothesis_seed"] = node.config.option.hypothesis_seed


#: the test folders whose tests compute on tensors too small to share out between
#: threads: they run on one PyTorch intra-op thread, which is faster there and immune to a
#: busy machine (on an oversubscribed 2-core machine, two threads that wait on each other
#: made tests/attention/test_linear.py, test_grad_layouts.py and test_blocksparse.py about
#: 13x slower). Where one of them compares with a subprocess on PyTorch's default count
#: (tests/intent/test_batch_predict.py's kill-and-resume), the tiny models answer alike on
#: one thread and on two. tests/serve, tests/integrations and the top-level files keep
#: the default: their services set their own thread counts, compared across processes.
ONE_THREAD_FOLDERS = frozenset({"attention", "demo", "inspect", "intent", "models", "nn",
                                "slots", "text", "train"})


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None):
    """One intra-op thread around the setup (module and session fixtures included), call
    and teardown of a test in :data:`ONE_THREAD_FOLDERS`; the count is given back after."""
    try:
        folder = Path(item.path).relative_to(Path(__file__).parent).parts[0]
    except ValueError:
        folder = None
    if folder not in ONE_THREAD_FOLDERS:
        yield
        return
    with one_thread():
        yield


#: test folders whose files share one xdist work unit: tests/integrations' two files share
#: the session's Ray instance (ray_instance), so they run on one worker and start one Ray
SHARED_WORKER_FOLDERS = frozenset({"integrations"})


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """``-n N --dist loadfile`` (``./run test``): each test file runs whole on one worker,
    so its module fixtures (trainings, exports, servers) are built once, and the files of
    :data:`SHARED_WORKER_FOLDERS` run together on one worker. Other ``--dist`` modes are
    xdist's own."""
    if config.getvalue("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    class FolderSharingScheduling(LoadFileScheduling):
        def _split_scope(self, nodeid: str) -> str:
            scope = super()._split_scope(nodeid)
            parts = Path(scope).parts
            if len(parts) > 2 and parts[0] == "tests" and parts[1] in SHARED_WORKER_FOLDERS:
                return "/".join(parts[:2])
            return scope

    return FolderSharingScheduling(config, log)


def _seed_line(config: pytest.Config) -> str:
    seed = config.getoption("hypothesis_seed", None)
    return f"hypothesis seed: {seed} (replay with --hypothesis-seed={seed})"


def pytest_report_header(config: pytest.Config) -> str:
    return _seed_line(config)


def pytest_terminal_summary(terminalreporter, exitstatus: int, config: pytest.Config) -> None:
    """The seed again under a failing run: ``-q`` (./run test) hides the header."""
    if terminalreporter.stats.get("failed") or terminalreporter.stats.get("error"):
        terminalreporter.write_line(_seed_line(config))

AMOUNTS = ["20", "50", "300", "1,200", "75", "90"]


def _ex(text: str, intents: list[str], amount: str | None = None) -> Example:
    slots = ()
    if amount is not None:
        piece = f"{amount} pounds"
        start = text.index(piece)
        value = {"amount": float(amount.replace(",", "")), "currency": "GBP"}
        slots = (SlotSpan("amount_of_money", start, start + len(piece), piece, value),)
    return Example(text, tuple(intents), slots, 1)


@pytest.fixture(scope="session")
def compound_corpus() -> list[Example]:
    """English banking questions: compound (charge + refund) and single intents, each with
    an amount slot valued by hand, and three with no intent."""
    rows = []
    for a in AMOUNTS:
        rows += [_ex(f"i was charged twice for {a} pounds refund it", ["charge", "refund"], a),
                 _ex(f"send {a} pounds to my sister", ["transfer"], a),
                 _ex(f"refund the {a} pounds please", ["refund"], a),
                 _ex(f"why was i charged {a} pounds", ["charge"], a)]
    return rows + [_ex("what is the weather today", [])] * 3


@pytest.fixture(scope="session")
def chatter_clf() -> Any:
    """The tiny Transformer of ``tiny_long_text.trained_on_chatter``, trained once a
    session: it answers the tiny corpus's requests and leaves chatter out of scope (the
    long-text tests of prediction, the service and explanations; copy it before changing
    it)."""
    from tiny_long_text import REQUEST, trained_on_chatter

    with one_thread():  # the same model whichever test (and thread count) asks first
        clf = trained_on_chatter()
    assert clf.predict([REQUEST])[0].intent == "card_lost"
    return clf


@pytest.fixture(scope="session")
def trained_compound_dir(tmp_path_factory, compound_corpus) -> Path:
    """A tiny compound (multi-label + slots) Transformer trained on :func:`compound_corpus`
    until it has learned it (intents and the amount slot), with a number-aware head (its
    export keeps that layer's attention unfused); a session's tests share it."""
    from headwise.intent.training.pipeline import train_intent_classifier
    from headwise.intent.training.recipe import IntentRecipe

    recipe = IntentRecipe.from_dict({
        "architecture": {"type": "transformer", "tokenizer": "wordpiece", "vocab_size": 120,
                         "max_length": 24, "d_model": 32, "num_layers": 1, "num_heads": 4,
                         "d_ff": 64, "dropout": 0.0, "attention_dropout": 0.0,
                         "model_overrides": {"number_heads": [0]}},
        "train": {"epochs": 20, "batch_size": 8, "lr": 3e-3, "patience": None,
                  "progress": False},
        "task": {"type": "multi_label"}})
    out = tmp_path_factory.mktemp("trained_compound") / "model"
    with one_thread():  # the same model whichever test (and thread count) asks first
        train_intent_classifier(compound_corpus, compound_corpus, recipe, out_dir=out)
    return out
