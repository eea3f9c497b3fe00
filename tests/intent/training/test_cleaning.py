"""Confident-learning label cleaning on data with known, planted label errors."""

from __future__ import annotations

import random
from collections import Counter

import numpy as np
import pytest

from headwise.intent import IntentRecipe, train_intent_classifier
from headwise.intent.training.cleaning import (
    LARGE_CLEANING_SHARE,
    PARALLEL_ROWS,
    clean_labels,
    describe_cleaning,
    find_label_issues,
    fold_jobs,
    out_of_fold_multi_label_probs,
    out_of_fold_probs,
)

WORDS = {
    "card_lost": ["lost", "card", "stolen", "missing", "wallet", "block"],
    "transfer": ["transfer", "send", "money", "account", "wire", "payee"],
    "refund": ["refund", "return", "order", "back", "cancel", "purchase"],
    "balance": ["balance", "check", "how", "much", "left", "statement"],
}


def _planted(n_per=40, flips=10, seed=0):
    """Texts of four intents with disjoint vocabularies; ``flips`` labels changed."""
    rng = random.Random(seed)
    texts, truth = [], []
    for intent, words in WORDS.items():
        for _ in range(n_per):
            texts.append(" ".join(rng.choice(words) for _ in range(5)))
            truth.append(intent)
    labels = list(truth)
    flipped = rng.sample(range(len(texts)), flips)
    for i in flipped:
        labels[i] = rng.choice([k for k in WORDS if k != truth[i]])
    return texts, labels, truth, set(flipped)


def test_planted_errors_are_found_with_their_true_intent():
    texts, labels, truth, flipped = _planted()
    issues = find_label_issues(texts, labels, folds=5)
    found = set(issues.indices)
    assert len(found & flipped) >= 9  # recall
    assert len(found - flipped) <= 2  # precision
    for i, suggestion in zip(issues.indices, issues.suggested, strict=True):
        if i in flipped:
            assert suggestion == truth[i]
    assert issues.total == len(texts) and issues.folds == 5
    assert sum(issues.by_label.values()) == len(issues.indices)


def test_confident_learning_forks_no_process_pool(monkeypatch):
    """cleanlab forks a multiprocessing pool by default, which deadlocks in a process that
    already runs threads (a Ray driver: the suite once hung there); both searches run in
    the calling process and find what they found before."""
    import multiprocessing
    import multiprocessing.pool

    from headwise.intent.training.cleaning import find_multi_label_issues

    texts, labels, _, flipped = _planted()
    probs = out_of_fold_probs(texts, labels, folds=5)

    def refuse(*args, **kwargs):
        raise AssertionError("a process pool was started")

    monkeypatch.setattr(multiprocessing, "Pool", refuse)
    monkeypatch.setattr(multiprocessing.pool, "Pool", refuse)
    issues = find_label_issues(texts, labels, folds=5, probs=probs)
    assert len(set(issues.indices) & flipped) >= 9
    intents = probs[1]
    sets = [[y] for y in labels]
    rows = find_multi_label_issues(sets, probs[0], intents)
    assert len(set(rows) & flipped) >= 5


def test_out_of_fold_probabilities_are_distributions_over_sorted_intents():
    texts, labels, _, _ = _planted(n_per=10, flips=0)
    probs, intents = out_of_fold_probs(texts, labels, folds=3)
    assert intents == sorted(WORDS)
    assert probs.shape == (len(texts), len(WORDS))
    np.testing.assert_allclose(probs.sum(1), 1.0, atol=1e-9)
    # clean, separable data: every held-out example is predicted right
    pred = [intents[j] for j in probs.argmax(1)]
    assert pred == labels


def test_folds_fitted_in_worker_processes_give_the_sequential_probabilities():
    """The parallel path (joblib worker processes, folds finishing in any order) puts each
    fold's probabilities on its own rows: equal to one fold after the other, single- and
    multi-label, with progress called once per fold."""
    texts, labels, _, _ = _planted()
    ticks: list[int] = []
    one, intents = out_of_fold_probs(texts, labels, folds=5, jobs=1)
    two, intents2 = out_of_fold_probs(texts, labels, folds=5, jobs=2,
                                      progress=lambda: ticks.append(1))
    assert intents2 == intents and len(ticks) == 5
    np.testing.assert_allclose(two, one, rtol=0, atol=1e-9)
    sets = [[y] if i % 3 else [y, labels[(i + 7) % len(labels)]] for i, y in enumerate(labels)]
    one, _ = out_of_fold_multi_label_probs(texts, sets, folds=4, jobs=1)
    two, _ = out_of_fold_multi_label_probs(texts, sets, folds=4, jobs=3)
    np.testing.assert_allclose(two, one, rtol=0, atol=1e-9)


def test_fold_jobs_rules():
    import os

    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    assert fold_jobs(PARALLEL_ROWS - 1, 5) == 1  # small data: one process
    assert fold_jobs(PARALLEL_ROWS, 5) == min(5, cpus)
    assert fold_jobs(10, 5, jobs=8) == 5 and fold_jobs(10, 5, jobs=2) == 2
    for bad in (0, -1, 1.5):
        with pytest.raises(ValueError, match="jobs"):
            fold_jobs(10, 5, jobs=bad)
    texts, labels, _, _ = _planted(n_per=10, flips=0)
    with pytest.raises(ValueError, match="jobs"):
        out_of_fold_probs(texts, labels, folds=3, jobs=0)


