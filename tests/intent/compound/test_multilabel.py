"""Multi-label thresholds, decisions and metrics, checked by hand and against scikit-learn."""

from __future__ import annotations

import json

import numpy as np
import pytest
from sklearn.metrics import f1_score, precision_recall_fscore_support

from headwise.intent.compound.thresholds import (
    DEFAULT_GRID,
    Thresholds,
    decide,
    multilabel_metrics,
    span_f1,
    tune_thresholds,
)
from headwise.text.dataset import SlotSpan

PROBS = np.array([[0.9, 0.2, 0.6],
                  [0.4, 0.8, 0.1],
                  [0.7, 0.3, 0.45],
                  [0.1, 0.55, 0.35]])
TARGETS = np.array([[1, 0, 1],
                    [0, 1, 0],
                    [1, 0, 0],
                    [0, 1, 1]])
# positives: .9 .6 .8 .7 .55 .35 (6); negatives: .2 .4 .1 .3 .45 .1
# micro-F1 = 2tp / (2tp + fp + fn) at threshold t (prob >= t):
#   t <= .10: tp 6 fp 6 -> 12/18    (.10, .20]: fp 4 -> 12/16    (.20, .30]: fp 3 -> 12/15
#   (.30, .35]: fp 2 -> 12/14       (.35, .40]: tp 5 fp 2 -> 10/13
#   (.40, .45]: tp 5 fp 1 -> 10/12  (.45, .55]: tp 5 fp 0 -> 10/11 (best)
#   (.55, .60]: tp 4 -> 8/10 ...
# so every grid value in .46 ... .55 ties at 10/11, and 0.5 is the one nearest 0.5


def test_global_threshold_by_hand():
    assert tune_thresholds(PROBS, TARGETS) == Thresholds(0.5)
    # a grid without 0.5: .46 and .54 tie at 10/11, and .54 is nearer 0.5
    assert tune_thresholds(PROBS, TARGETS, grid=[0.3, 0.46, 0.54, 0.7]).threshold == 0.54
    # equally near 0.5 and tied: the higher one
    assert tune_thresholds(PROBS, TARGETS, grid=[0.47, 0.53]).threshold == 0.53
    # the only best one wins however far from 0.5
    assert tune_thresholds(PROBS, TARGETS, grid=[0.05, 0.33, 0.9]).threshold == 0.33


def test_per_intent_thresholds_by_hand():
    # intent 0: pos .9 .7, neg .4 .1 -> F1 1 on (.40, .70]: nearest the global 0.5 is 0.5
    # intent 1: pos .8 .55, neg .2 .3 -> F1 1 on (.30, .55]: 0.5
    # intent 2: pos .6 .35, neg .1 .45 -> (.10, .35]: tp 2 fp 1 -> 4/5 (best);
    #   (.35, .45]: 2/4; (.45, .60]: 2/3 -> the best value nearest 0.5 is 0.35
    th = tune_thresholds(PROBS, TARGETS, per_intent=True, min_support=2)
    assert th == Thresholds(0.5, [0.5, 0.5, 0.35])
    # each intent has 2 positives: with min_support=3 all keep the global threshold
    assert tune_thresholds(PROBS, TARGETS, per_intent=True) == Thresholds(0.5, [0.5] * 3)


def test_tuned_threshold_maximises_sklearn_micro_f1():
    rng = np.random.default_rng(0)
    targets = rng.random((60, 5)) < 0.3
    probs = np.clip(targets * 0.35 + rng.random((60, 5)) * 0.65, 0, 1)
    th = tune_thresholds(probs, targets)
    scores = [f1_score(targets, probs >= t, average="micro", zero_division=0)
              for t in DEFAULT_GRID]
    assert f1_score(targets, probs >= th.threshold, average="micro") == pytest.approx(
        max(scores))
    per = tune_thresholds(probs, targets, per_intent=True)
    for k in range(5):
        best = max(f1_score(targets[:, k], probs[:, k] >= t, zero_division=0)
                   for t in DEFAULT_GRID)
        assert f1_score(targets[:, k], probs[:, k] >= per.per_intent[k]) == pytest.approx(best)


def test_tune_rejects_bad_input():
    with pytest.raises(ValueError, match="both be"):
        tune_thresholds(PROBS, TARGETS[:, :2])
    with pytest.raises(ValueError, match="both be"):
        tune_thresholds(PROBS[0], TARGETS[0])
    with pytest.raises(ValueError, match="no examples"):
        tune_thresholds(np.zeros((0, 3)), np.zeros((0, 3)))
    with pytest.raises(ValueError, match=r"grid must hold thresholds in \[0, 1\]"):
        tune_thresholds(PROBS, TARGETS, grid=[0.5, 1.5])
    with pytest.raises(ValueError, match="grid"):
        tune_thresholds(PROBS, TARGETS, grid=[])


