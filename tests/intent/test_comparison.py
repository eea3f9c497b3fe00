"""A model against its parent (``headwise eval --parent``): McNemar's exact test against
hand-computed binomial sums, per-intent changes and the verdict on hand-made answers."""

from __future__ import annotations

from math import comb

import pytest

from headwise.intent.comparison import (
    McNemar,
    compare_models,
    format_comparison,
    mcnemar_exact,
    verdict,
)
from headwise.intent.prediction import Prediction


def test_mcnemar_exact_p_value_matches_the_hand_computed_binomial_sum():
    # b = 1 row only the parent gets right, c = 7 only the model: 8 discordant rows;
    # two-sided exact p = 2 * P(X <= 1), X ~ Bin(8, 1/2) = 2 * (1 + 8) / 256
    parent = [True] * 5 + [True] + [False] * 7 + [False] * 2
    model = [True] * 5 + [False] + [True] * 7 + [False] * 2
    t = mcnemar_exact(parent, model)
    assert (t.rows, t.parent_only, t.model_only) == (15, 1, 7)
    assert t.p_value == pytest.approx(18 / 256, rel=1e-12)
    # b = 2, c = 10: 2 * (C(12,0) + C(12,1) + C(12,2)) / 2^12 = 158 / 4096
    t = mcnemar_exact([True] * 2 + [False] * 10, [False] * 2 + [True] * 10)
    assert t.p_value == pytest.approx(2 * sum(comb(12, k) for k in range(3)) / 4096,
                                      rel=1e-12) == pytest.approx(158 / 4096)
    assert t.significant
    # no discordant row: nothing to tell apart; balanced: p = 1
    assert mcnemar_exact([True, False], [True, False]).p_value == 1.0
    assert mcnemar_exact([True, False], [False, True]).p_value == pytest.approx(1.0)
    with pytest.raises(ValueError, match="2 parent answers but 1"):
        mcnemar_exact([True, False], [True])


class _Fixed:
    """A classifier that answers a fixed intent for each text (None: out of scope)."""

    def __init__(self, labels, answers):
        self.labels, self.answers = labels, answers

    def predict(self, texts):
        out = []
        for t in texts:
            y = self.answers[t]
            out.append(Prediction(t, [] if y is None else [(y, 0.9)], [(y or self.labels[0], 0.9)],
                                  y is None))
        return out


def test_compare_models_counts_per_intent_changes_and_the_parents_rows():
    texts = ["a1", "a2", "b1", "b2", "n1", "n2", "o1"]
    gold = ["a", "a", "b", "b", "new", "new", "oos"]
    parent = _Fixed(["a", "b"], {"a1": "a", "a2": "a", "b1": "b", "b2": "a", "n1": "a",
                                 "n2": "b", "o1": None})
    model = _Fixed(["a", "b", "new"], {"a1": "a", "a2": "b", "b1": "b", "b2": "b", "n1": "new",
                                       "n2": "new", "o1": "a"})
    r = compare_models(model, parent, texts, gold)
    assert r["rows"] == 7 and r["new_intents"] == ["new"]
    assert r["parent_accuracy"] == pytest.approx(4 / 7)
    assert r["model_accuracy"] == pytest.approx(5 / 7)
    # model-only right: b2, n1, n2; parent-only right: a2, o1
    assert (r["test"]["model_only"], r["test"]["parent_only"]) == (3, 2)
    assert r["test"]["p_value"] == pytest.approx(1.0)
    assert r["parent_rows"]["rows"] == 5  # a, b and oos rows
    assert (r["parent_rows"]["test"]["model_only"], r["parent_rows"]["test"]["parent_only"]) \
        == (1, 2)
    by = {x["intent"]: x for x in r["per_intent"]}
    assert by["new"]["change"] == 1.0 and not by["new"]["parent_knows"]
    assert by["a"]["change"] == -0.5 and by["b"]["change"] == 0.5 and by["oos"]["change"] == -1
    assert [x["intent"] for x in r["per_intent"]][:2] == ["new", "oos"]  # largest first
    assert r["verdict"].startswith("SHIP FOR THE NEW INTENTS") and "(new)" in r["verdict"]
    text = format_comparison(r, parent="P")
    assert "against the parent P (7 rows)" in text and "verdict: SHIP FOR THE NEW" in text
    assert "on the 5 rows of the parent's intents" in text


def test_compound_rows_are_right_only_with_exactly_the_gold_intents():
    parent = _Multi({"x": ["a"], "y": ["a", "b"]})
    model = _Multi({"x": ["a", "b"], "y": ["b", "a"]})
    r = compare_models(model, parent, ["x", "y"], [["a"], ["a", "b"]], multi_label=True)
    assert (r["test"]["parent_only"], r["test"]["model_only"]) == (1, 0)


class _Multi:
    intents = ["a", "b"]

    def __init__(self, answers):
        self.answers = answers

    def predict(self, texts):
        return [Prediction(t, [(k, 0.9) for k in self.answers[t]], [], False) for t in texts]


def test_verdict_keeps_the_parent_when_its_intents_got_worse():
    worse = McNemar(100, 12, 1, 0.003)
    better = McNemar(200, 13, 40, 0.0002)
    assert verdict(better, worse, ["new"]).startswith("KEEP THE PARENT") and "--replay" in \
        verdict(better, worse, ["new"])
    assert verdict(better, McNemar(100, 3, 4, 1.0), []).startswith("SHIP: ")
    assert verdict(McNemar(100, 3, 4, 1.0), McNemar(100, 3, 4, 1.0), []).startswith(
        "NOT PROVEN")
    assert verdict(McNemar(100, 20, 4, 0.001), McNemar(100, 3, 4, 1.0), []).startswith(
        "KEEP THE PARENT: the model is significantly worse (")
