"""Out-of-scope threshold selection on hand-computed cases."""

from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np
import pytest

from headwise.intent.decision.oos import (
    allowed_rejections,
    choose_score_threshold,
    choose_threshold,
    reject_upper_bound,
    score_thresholds,
    threshold_curve,
)
from headwise.intent.posthoc.recalibration import calibrate_on_validation
from headwise.intent.training.data import validation_split
from headwise.text.labels import is_oos_label

# five in-scope rows (three right) and two out-of-scope rows
CONF = np.array([0.9, 0.8, 0.6, 0.5, 0.4, 0.3, 0.55])
CORRECT = np.array([True, True, False, True, False, False, False])
OOS = np.array([False, False, False, False, False, True, True])


def test_curve_by_hand():
    c = threshold_curve(CONF, CORRECT, OOS, thresholds=np.array([0.0, 0.45, 0.7]))
    # t=0: nothing rejected: 3/5 right, no oos caught
    # t=0.45: rejects 0.4 (in, wrong) and 0.3 (oos): in-scope 3/5, oos 1/2, reject 1/5
    # t=0.7: keeps 0.9, 0.8 (both right): in-scope 2/5, oos 2/2, reject 3/5
    np.testing.assert_allclose(c["in_scope_accuracy"], [0.6, 0.6, 0.4])
    np.testing.assert_allclose(c["oos_recall"], [0.0, 0.5, 1.0])
    np.testing.assert_allclose(c["reject_rate"], [0.0, 0.2, 0.6])


def test_balanced_choice_by_hand():
    ch = choose_threshold(CONF, CORRECT, OOS)
    # score (in-scope accuracy + oos recall) / 2 over the midpoint thresholds:
    #   (0.4, 0.5): 0.6 and 1/2 -> 0.55;  (0.5, 0.55): 0.4 and 1/2 -> 0.45
    #   (0.55, 0.6): 0.4 and 2/2 -> 0.70; (0.6, 0.8): 0.4 and 2/2 -> 0.70 (tie: lower wins)
    assert ch.method == "balanced"
    assert 0.55 < ch.threshold < 0.6  # the lowest of the tied best thresholds
    assert ch.in_scope_accuracy == pytest.approx(0.4)
    assert ch.oos_recall == pytest.approx(1.0)
    assert ch.in_scope_accuracy_no_reject == pytest.approx(0.6)
    assert ch.n_in_scope == 5 and ch.n_oos == 2


def test_balanced_choice_within_an_in_scope_reject_budget_by_hand():
    # in-scope confidences 0.9 0.8 0.6 0.5 0.4 (reject rates by threshold: below 0.4: 0,
    # (0.4, 0.5): 1/5, (0.5, 0.6): 2/5, (0.6, 0.8): 3/5); the unconstrained best rejects 3/5
    ch = choose_threshold(CONF, CORRECT, OOS, reject_budget=0.2,
                          reject_confidence=None)
    # within 1/5: below 0.3 scores (0.6 + 0) / 2 = 0.30, (0.3, 0.4): (0.6 + 1/2) / 2 = 0.55,
    # (0.4, 0.5): (0.6 + 1/2) / 2 = 0.55 too (tie: the lower threshold wins)
    assert ch.method == "balanced" and ch.reject_budget == 0.2
    assert 0.3 < ch.threshold < 0.4 and ch.reject_rate == 0.0
    assert ch.oos_recall == pytest.approx(0.5) and ch.in_scope_accuracy == pytest.approx(0.6)
    # the budget decided: the choice records the balanced optimum it ruled out (the lowest
    # of the tied best above, rejecting 2/5), and
    # the line train and calibrate print says so
    free = ch.unbudgeted
    assert 0.55 < free["threshold"] < 0.6 and free["reject_rate"] == pytest.approx(0.4)
    assert free["oos_recall"] == pytest.approx(1.0)
    assert free["in_scope_accuracy"] == pytest.approx(0.4)
    from headwise.commands._common import format_threshold

    assert ("the reject budget decided: without it the best balance on the validation rows "
            "rejects 40.0% of in-scope rows for out-of-scope recall 1.0000") \
        in format_threshold(ch)
    # a budget of 0 still allows the threshold that rejects no in-scope row
    zero = choose_threshold(CONF, CORRECT, OOS, reject_budget=0.0, reject_confidence=None)
    assert zero.reject_rate == 0.0 and zero.oos_recall == pytest.approx(0.5)
    # a budget as large as the unconstrained choice's reject rate changes nothing
    free = choose_threshold(CONF, CORRECT, OOS)
    assert choose_threshold(CONF, CORRECT, OOS, reject_budget=0.6,
                            reject_confidence=None).threshold == free.threshold
    assert free.reject_budget is None and free.unbudgeted is None
    assert "budget decided" not in format_threshold(free)
    # the same rule on any score
    sc = choose_score_threshold(CONF, CORRECT, OOS, reject_budget=0.2, name="energy",
                                reject_confidence=None)
    assert sc.reject_rate == 0.0 and sc.oos_recall == pytest.approx(0.5)
    with pytest.raises(ValueError, match="reject_budget"):
        choose_threshold(CONF, CORRECT, OOS, reject_budget=1.0)