def test_decide():
    th = Thresholds(0.5, [0.5, 0.5, 0.35])
    expected = np.array([[1, 0, 1], [0, 1, 0], [1, 0, 1], [0, 1, 1]], dtype=bool)
    assert np.array_equal(decide(PROBS, th), expected)  # .35 >= .35 counts
    assert np.array_equal(decide(PROBS, 0.85), [[1, 0, 0], [0, 0, 0], [0, 0, 0], [0, 0, 0]])
    # at_least_one keeps the most probable intent of a row with none
    assert np.array_equal(decide(PROBS, 0.85, at_least_one=True),
                          [[1, 0, 0], [0, 1, 0], [1, 0, 0], [0, 1, 0]])
    assert np.array_equal(decide(np.array([0.2, 0.6, 0.1]), 0.5), [False, True, False])
    assert np.array_equal(decide(np.array([0.2, 0.3, 0.3]), 0.5, at_least_one=True),
                          [False, True, False])
    with pytest.raises(ValueError, match="2 per-intent thresholds for 3 intents"):
        decide(PROBS, Thresholds(0.5, [0.5, 0.5]))
    with pytest.raises(ValueError, match="probs must be"):
        decide(np.zeros((1, 2, 3)), 0.5)


def test_thresholds_dict_round_trip():
    for th in (Thresholds(0.5), Thresholds(0.45, [0.5, 0.2, 0.35])):
        data = json.loads(json.dumps(th.to_dict()))
        assert Thresholds.from_dict(data) == th
    assert Thresholds(np.float64(0.5)).to_dict() == {
        "threshold": 0.5, "per_intent": None, "additional": None, "metric": "micro_f1"}
    pair = Thresholds(0.4, None, 0.46, "exact_match")
    assert Thresholds.from_dict(json.loads(json.dumps(pair.to_dict()))) == pair
    # a model saved before the additional threshold and the metric were recorded
    assert Thresholds.from_dict({"threshold": 0.3, "per_intent": None}) == Thresholds(0.3)
    for bad in ({}, {"threshold": 1.5}, {"threshold": "0.5"},
                {"threshold": 0.5, "per_intent": [0.2, -0.1]}, [0.5],
                {"threshold": 0.5, "additional": 2.0},
                {"threshold": 0.5, "per_intent": [0.5] * 3, "additional": 0.4},
                {"threshold": 0.5, "metric": "accuracy"}):
        with pytest.raises(ValueError):
            Thresholds.from_dict(bad)


# exact match: the most probable intent against `threshold`, the others against `additional`
EM_PROBS = np.array([[0.9, 0.45, 0.1],    # one request; a second intent at 0.45
                     [0.8, 0.6, 0.1],     # two requests
                     [0.3, 0.2, 0.1],     # out of scope
                     [0.4, 0.1, 0.05]])   # one request, unsure
EM_GOLD = np.array([[1, 0, 0], [1, 1, 0], [0, 0, 0], [1, 0, 0]], dtype=bool)
# one threshold t: row 3 needs t <= .40, row 0 needs t > .45: at most 3 of 4 right.
# two: t in (.30, .40] and additional in (.45, .60]: all 4; the pair nearest each other is
# (.40, .46)


def test_exact_match_thresholds_by_hand():
    th = tune_thresholds(EM_PROBS, EM_GOLD, metric="exact_match")
    assert th == Thresholds(0.4, None, 0.46, "exact_match")
    assert np.array_equal(decide(EM_PROBS, th), EM_GOLD)
    # the one-threshold rule scores 3 of 4 at best
    assert max((decide(EM_PROBS, t) == EM_GOLD).all(1).mean() for t in DEFAULT_GRID) == 0.75
    # where one threshold is enough, the pair is one threshold (additional None)
    one = tune_thresholds(EM_PROBS[:3], EM_GOLD[:3], metric="exact_match")
    assert one.additional is None and one.metric == "exact_match"
    assert np.array_equal(decide(EM_PROBS[:3], one), EM_GOLD[:3])


