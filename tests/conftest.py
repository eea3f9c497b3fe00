"""Fixtures shared by several test folders: a small hand-written compound corpus."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

# tiny_corpus.py and friends, importable from every test folder whatever the import mode
sys.path.insert(0, str(Path(__file__).parent))

from headwise.text.annotations import AnnotatedExample, SlotSpan

# Hypothesis profiles: "ci" (the default) keeps property tests to a few seconds and their
# examples reproducible; "long" (`pytest ... --hypothesis-profile=long`) explores far more.
# Tests that set max_examples themselves keep their own count under both.
settings.register_profile("ci", max_examples=30, deadline=None, derandomize=True,
                          suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("long", max_examples=2000, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("ci")

AMOUNTS = ["20", "50", "300", "1,200", "75", "90"]


def _ex(text: str, intents: list[str], amount: str | None = None) -> AnnotatedExample:
    slots = ()
    if amount is not None:
        piece = f"{amount} pounds"
        start = text.index(piece)
        value = {"amount": float(amount.replace(",", "")), "currency": "GBP"}
        slots = (SlotSpan("amount_of_money", start, start + len(piece), piece, value),)
    return AnnotatedExample(text, tuple(intents), slots, 1)


@pytest.fixture(scope="session")
def compound_corpus() -> list[AnnotatedExample]:
    """English banking questions: compound (charge + refund) and single intents, each with
    an amount slot valued by hand, and three with no intent."""
    rows = []
    for a in AMOUNTS:
        rows += [_ex(f"i was charged twice for {a} pounds refund it", ["charge", "refund"], a),
                 _ex(f"send {a} pounds to my sister", ["transfer"], a),
                 _ex(f"refund the {a} pounds please", ["refund"], a),
                 _ex(f"why was i charged {a} pounds", ["charge"], a)]
    return rows + [_ex("what is the weather today", [])] * 3