def _binomial_cdf(k: int, n: int, p: float) -> float:
    """P(Binomial(n, p) <= k), summed exactly in float64."""
    return math.fsum(math.comb(n, i) * p ** i * (1 - p) ** (n - i) for i in range(k + 1))


@pytest.mark.parametrize("n", [1, 7, 50, 486])
def test_reject_upper_bound_is_the_clopper_pearson_bound(n):
    # the bound p solves P(Binomial(n, p) <= k) = 1 - confidence (summed by hand here)
    ks = np.array(sorted({0, min(1, n - 1), n // 3, n - 1}))
    for confidence in (0.9, 0.95):
        bound = reject_upper_bound(ks, n, confidence)
        for k, b in zip(ks, bound, strict=True):
            assert _binomial_cdf(int(k), n, float(b)) == pytest.approx(1 - confidence, abs=1e-9)
            assert k / n <= b < 1.0
    assert reject_upper_bound(n, n).item() == 1.0  # everything rejected: no bound below 1
    assert reject_upper_bound(0, 1, 0.95).item() == pytest.approx(0.95)  # 1 - 0.05 ** (1/1)
    assert np.all(np.diff(reject_upper_bound(np.arange(n + 1), n)) > 0)
    for bad in ({"rejected": -1, "n": n}, {"rejected": n + 1, "n": n},
                {"rejected": 0, "n": 0}, {"rejected": 0, "n": n, "confidence": 1.0}):
        with pytest.raises(ValueError):
            reject_upper_bound(**bad)


def _interleaved(n_in=200, n_oos=30):
    """In-scope scores 1..n_in (all right), out-of-scope ones between the lowest in-scope
    ones: each threshold step up catches an out-of-scope row (+1/30 recall) for one in-scope
    row (-1/200 accuracy), so the balanced choice rejects as much as its budget allows."""
    score = np.concatenate([np.arange(1, n_in + 1), np.arange(n_oos) + 1.5]).astype(float)
    oos = np.arange(n_in + n_oos) >= n_in
    return score, np.ones(n_in + n_oos, bool), oos


@pytest.mark.parametrize("budget,confidence", [(0.05, 0.95), (0.1, 0.95), (0.05, 0.8)])
def test_reject_budget_kept_with_confidence(budget, confidence):
    score, correct, oos = _interleaved()
    n = 200
    # independent reference: the most in-scope rejections k whose bound is within the
    # budget, i.e. P(Binomial(n, budget) <= k) <= 1 - confidence
    k_max = max(k for k in range(n) if _binomial_cdf(k, n, budget) <= 1 - confidence)
    for choose in (choose_score_threshold, choose_threshold):
        s = score if choose is choose_score_threshold else score / 1000
        ch = choose(s, correct, oos, reject_budget=budget, reject_confidence=confidence)
        assert round(ch.reject_rate * n) == k_max < budget * n
        assert ch.reject_confidence == confidence and ch.reject_budget == budget
        assert ch.reject_bound == pytest.approx(reject_upper_bound(k_max, n, confidence))
        assert ch.reject_bound <= budget
        plain = choose(s, correct, oos, reject_budget=budget, reject_confidence=None)
        assert round(plain.reject_rate * n) == round(budget * n)  # the rate alone
        assert plain.reject_confidence is None and plain.reject_bound is None
    # the default is 95 %
    assert choose_score_threshold(score, correct, oos, reject_budget=budget).reject_confidence \
        == 0.95
    # no budget: no bound to keep, the confidence is not recorded
    free = choose_score_threshold(score, correct, oos, reject_confidence=confidence)
    assert free.reject_bound is None and free.reject_confidence is None


def test_allowed_rejections_by_the_binomial():
    # independent reference: the most rejections k of n with P(Binomial(n, 5 %) <= k) <=
    # 5 %, i.e. whose 95 % upper bound is within 5 % (0 when none is: rejecting none is
    # always allowed)
    for n in (5, 59, 60, 108, 200, 486):
        ks = [k for k in range(n) if _binomial_cdf(k, n, 0.05) <= 0.05]
        assert allowed_rejections(n, 0.05) == (max(ks) if ks else 0)
    # the numbers: the quick demo's 108 in-scope validation rows allow one, the
    # demo's 486 sixteen; on the rate alone, floor(5 % of n)
    assert (allowed_rejections(108, 0.05), allowed_rejections(486, 0.05)) == (1, 16)
    assert allowed_rejections(108, 0.05, None) == 5 and allowed_rejections(59, 0.05) == 0
    assert allowed_rejections(108, 0.0) == 0
    for bad in ({"n": 0, "budget": 0.05}, {"n": 10, "budget": 1.0},
                {"n": 10, "budget": 0.05, "confidence": 1.5}):
        with pytest.raises(ValueError):
            allowed_rejections(**bad)


def test_what_the_budget_allows_is_said_when_it_decides():
    from headwise.commands._common import format_threshold

    # 108 in-scope rows (all right) interleaved with 30 out-of-scope ones: the balanced
    # choice rejects all the budget allows, and the line train prints says how little that is
    score, correct, oos = _interleaved(n_in=108, n_oos=30)
    ch = choose_score_threshold(score, correct, oos, reject_budget=0.05, name="energy")
    assert round(ch.reject_rate * 108) == allowed_rejections(108, 0.05) == 1
    assert ch.unbudgeted is not None
    line = format_threshold(ch)
    assert ("the reject budget decided (kept with 95% confidence, it lets a threshold reject "
            "at most 1 of the 108 in-scope validation rows, 0.9%; more in-scope validation "
            "rows let it reject closer to 5%): without it") in line
    # on the rate alone the choice rejects floor(5 % of 108) = 5, and no confidence is named
    plain = choose_score_threshold(score, correct, oos, reject_budget=0.05, name="energy",
                                   reject_confidence=None)
    assert round(plain.reject_rate * 108) == allowed_rejections(108, 0.05, None) == 5
    assert "confidence" not in format_threshold(plain)


def test_reject_confidence_with_few_rows_keeps_only_thresholds_rejecting_nothing():
    # 5 in-scope rows: even 0 of 5 rejected bounds the rate only by 45 % at 95 %, so a 20 %
    # budget allows only the thresholds that reject no in-scope row
    ch = choose_threshold(CONF, CORRECT, OOS, reject_budget=0.2)
    assert ch.reject_rate == 0.0 and 0.3 < ch.threshold < 0.4
    assert ch.oos_recall == pytest.approx(0.5)
    assert ch.reject_bound == pytest.approx(1 - 0.05 ** (1 / 5))
    for bad in (0.0, 1.0, -0.5, "high"):
        with pytest.raises(ValueError, match="reject_confidence"):
            choose_threshold(CONF, CORRECT, OOS, reject_budget=0.2, reject_confidence=bad)


def test_max_reject_without_oos():
    conf = np.linspace(0.01, 1.0, 100)
    ch = choose_threshold(conf, np.ones(100, bool), np.zeros(100, bool), max_reject=0.05)
    assert ch.method == "max_reject" and ch.oos_recall is None
    assert ch.reject_rate == pytest.approx(0.05)
    assert (conf < ch.threshold).sum() == 5


def test_errors_and_labels():
    with pytest.raises(ValueError, match="in-scope"):
        choose_threshold(np.array([0.5]), np.array([False]), np.array([True]))
    with pytest.raises(ValueError, match="max_reject"):
        choose_threshold(CONF, CORRECT, OOS, max_reject=1.5)
    assert is_oos_label("OOS") and is_oos_label(" out_of_scope ") and not is_oos_label("card")
    assert not is_oos_label(None)


def test_no_usable_validation_rows_reject_nothing():
    # validation rows whose intents the classifier does not know (or none at all): the
    # threshold is 0, so every query is answered (it used to be 1.0: every query rejected)
    clf = SimpleNamespace(labels=["card", "loan"], temperature=1.0, threshold=0.0)
    for texts, labels in (([], []), (["hello"], ["greeting"])):
        choice, metrics = calibrate_on_validation(clf, texts, labels, max_reject=0.02)
        assert choice.threshold == 0.0 and choice.method == "none" and metrics == {}
        assert choice.n_in_scope == 0 and choice.reject_rate == 0.0
    assert clf.temperature == 1.0 and clf.threshold == 0.0
    with pytest.raises(ValueError, match="intent the classifier knows"):  # oos rows only
        calibrate_on_validation(clf, ["what's the weather"], ["oos"], max_reject=0.02)


def test_validation_split_of_zero_holds_nothing_out():
    texts, labels = ["a", "b", "c", "d"], ["x", "x", "y", "y"]
    assert validation_split(texts, labels, 0.0, seed=3) == (texts, [], labels, [])
    tr, va, _, vl = validation_split(texts, labels, 0.5, seed=3)
    assert len(tr) == len(va) == 2 and sorted(vl) == ["x", "y"]  # stratified


@pytest.mark.parametrize("fraction", [-0.1, 1.0])
def test_recipe_valid_fraction_bounds(fraction):
    from headwise.intent import IntentRecipe

    assert IntentRecipe.from_dict({"valid_fraction": 0.0}).valid_fraction == 0.0
    with pytest.raises(ValueError, match=r"valid_fraction must be in \[0, 1\)"):
        IntentRecipe.from_dict({"valid_fraction": fraction})


def test_score_thresholds_by_hand():
    # below every value by the spread (6), the midpoints, above every value by the spread
    np.testing.assert_allclose(score_thresholds(np.array([3.0, 1.0, 7.0, 3.0])),
                               [-5.0, 2.0, 5.0, 13.0])
    # one value: a margin of 1 on either side
    np.testing.assert_allclose(score_thresholds(np.array([0.25, 0.25])), [-0.75, 1.25])
    with pytest.raises(ValueError, match="non-finite"):
        score_thresholds(np.array([0.0, np.inf]))
    with pytest.raises(ValueError, match="non-empty"):
        score_thresholds(np.zeros((2, 2)))


def test_score_threshold_by_hand_on_an_arbitrary_scale():
    # an energy-like score: any increasing transform of CONF rejects the same rows
    score = 40.0 * CONF - 17.0
    ch = choose_score_threshold(score, CORRECT, OOS, name="energy")
    # the same best balanced cut as test_balanced_choice_by_hand: between 0.55 and 0.6
    assert ch.method == "balanced" and ch.score == "energy"
    assert 40 * 0.55 - 17 < ch.threshold < 40 * 0.6 - 17
    assert ch.in_scope_accuracy == pytest.approx(0.4) and ch.oos_recall == pytest.approx(1.0)
    assert ch.in_scope_accuracy_no_reject == pytest.approx(0.6)
    prob = choose_threshold(CONF, CORRECT, OOS)
    np.testing.assert_array_equal(score < ch.threshold, CONF < prob.threshold)
    assert prob.score == "max_prob"


def test_score_threshold_without_oos_and_with_nothing_worth_rejecting():
    score = -np.arange(100.0)  # e.g. minus a distance
    ch = choose_score_threshold(score, np.ones(100, bool), np.zeros(100, bool),
                                max_reject=0.03)
    assert ch.method == "max_reject" and (score < ch.threshold).sum() == 3
    # every in-scope row right and every oos row scoring above them: rejecting nothing is
    # best, and the threshold lies below every value
    s = np.array([1.0, 2.0, 3.0, 4.0])
    ch = choose_score_threshold(s, np.ones(4, bool), np.array([False, False, False, True]))
    assert ch.threshold < 1.0 and ch.reject_rate == 0.0 and ch.oos_recall == 0.0
    with pytest.raises(ValueError, match="in-scope"):
        choose_score_threshold(s, np.ones(4, bool), np.ones(4, bool))
    with pytest.raises(ValueError, match="max_reject"):
        choose_score_threshold(s, np.ones(4, bool), np.zeros(4, bool), max_reject=-0.1)


def test_recipe_checks_and_keeps_its_reject_confidence():
    from headwise.intent.training.recipe import IntentRecipe

    assert IntentRecipe().decision.reject_confidence == 0.95
    recipe = IntentRecipe.from_dict({"decision": {"reject_confidence": None}})
    assert recipe.to_dict()["decision"]["reject_confidence"] is None
    for bad in (0.0, 1.0, 1.5):
        with pytest.raises(ValueError, match="reject_confidence"):
            IntentRecipe.from_dict({"decision": {"reject_confidence": bad}})