def test_decide_with_an_additional_threshold_by_hand():
    th = Thresholds(0.4, None, 0.7, "exact_match")
    probs = np.array([[0.9, 0.65, 0.75], [0.35, 0.8, 0.1], [0.5, 0.5, 0.2], [0.3, 0.2, 0.1]])
    # row 1: the most probable (0.8) passes 0.4, the others are under 0.7; row 2: equal
    # probabilities, the first is the most probable, the second is under 0.7
    assert np.array_equal(decide(probs, th), [[1, 0, 1], [0, 1, 0], [1, 0, 0], [0, 0, 0]])
    assert np.array_equal(decide(probs, th, at_least_one=True)[3], [1, 0, 0])
    # a lower bar for the others than for the first
    low = Thresholds(0.6, None, 0.2, "exact_match")
    assert np.array_equal(decide(probs, low), [[1, 1, 1], [1, 1, 0], [0, 0, 0], [0, 0, 0]])
    assert np.array_equal(decide(probs[0], th), [True, False, True])


def test_exact_match_pair_is_the_best_of_every_pair():
    """Against a plain loop over every pair of a coarse grid, scoring sets row by row."""
    rng = np.random.default_rng(1)
    gold = rng.random((80, 4)) < 0.3
    gold[:10] = False  # out of scope rows
    probs = np.clip(gold * 0.4 + rng.random((80, 4)) * 0.6, 0, 1)
    grid = np.round(np.arange(1, 20) / 20, 2)

    def score(t: float, a: float) -> float:
        right = 0
        for p, g in zip(probs, gold, strict=True):
            top = int(np.argmax(p))
            chosen = set() if p[top] < t else {top} | {j for j in range(4) if j != top
                                                       and p[j] >= a}
            right += chosen == set(np.flatnonzero(g))
        return right / len(gold)

    best = max(score(t, a) for t in grid for a in grid)
    th = tune_thresholds(probs, gold, grid=grid, metric="exact_match")
    extra = th.threshold if th.additional is None else th.additional
    assert score(th.threshold, extra) == best
    assert (decide(probs, th) == gold).all(1).mean() == pytest.approx(best)


def test_thresholds_describe_themselves():
    assert Thresholds(0.45).describe() == "threshold 0.450"
    assert Thresholds(0.45, [0.5, 0.4]).describe() == "threshold 0.450 (per intent)"
    assert Thresholds(0.4, None, 0.46, "exact_match").describe() == (
        "thresholds 0.400 for the most probable intent, 0.460 for the others (chosen for "
        "exact match)")
    assert Thresholds(0.4, metric="exact_match").describe() == \
        "threshold 0.400 (chosen for exact match)"


def test_exact_match_refusals():
    with pytest.raises(ValueError, match="use one of the two"):
        tune_thresholds(EM_PROBS, EM_GOLD, per_intent=True, metric="exact_match")
    with pytest.raises(ValueError, match="metric must be one of"):
        tune_thresholds(EM_PROBS, EM_GOLD, metric="accuracy")
    with pytest.raises(ValueError, match="not with per-intent thresholds"):
        Thresholds(0.5, [0.5, 0.5, 0.5], 0.4)
    with pytest.raises(ValueError, match="tuned for one of"):
        Thresholds(0.5, metric="f1")


NAMES = ["a", "b", "c", "never", "only_pred"]
PRED = np.array([[1, 0, 1, 0, 0],
                 [0, 1, 0, 0, 0],
                 [1, 0, 1, 0, 0],
                 [0, 1, 1, 0, 1],
                 [0, 0, 0, 0, 0],
                 [0, 0, 0, 0, 0]], dtype=bool)
GOLD = np.array([[1, 0, 1, 0, 0],
                 [0, 1, 0, 0, 0],
                 [1, 0, 0, 0, 0],
                 [0, 1, 1, 0, 0],
                 [0, 0, 0, 0, 0],   # out of scope, rightly nothing predicted
                 [1, 0, 0, 0, 0]])  # an intent missed: nothing predicted


def test_multilabel_metrics_by_hand():
    m = multilabel_metrics(PRED, GOLD, NAMES)
    # a: tp 2 fp 0 fn 1 -> P 1, R 2/3, F .8;  b: tp 2 -> 1;  c: tp 2 fp 1 -> P 2/3, R 1, F .8
    # never: no gold, no prediction;  only_pred: fp 1 -> 0
    assert m["per_intent"]["a"] == pytest.approx(
        {"precision": 1.0, "recall": 2 / 3, "f1": 0.8, "support": 3})
    assert m["per_intent"]["b"] == {"precision": 1.0, "recall": 1.0, "f1": 1.0, "support": 2}
    assert m["per_intent"]["c"] == pytest.approx(
        {"precision": 2 / 3, "recall": 1.0, "f1": 0.8, "support": 2})
    assert m["per_intent"]["never"] == {"precision": 0.0, "recall": 0.0, "f1": 0.0,
                                        "support": 0}
    assert m["per_intent"]["only_pred"]["f1"] == 0.0
    # micro: tp 6, fp 2, fn 1 -> P 6/8, R 6/7, F 12/15
    assert m["micro_precision"] == pytest.approx(0.75)
    assert m["micro_recall"] == pytest.approx(6 / 7)
    assert m["micro_f1"] == pytest.approx(0.8)
    # macro over a, b, c, only_pred (never is neither gold nor predicted): (.8+1+.8+0)/4
    assert m["macro_f1"] == pytest.approx(0.65) and m["macro_intents"] == 4
    # samples: 1, 1, 2/3, 2*2/(3+2), 1 (both empty), 0 -> 67/90
    assert m["samples_f1"] == pytest.approx(67 / 90)
    assert m["exact_match"] == pytest.approx(0.5) and m["examples"] == 6


