"""Out-of-scope threshold selection on hand-computed cases."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from headwise.intent.decision.oos import (
    choose_score_threshold,
    choose_threshold,
    is_oos_label,
    score_thresholds,
    threshold_curve,
)
from headwise.intent.decision.recalibration import calibrate_on_validation
from headwise.intent.training.data import validation_split

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
    ch = choose_threshold(CONF, CORRECT, OOS, reject_budget=0.2)
    # within 1/5: below 0.3 scores (0.6 + 0) / 2 = 0.30, (0.3, 0.4): (0.6 + 1/2) / 2 = 0.55,
    # (0.4, 0.5): (0.6 + 1/2) / 2 = 0.55 too (tie: the lower threshold wins)
    assert ch.method == "balanced" and ch.reject_budget == 0.2
    assert 0.3 < ch.threshold < 0.4 and ch.reject_rate == 0.0
    assert ch.oos_recall == pytest.approx(0.5) and ch.in_scope_accuracy == pytest.approx(0.6)
    # a budget of 0 still allows the threshold that rejects no in-scope row
    zero = choose_threshold(CONF, CORRECT, OOS, reject_budget=0.0)
    assert zero.reject_rate == 0.0 and zero.oos_recall == pytest.approx(0.5)
    # a budget as large as the unconstrained choice's reject rate changes nothing
    free = choose_threshold(CONF, CORRECT, OOS)
    assert choose_threshold(CONF, CORRECT, OOS, reject_budget=0.6).threshold == free.threshold
    assert free.reject_budget is None
    # the same rule on any score
    sc = choose_score_threshold(CONF, CORRECT, OOS, reject_budget=0.2, name="energy")
    assert sc.reject_rate == 0.0 and sc.oos_recall == pytest.approx(0.5)
    with pytest.raises(ValueError, match="reject_budget"):
        choose_threshold(CONF, CORRECT, OOS, reject_budget=1.0)


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

    assert IntentRecipe(valid_fraction=0.0).valid_fraction == 0.0
    with pytest.raises(ValueError, match=r"valid_fraction must be in \[0, 1\)"):
        IntentRecipe(valid_fraction=fraction)


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
