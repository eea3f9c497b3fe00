"""``benchmarks/oos_rules.py``: its ``reject`` rules are the library's choice, and the
budget on right answers withheld lets a threshold reject wrong answers, by hand."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

import oos_rules as R  # noqa: E402

from headwise.intent.decision.oos import choose_score_threshold  # noqa: E402

# five in-scope rows (scores 0.9 0.8 0.6 0.5 0.4; the 0.6 and 0.4 ones answered wrongly)
# and two out-of-scope rows (0.3, 0.55)
SCORE = np.array([0.9, 0.8, 0.6, 0.5, 0.4, 0.3, 0.55])
CORRECT = np.array([True, True, False, True, False, False, False])
OOS = np.array([False, False, False, False, False, True, True])


@pytest.mark.parametrize("confidence", [None, 0.95])
@pytest.mark.parametrize("budget", [0.0, 0.2, 0.5])
def test_the_reject_rules_are_the_librarys(budget, confidence):
    rng = np.random.default_rng(0)
    score = np.concatenate([rng.normal(1, 1, 120), rng.normal(-1, 1, 40)])
    correct = rng.random(160) < 0.7
    oos = np.arange(160) >= 120
    for s, ok, o in ((SCORE, CORRECT, OOS), (score, correct, oos)):
        mine = R.choose(s, ok, o, ("rejected", confidence), budget)
        lib = choose_score_threshold(s, ok, o, reject_budget=budget,
                                     reject_confidence=confidence)
        assert mine["threshold"] == lib.threshold
        assert mine["reject_rate"] == pytest.approx(lib.reject_rate)
        assert mine["oos_recall"] == pytest.approx(lib.oos_recall)
    free = choose_score_threshold(SCORE, CORRECT, OOS)
    assert R.choose(SCORE, CORRECT, OOS, None, budget)["threshold"] == free.threshold


def test_a_budget_on_right_answers_withheld_by_hand():
    # a budget of one in-scope row of five, on the rate alone: counting every rejection,
    # the best allowed threshold lies in (0.3, 0.4) (rejects the 0.3 out-of-scope row only);
    # counting right answers withheld, (0.55, 0.6) is allowed: it rejects the in-scope 0.4
    # (a wrong answer: free) and 0.5 (one right answer) and both out-of-scope rows:
    # in-scope accuracy 2/5, recall 1, the best balance, (0.4 + 1) / 2
    rejected = R.choose(SCORE, CORRECT, OOS, ("rejected", None), 0.2)
    assert 0.3 < rejected["threshold"] < 0.4 and rejected["oos_recall"] == 0.5
    withheld = R.choose(SCORE, CORRECT, OOS, ("withheld", None), 0.2)
    assert 0.55 < withheld["threshold"] < 0.6
    assert withheld["reject_rate"] == pytest.approx(0.4)
    assert withheld["withheld"] == pytest.approx(0.2)
    assert withheld["in_scope_accuracy"] == pytest.approx(0.4)
    assert withheld["oos_recall"] == 1.0


def test_score_test_by_hand():
    gold = np.array([0, 1, 2, 0, 1, -1, -1, -2])  # -2: an intent the model does not know
    score = np.array([0.9, 0.8, 0.6, 0.5, 0.4, 0.3, 0.55, 0.1])
    correct = np.array([True, True, False, True, False, False, False, False])
    family = ["a", "a", "b", "b", "c", "oos_near", "oos", "x"]
    r = R.score_test(score, 0.45, correct, gold, family)
    # kept: 0.9 0.8 0.6 0.5 (in), 0.55 (oos); rejected: 0.4 (in, wrong), 0.3 (near miss)
    assert r["reject_rate"] == pytest.approx(1 / 5) and r["withheld"] == 0.0
    assert r["accuracy"] == r["accuracy_with_threshold"] == pytest.approx(3 / 5)
    assert r["oos_recall"] == 0.5
    assert r["near_miss_recall"] == 1.0 and r["off_topic_recall"] == 0.0