def test_multilabel_metrics_agree_with_sklearn():
    rng = np.random.default_rng(1)
    gold = rng.random((40, 6)) < 0.3
    pred = rng.random((40, 6)) < 0.3
    gold[:, 5] = pred[:, 5] = False  # one intent absent from both
    names = [f"i{k}" for k in range(6)]
    m = multilabel_metrics(pred, gold, names)
    assert m["micro_f1"] == pytest.approx(f1_score(gold, pred, average="micro"))
    assert m["macro_f1"] == pytest.approx(f1_score(gold[:, :5], pred[:, :5], average="macro"))
    p, r, f, s = precision_recall_fscore_support(gold, pred, zero_division=0)
    for k, name in enumerate(names):
        assert m["per_intent"][name] == pytest.approx(
            {"precision": p[k], "recall": r[k], "f1": f[k], "support": s[k]})
    by_row = [1.0 if not (g.any() or q.any()) else 2 * (g & q).sum() / (g.sum() + q.sum())
              for g, q in zip(gold, pred, strict=True)]
    assert m["samples_f1"] == pytest.approx(np.mean(by_row))
    assert m["exact_match"] == pytest.approx(np.mean((gold == pred).all(axis=1)))


def test_multilabel_metrics_edge_cases():
    empty = multilabel_metrics(np.zeros((2, 2), bool), np.zeros((2, 2), int), ["x", "y"])
    assert empty["micro_f1"] == 0.0 and empty["macro_f1"] == 0.0
    assert empty["macro_intents"] == 0
    assert empty["samples_f1"] == 1.0 and empty["exact_match"] == 1.0
    unnamed = multilabel_metrics(PRED, GOLD)
    assert list(unnamed["per_intent"]) == ["0", "1", "2", "3", "4"]
    assert unnamed["micro_f1"] == pytest.approx(0.8)
    with pytest.raises(ValueError, match="2 names for 5 intents"):
        multilabel_metrics(PRED, GOLD, ["a", "b"])
    with pytest.raises(ValueError, match="both be"):
        multilabel_metrics(PRED, GOLD[:3], NAMES)


def test_span_f1_by_hand():
    def s(name: str, start: int, end: int, value: object = None) -> SlotSpan:
        return SlotSpan(name, start, end, "x" * (end - start), value)

    gold = [[s("amount", 5, 11, 1200), s("date", 12, 15)], [s("time", 0, 4)], [],
            [s("date", 0, 3)]]
    pred = [[s("amount", 5, 11), s("date", 12, 14)], [s("time", 0, 4), s("amount", 6, 8)],
            [], []]
    m = span_f1(pred, gold)
    # correct: amount of 1 (value not compared) and time of 2; 4 predicted, 4 gold
    assert (m["correct"], m["predicted"], m["gold"]) == (2, 4, 4)
    assert (m["precision"], m["recall"], m["f1"]) == (0.5, 0.5, 0.5)
    assert m["per_slot"] == {
        "amount": {"precision": 0.5, "recall": 1.0, "f1": pytest.approx(2 / 3), "support": 1},
        "date": {"precision": 0.0, "recall": 0.0, "f1": 0.0, "support": 2},
        "time": {"precision": 1.0, "recall": 1.0, "f1": 1.0, "support": 1},
    }
    # a repeated prediction matches one gold span only
    twice = span_f1([[s("date", 0, 3), s("date", 0, 3)]], [[s("date", 0, 3)]])
    assert (twice["precision"], twice["recall"]) == (0.5, 1.0)
    nothing = span_f1([[], []], [[], []])
    assert nothing["f1"] == 0.0 and nothing["per_slot"] == {}
    with pytest.raises(ValueError, match="1 predicted examples for 2 gold"):
        span_f1([[]], [[], []])