@pytest.mark.parametrize("mode", ["drop", "relabel"])
def test_clean_labels_drops_or_relabels_in_order(mode):
    texts, labels, truth, flipped = _planted()
    new_t, new_y, issues = clean_labels(texts, labels, mode=mode)
    flagged = set(issues.indices)
    if mode == "drop":
        keep = [i for i in range(len(texts)) if i not in flagged]
        assert new_t == [texts[i] for i in keep] and new_y == [labels[i] for i in keep]
    else:
        assert new_t == texts
        wrong_before = sum(a != b for a, b in zip(labels, truth, strict=True))
        wrong_after = sum(a != b for a, b in zip(new_y, truth, strict=True))
        assert wrong_after <= wrong_before - 8


def test_cleaning_errors():
    with pytest.raises(ValueError, match="at least 2 examples"):
        find_label_issues(["a b", "c d", "e f"], ["x", "x", "y"])
    with pytest.raises(ValueError, match="two intents"):
        find_label_issues(["a", "b"], ["x", "x"])
    with pytest.raises(ValueError, match="labels"):
        out_of_fold_probs(["a"], ["x", "y"])
    with pytest.raises(ValueError, match="mode"):
        clean_labels(["a", "b"], ["x", "y"], mode="fix")
    with pytest.raises(ValueError, match="folds"):
        find_label_issues(["a b"] * 4, ["x", "x", "y", "y"], folds=1)
    with pytest.raises(ValueError, match="label_cleaning"):
        IntentRecipe.from_dict({"levers": {"label_cleaning": "yes"}})


def test_recipe_cleans_the_training_split(tmp_path):
    texts, labels, _, flipped = _planted()
    recipe = IntentRecipe.from_dict({
        "architecture": {"d_model": 32, "num_layers": 1, "num_heads": 4, "d_ff": 64,
                         "vocab_size": 200},
        "train": {"epochs": 1, "progress": False},
        "levers": {"label_cleaning": "drop"}})
    trained = train_intent_classifier(list(zip(texts, labels, strict=True)), None, recipe,
                                      out_dir=tmp_path / "m")
    info = trained.classifier.info["label_cleaning"]
    assert info["flagged"] >= 1 and info["total"] == trained.classifier.info["train_examples"] \
        + info["flagged"]


@pytest.mark.parametrize("mode", ["drop", "relabel"])
def test_cleaning_summary_counts_what_changed_per_intent(mode):
    texts, labels, _, _ = _planted(flips=10)
    new_t, new_y, issues = clean_labels(texts, labels, mode=mode)
    summary = issues.to_dict()
    # counted from the data itself: rows gone, or rows whose label differs
    if mode == "drop":
        changed = len(texts) - len(new_t)
        gone = Counter(labels) - Counter(new_y)
        per_intent = dict(gone)
    else:
        changed_rows = [i for i in range(len(texts)) if new_y[i] != labels[i]]
        changed = len(changed_rows)
        per_intent = dict(Counter(labels[i] for i in changed_rows))
    assert changed >= 8
    assert summary["mode"] == mode and summary["changed"] == changed
    assert summary["changed_share"] == round(changed / len(texts), 4)
    rows = Counter(labels)
    shares = sorted(((k, n / rows[k]) for k, n in per_intent.items()), key=lambda e: -e[1])
    assert [e["intent"] for e in summary["by_intent"]] == [k for k, _ in shares][:5]
    for e in summary["by_intent"]:
        assert (e["changed"], e["rows"]) == (per_intent[e["intent"]], rows[e["intent"]])
    assert (summary["warning"] is None) == (changed / len(texts) <= LARGE_CLEANING_SHARE)
    lines = describe_cleaning(summary)
    done = "dropped" if mode == "drop" else "relabelled"
    assert lines[0].startswith(f"label cleaning ({mode}): {done} {changed} of {len(texts)} "
                               f"training rows ({changed / len(texts):.1%}")


def test_train_reports_cleaning_and_warns_when_the_share_is_large(tmp_path, capsys):
    import json

    from headwise.cli import main

    # a quarter of the labels flipped: far above the warning's share
    texts, labels, _, flipped = _planted(n_per=40, flips=40, seed=1)
    data = tmp_path / "train.csv"
    data.write_text("text,label\n" + "".join(f"{t},{k}\n" for t, k in zip(
        texts, labels, strict=True)), encoding="utf-8")
    out = tmp_path / "m"
    assert main(["train", "--data", str(data), "--out", str(out), "--model", "tfidf",
                 "--set", "levers.label_cleaning=drop"]) == 0
    printed = capsys.readouterr().out
    info = json.loads((out / "train_summary.json").read_text())
    summary = info["label_cleaning"]
    assert summary["changed"] == summary["flagged"] and summary["mode"] == "drop"
    assert summary["total"] == info["train_examples"] + summary["changed"]
    assert summary["changed_share"] > LARGE_CLEANING_SHARE and summary["warning"]
    assert f"label cleaning (drop): dropped {summary['changed']} of {summary['total']} " \
        "training rows" in printed
    assert "most changed: " in printed
    assert f"warning: label cleaning dropped {summary['changed_share']:.1%}" in printed
