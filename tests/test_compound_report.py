"""The compound benchmark's scoring from per-question outcomes (``benchmarks/
_compound_report.py``): point scores equal scikit-learn's, the bootstrap intervals hold
them, slices and the validation choice read what they say, the NLU++ tables' intervals and
the low-data floor verdict (a paired bootstrap) match hand-computed cases; and how a run's
record names its test set, stored once (``benchmarks/compound.py``)."""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path

import numpy as np
import pytest
from sklearn.metrics import f1_score

from headwise.text.dataset import Example, SlotSpan

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))

import _compound_report as R  # noqa: E402
import _harness as H  # noqa: E402
import compound as C  # noqa: E402

INTENTS = ["a", "b", "c", "d"]


def _run(seed: int, config: str = "bilstm", n: int = 60, valid: float = 0.5) -> dict:
    rng = random.Random(seed)
    questions, slices = [], []
    for i in range(n):
        gold = sorted(rng.sample(INTENTS, rng.choice([0, 1, 1, 2])))
        pred = gold if rng.random() < 0.6 else sorted(rng.sample(INTENTS, rng.choice([1, 2])))
        g = [["amount", i, i + 2]] if i % 3 else []
        p = g if rng.random() < 0.7 else [["amount", i, i + 3]]
        questions.append({"gold": gold, "pred": pred, "gold_spans": g, "pred_spans": p,
                          "values": [["amount", int(p == g)]] if g else []})
        slices.append(["compound"] if len(gold) > 1 else [])
    return {"setting": R.DETAILED, "config": config, "seed": seed, "status": "ok",
            "per_question": questions, "slices": slices, "valid": {"exact_match": valid},
            "p50_ms": 1.0, "p50_runtime": "torch"}


def _matrix(rows: list[list[str]]) -> np.ndarray:
    return np.array([[n in r for n in INTENTS] for r in rows])


def test_point_scores_equal_scikit_learn_averaged_over_seeds():
    runs = [_run(0), _run(1)]
    got = R._intervals(runs, list(range(60)))
    ref = {"exact_match": [], "micro_f1": [], "macro_f1": [], "span_f1": []}
    for r in runs:
        q = r["per_question"]
        gold, pred = _matrix([x["gold"] for x in q]), _matrix([x["pred"] for x in q])
        ref["exact_match"].append(np.mean((gold == pred).all(1)))
        ref["micro_f1"].append(f1_score(gold, pred, average="micro"))
        used = (gold | pred).any(0)  # macro over the intents that occur
        ref["macro_f1"].append(f1_score(gold[:, used], pred[:, used], average="macro",
                                        zero_division=0))
        g = {(i, tuple(s)) for i, x in enumerate(q) for s in x["gold_spans"]}
        p = {(i, tuple(s)) for i, x in enumerate(q) for s in x["pred_spans"]}
        ref["span_f1"].append(2 * len(g & p) / (len(g) + len(p)))
    for k, values in ref.items():
        point, low, high = got[k]
        assert point == pytest.approx(np.mean(values)), k
        assert low <= point <= high and high - low > 0, (k, got[k])


def test_intervals_narrow_with_more_questions():
    few = R._intervals([_run(0, n=30)], list(range(30)))["exact_match"]
    many = R._intervals([_run(0, n=600)], list(range(600)))["exact_match"]
    assert many[2] - many[1] < few[2] - few[1]


def test_slices_and_the_choice_on_validation():
    run = _run(0)
    compound = R._slice_rows(run, "compound")
    assert compound == [i for i, q in enumerate(run["per_question"]) if len(q["gold"]) > 1]
    assert R._slice_rows(run, "out_of_scope") == [
        i for i, q in enumerate(run["per_question"]) if not q["gold"]]
    runs = [_run(0, "bilstm", valid=0.4), _run(0, "bilstm-attn", valid=0.6),
            _run(0, "scratch", valid=0.7)]
    assert R.chosen_configs(runs) == {"bilstm": "bilstm-attn", "transformer": "scratch"}
    value = R.value_intervals(runs[:1], "amount")
    rows = [ok for q in runs[0]["per_question"] for _, ok in q["values"]]
    assert value[0] == pytest.approx(np.mean(rows)) and value[1] <= value[0] <= value[2]
    table = R.comparison_table(runs)
    assert "**yes**" in table and "BiLSTM joint, attention pooling" in table


def test_each_wrong_answer_has_one_kind_and_the_table_counts_them():
    assert R.error_kind(["a"], ["a"]) is None
    assert R.error_kind(["b", "a"], ["a", "b"]) is None  # a set, not a list
    assert R.error_kind([], ["a"]) == "oos_answered"
    assert R.error_kind(["a"], []) == "none"
    assert R.error_kind(["a", "b"], ["a"]) == "missed"
    assert R.error_kind(["a"], ["a", "b"]) == "extra"
    assert R.error_kind(["a"], ["b"]) == "wrong"
    assert R.error_kind(["a", "b"], ["a", "c"]) == "wrong"
    runs = [_run(0), _run(1)]
    table = R.error_table(runs).splitlines()
    by_kind = {line.split(" | ")[0].strip("| "): line for line in table[2:]}
    assert set(by_kind) == set(R.ERROR_KINDS.values()) | {"all wrong answers"}
    for key, name in R.ERROR_KINDS.items():  # mean over seeds of each seed's share
        share = np.mean([np.mean([R.error_kind(q["gold"], q["pred"]) == key
                                  for q in r["per_question"]]) for r in runs])
        assert by_kind[name].split(" | ")[1].startswith(f"{100 * share:.1f} ["), name
    wrong = np.mean([np.mean([q["gold"] != q["pred"] for q in r["per_question"]])
                     for r in runs])
    assert by_kind["all wrong answers"].split(" | ")[1].startswith(f"{100 * wrong:.1f} [")
    assert 100 * wrong == pytest.approx(100 - 100 * R._intervals(
        runs, list(range(60)))["exact_match"][0])


def test_the_choice_compares_members_on_the_seeds_they_share():
    # e5 looks best on seeds 0-2 only because seeds 1 and 2 are easier; on seed 0, which
    # both members ran, e5-lr1e-4 is better
    runs = [_run(0, "e5", valid=0.5), _run(1, "e5", valid=0.9), _run(2, "e5", valid=0.9),
            _run(0, "e5-lr1e-4", valid=0.6)]
    assert R.chosen_configs(runs)["e5"] == "e5-lr1e-4"


def test_targets_are_judged_on_their_intervals():
    e5 = [{**_run(s, "e5"), "latencies_ms": [4.0 + 0.01 * i for i in range(100)]}
          for s in range(2)]
    for r in e5:  # every question right: exact match 100 %, every value right
        for q in r["per_question"]:
            q["pred"] = q["gold"]
            q["values"] = [[n, 1] for n, _ in q["values"]]
    bilstm = [_run(s, "bilstm") for s in range(2)]
    table = R.targets_table(e5 + bilstm)
    lines = {line.split(" | ")[0].strip("| "): line for line in table.splitlines()}
    assert "PASS" in lines["exact match >= 89 %"] and "100.0 [100.0, 100.0]" in table
    margin = np.mean([np.mean([set(q["gold"]) == set(q["pred"]) for q in r["per_question"]])
                      for r in bilstm])
    assert f"{100 * (1 - margin):+.1f}" in lines["exact match >= BiLSTM + 10 points"]
    assert "PASS" in lines["amount values end to end >= 85 %"]
    assert "PASS" in lines["single-query p50 on onnxruntime <= 10 ms, float32 export"]
    for start, verdict in ((8.0, "within noise"), (9.0, "FAIL")):  # medians 9.98, 10.98
        slow = [{**r, "latencies_ms": [start + 0.04 * i for i in range(100)]} for r in e5]
        lines = {line.split(" | ")[0].strip("| "): line
                 for line in R.targets_table(slow + bilstm).splitlines()}
        assert f"| {verdict} |" in lines["single-query p50 on onnxruntime <= 10 ms, float32 "
                                        "export"]
    assert R.targets_table(bilstm).startswith("(no pretrained")


def _with_rules(run: dict, valid_micro: float, valid_em: float, right: list[bool]) -> dict:
    """``run`` scored under both threshold rules: the micro-F1 rule is its own answers."""
    own = "".join("1" if set(q["gold"]) == set(q["pred"]) else "0"
                  for q in run["per_question"])
    return {**run, "threshold_rules": {
        "micro_f1": {"valid_crossfit": valid_micro, "test_right": own},
        "exact_match": {"valid_crossfit": valid_em,
                        "test_right": "".join("1" if x else "0" for x in right)}}}


def test_the_threshold_rule_is_chosen_on_cross_fitted_validation():
    """The exact-match rule answers only where its cross-fitted validation mean is higher;
    then the 89 % target reads its test outcomes (every question right here: 100 %), and
    the rules' table shows both rules on the same questions with the paired difference."""
    e5 = [_run(s, "e5") for s in range(3)]
    every = [True] * len(e5[0]["per_question"])
    better = [_with_rules(r, 0.70, 0.74 + 0.01 * r["seed"], every) for r in e5]
    assert R.chosen_rule(better) == "exact_match"
    tie = [_with_rules(r, 0.70, 0.70, every) for r in e5]
    assert R.chosen_rule(tie) == "micro_f1" and R.chosen_rule(e5) == "micro_f1"
    # a run without the rules: the default
    assert R.chosen_rule(better[:2] + e5[2:]) == "micro_f1"
    lines = {line.split(" | ")[0].strip("| "): line for line in
             R.targets_table(better).splitlines()}
    assert "exact-match thresholds, chosen on validation" in lines["exact match >= 89 %"]
    assert "100.0 [100.0, 100.0]" in lines["exact match >= 89 %"]
    assert "PASS" in lines["exact match >= 89 %"]
    own = np.mean([np.mean([set(q["gold"]) == set(q["pred"]) for q in r["per_question"]])
                   for r in e5])
    table = R.threshold_rule_table(better)
    row = next(line for line in table.splitlines() if line.startswith("| e5 "))
    assert "exact-match thresholds" in row and f"{100 * (1 - own):+.1f}" in row
    # seed-paired validation difference: 4, 5, 6 points over micro-F1's
    assert "+5.0 [+2.5, +7.5]" in row
    assert R.threshold_rule_table(e5).startswith("(no run")
    # the tie keeps micro-F1: the target reads the runs' own answers
    assert "exact-match" not in R.targets_table(tie).splitlines()[2]


def test_the_ranking_ceiling_answers_each_question_its_number_of_requests():
    """With each question's gold count known, the answer is the model's k most probable
    intents (worked out by hand): one request right, two right, out of scope right (k = 0),
    the top intent wrong, the second wrong, and an intent the model does not know left out
    of the count."""
    probs = np.array([[0.9, 0.45, 0.1], [0.8, 0.6, 0.1], [0.3, 0.2, 0.1], [0.4, 0.1, 0.05],
                      [0.7, 0.5, 0.2], [0.9, 0.1, 0.1]])
    gold = [("a",), ("a", "b"), (), ("b",), ("a", "c"), ("a", "z")]
    rows = [Example(f"q{i}", g, (), i + 1) for i, g in enumerate(gold)]

    class Model:
        intents = ["a", "b", "c"]

        def analyse(self, texts):
            return np.stack([probs[int(t[1:])] for t in texts]), None

    out = C.ranking_ceiling(C.split_probabilities(Model(), rows[:3], rows))
    assert out == {"valid_exact_match": 1.0, "test_exact_match": pytest.approx(4 / 6),
                   "test_right": "111001"}


def test_the_ranking_table_splits_the_loss_between_ranking_and_rule():
    """Every configuration with its ranking's ceiling (the chosen ones marked): a ceiling of every
    question right loses nothing to the ranking, and all that its own answers lose to the
    rule (paired over the same questions); runs without it are left out."""
    e5 = [_run(s, "e5") for s in range(3)]
    assert R.ranking_table(e5).startswith("(no run has recorded")
    assert R.ranking_part(e5) == []  # no paragraph for test sets measured before it
    n = len(e5[0]["per_question"])
    ranked = [{**r, "ranking": {"valid_exact_match": 0.9, "test_right": "1" * n}} for r in e5]
    own = np.mean([np.mean([set(q["gold"]) == set(q["pred"]) for q in r["per_question"]])
                   for r in e5])
    row = next(line for line in R.ranking_table(ranked).splitlines()
               if line.startswith("| e5 "))
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert "What the ranking allows" in R.ranking_part(ranked)[0]
    assert cells[2:6] == ["**yes**", "3", "micro-F1 thresholds", "90.0"]
    assert cells[6].startswith(f"{100 * own:.1f} [") and cells[7] == "100.0 [100.0, 100.0]"
    assert cells[8] == "0.0 [0.0, 0.0]" and cells[9].startswith(f"{100 * (1 - own):+.1f} [")


# -- NLU++: intervals on the setting tables and the low-data floor verdict ------------------
# four kinds of test question, ten of each: micro-F1 is the same on the forty as on the four
GOLD = [["a"], ["a", "b"], ["b"], []]
FLOOR = [[], ["a", "b"], ["b"], ["a"]]  # tp 3, fp 1, fn 1: micro-F1 6/8
HALF = [["a"], ["a"], ["c"], []]  # tp 2, fp 1, fn 2: 4/7
OTHER = [["a"], ["a"], ["b"], ["c"]]  # tp 3, fp 1, fn 1: 6/8, wrong on other questions


def _nlupp(config: str, preds: list[list[str]], seed: int = 0, valid: float = 0.5,
           setting: str = R.LOW_DATA) -> dict:
    questions = [{"gold": g, "pred": p} for _ in range(10)
                 for g, p in zip(GOLD, preds, strict=True)]
    return {"setting": setting, "config": config, "seed": seed, "status": "ok",
            "per_question": questions, "valid": {"micro_f1": valid}, "train_seconds": 1.0,
            "micro_f1": 0.0, "macro_f1": 0.0, "exact_match": 0.0}


def _verdict_row(table: str) -> list[str]:
    return [c.strip() for c in table.splitlines()[-1].strip("|").split("|")]


def test_nlupp_tables_give_micro_f1_intervals_where_records_have_questions():
    runs = [_nlupp("minilm", GOLD, seed=0), _nlupp("minilm", HALF, seed=1),
            _nlupp("tfidf", FLOOR), {**_nlupp("scratch", GOLD), "per_question": None}]
    table = R.setting_table(runs, R.LOW_DATA)
    rows = {line.split(" | ")[0].strip("| "): line for line in table.splitlines()}
    # the seeds averaged: (1 + 4/7) / 2 = 11/14
    assert "| 78.6 [" in rows[R.LABEL["minilm"]] and "| 75.0 [" in rows[R.LABEL["tfidf"]]
    low, high = (float(x) for x in rows[R.LABEL["minilm"]].split("| 78.6 [")[1]
                 .split("]")[0].split(", "))
    assert low < 78.6 < high
    assert "| - |" in rows[R.LABEL["scratch"]] and "predates per-question outcomes" in table
    assert "predates" not in R.setting_table(runs[:3], R.LOW_DATA)


def test_the_low_data_floor_verdict_is_a_paired_bootstrap_on_micro_f1():
    floor = _nlupp("tfidf", FLOOR)
    # the family's member chosen on validation micro-F1 is judged, not the best on test
    runs = [floor, _nlupp("minilm", GOLD, valid=0.4), _nlupp("minilm-fresh", HALF, valid=0.9)]
    row = _verdict_row(R.floor_table(runs))
    assert row[1].startswith(R.LABEL["minilm-fresh"])
    d = R._intervals(runs[2:], list(range(40)), minus=[floor])["micro_f1"]
    assert d[0] == pytest.approx(4 / 7 - 6 / 8)  # -5/28
    assert d[1] <= d[0] <= d[2]
    assert f"{100 * d[0]:+.1f}" in row[3] and "57.1 [" in row[3] and "75.0 [" in row[3]
    cases = ((GOLD, "PASS"), (OTHER, "within noise"), ([[]] * 4, "FAIL"))
    for preds, verdict in cases:  # +1/4 in every resample; 0 on the whole; -3/4
        assert _verdict_row(R.floor_table([floor, _nlupp("minilm", preds)]))[4] == verdict
    assert R.floor_table([_nlupp("minilm", GOLD)]).startswith("(not judged")
    # the floor's own answers: a difference of 0 in every resample reaches the floor (low
    # data) but does not beat it (the full setting's target)
    same = [floor, _nlupp("minilm", FLOOR)]
    assert _verdict_row(R.floor_table(same))[4] == "PASS"
    full = [{**r, "setting": "nlupp-full"} for r in same]
    row = _verdict_row(R.floor_table(full, "nlupp-full"))
    assert row[0] == "intent micro-F1 above the TF-IDF floor" and row[4] == "within noise"
    with pytest.raises(ValueError, match="same test questions"):
        R._intervals(runs[1:2], list(range(40)), minus=[{"per_question": [{"gold": []}] * 40}])


def test_a_test_sets_gold_is_what_the_models_can_answer():
    # an intent the training data lacks is left out, as evaluate scores (unseen_intents)
    slots = (SlotSpan("amount", 4, 5, "5", 5.0), SlotSpan("when", 6, 9, "now"))
    test = [Example("pay 5 now", ("pay", "unseen", "pay"), slots, line=1),
            Example("hi", ("unseen",), (), line=2)]
    assert C.questions_of(test, None, {"pay", "other"}) == {
        "gold": [["pay"], []], "gold_spans": [[["amount", 4, 5], ["when", 6, 9]], []],
        "value_slots": [["amount"], []]}
    assert C.questions_of(test, [["compound"], []], {"pay"})["slices"] == [["compound"], []]


def test_runs_name_their_test_set_stored_once(tmp_path):
    results = tmp_path / "runs.jsonl"
    gold = {"gold": [["a"], [], ["a", "c"]],
            "gold_spans": [[["amount", 0, 2]], [], [["amount", 1, 3], ["when", 4, 6]]],
            "value_slots": [["amount"], [], ["amount", "when"]],
            "slices": [["compound"], [], []]}
    key = C.store_questions(C.questions_path(results), gold)
    assert C.store_questions(C.questions_path(results), gold) == key  # stored once
    assert C.questions_path(results).name == "runs.questions.jsonl"
    assert len(C.questions_path(results).read_text().splitlines()) == 1
    joint = [{"pred": ["b"], "pred_spans": [["amount", 0, 2]], "values": [1]},  # wrong intent
             {"pred": [], "pred_spans": [], "values": []},  # right
             {"pred": ["a", "c"], "pred_spans": [["amount", 1, 3], ["when", 4, 6]],
              "values": [1, 0]}]  # a value normalised wrong
    floor = [{"pred": ["b"]}, {"pred": []}, {"pred": ["a", "c"]}]
    records = [
        {"setting": "demo-compound", "config": "scratch", "seed": 0, "questions": key,
         "answers": C.encode_answers(joint, gold)},
        {"setting": "demo-compound", "config": "tfidf", "seed": 0, "questions": key,
         "answers": C.encode_answers(floor, gold)}]
    # only the answers that differ from the right one are kept, names numbered
    assert records[0]["answers"] == {"rows": 3, "joint": True,
                                     "wrong": [[0, ["b"], [[1, 0, 2]], "1"],
                                               [2, [0, 2], [[1, 1, 3], [3, 4, 6]], "10"]]}
    assert C.answer_names(gold) == ["a", "amount", "c", "when"]
    assert records[1]["answers"]["wrong"] == [[0, ["b"]]]
    results.write_text("".join(json.dumps(r) + "\n" for r in records))
    runs = C.done_runs(results)
    new, low = (runs[("demo-compound", c, 0)] for c in ("scratch", "tfidf"))
    assert new["per_question"] == [
        {"gold": ["a"], "pred": ["b"], "gold_spans": [["amount", 0, 2]],
         "pred_spans": [["amount", 0, 2]], "values": [["amount", 1]]},
        {"gold": [], "pred": [], "gold_spans": [], "pred_spans": [], "values": []},
        {"gold": ["a", "c"], "pred": ["a", "c"],
         "gold_spans": [["amount", 1, 3], ["when", 4, 6]],
         "pred_spans": [["amount", 1, 3], ["when", 4, 6]],
         "values": [["amount", 1], ["when", 0]]}]
    assert new["slices"] == gold["slices"] and "answers" not in new
    assert low["per_question"] == [{"gold": ["a"], "pred": ["b"]}, {"gold": [], "pred": []},
                                   {"gold": ["a", "c"], "pred": ["a", "c"]}]
    with pytest.raises(ValueError, match="2 answers for 3"):
        C.encode_answers(floor[:2], gold)
    with pytest.raises(ValueError, match="slot spans"):
        C.encode_answers([joint[0], *floor[1:]], gold)
    records[1]["questions"] = "0" * 16
    results.write_text("".join(json.dumps(r) + "\n" for r in records))
    with pytest.raises(ValueError, match="lacks"):
        C.done_runs(results)


def test_a_run_is_scored_under_both_threshold_rules():
    """A model stand-in whose probabilities need two thresholds (one request with a second
    intent at 0.45, two requests, out of scope, one unsure request at 0.4), ten of each:
    exact-match thresholds answer every question, micro-F1's one threshold 3 in 4; the
    cross-fitted halves see the same four kinds, so they agree."""
    probs = np.array([[0.9, 0.45, 0.1], [0.8, 0.6, 0.1], [0.3, 0.2, 0.1], [0.4, 0.1, 0.05]])
    gold = [("a",), ("a", "b"), (), ("a",)]
    rows = [Example(f"q{i}", gold[i % 4], (), i + 1) for i in range(40)]

    class Model:
        intents = ["a", "b", "c"]

        def analyse(self, texts):
            return np.stack([probs[int(t[1:]) % 4] for t in texts]), None

    out = C.threshold_rules(C.split_probabilities(Model(), rows, rows), seed=0)
    assert out["exact_match"]["test_exact_match"] == 1.0
    assert out["exact_match"]["valid_crossfit"] == 1.0
    assert out["micro_f1"]["test_exact_match"] == pytest.approx(0.75)
    assert len(out["micro_f1"]["test_right"]) == 40
    assert out["micro_f1"]["test_right"].count("1") == 30
    assert out["exact_match"]["thresholds"]["metric"] == "exact_match"
    assert out["exact_match"]["thresholds"]["additional"] is not None


def _int8_of(run: dict, wrong: set[int], times: list[float]) -> dict:
    """``run`` with an int8 copy whose answers are the float32 ones except ``wrong`` (their
    predicted intents emptied), as :func:`compound.done_runs` gives it."""
    answers = [dict(q, pred=[] if i in wrong and q["gold"] else q["pred"])
               for i, q in enumerate(run["per_question"])]
    return {**run, "int8": {"per_question": answers, "latencies_ms": times,
                            "p50_ms": float(np.median(times)), "valid_exact_match": 0.5,
                            "probe": {"intent_sets_equal": 0.95, "tags_equal": 1.0},
                            "size_mb": 120.0}}


def test_the_int8_export_is_reported_beside_float32_and_judged_on_its_p50():
    """Every e5 question right in float32; the int8 copy misses the questions in ``wrong``:
    its exact match, the paired difference and its p50 target read the int8 answers and
    times, the float32 row stays as it was."""
    e5 = []
    for s in range(2):
        r = {**_run(s, "e5"), "latencies_ms": [12.0 + 0.01 * i for i in range(100)]}
        for q in r["per_question"]:
            q["pred"] = q["gold"]
            q["values"] = [[n, 1] for n, _ in q["values"]]
        e5.append(r)
    answered = [i for i, q in enumerate(e5[0]["per_question"]) if q["gold"]]
    wrong = set(answered[:6])
    runs = [_int8_of(r, wrong, [6.0 + 0.01 * i for i in range(100)]) for r in e5]
    lines = [ln for ln in R.targets_table(runs).splitlines()
             if ln.startswith("| single-query p50")]
    assert len(lines) == 2
    assert "float32 export |" in lines[0] and "| FAIL |" in lines[0]
    assert "int8 export |" in lines[1] and "| PASS |" in lines[1] and "6.50" in lines[1]
    share = np.mean([np.mean([set(q["gold"]) == set(q["pred"])
                              for q in r["int8"]["per_question"]]) for r in runs])
    assert share < 1
    assert f"exact match {100 * share:.1f} [" in lines[1]
    assert f"int8 - float32 {100 * (share - 1):+.1f} [" in lines[1]
    int8 = R.int8_runs(runs)
    assert [r["p50_runtime"] for r in int8] == ["onnx int8"] * 2
    assert all(r["per_question"] is q["int8"]["per_question"] for r, q in
               zip(int8, runs, strict=True))
    table = R.int8_table(runs)
    assert "| e5 |" in table and f"{100 * share:.1f} [" in table and "95 % / 100 %" in table
    assert R.int8_runs(e5) == [] and R.int8_table(e5).startswith("(no run")


def test_int8_run_serves_the_trained_model_from_its_int8_export(trained_compound_dir,
                                                               compound_corpus, tmp_path):
    """The benchmark's int8 pass on a tiny trained compound model: answers encoded against
    the test set like the run's own, close to float32's; the validation exact match is the
    share of whole intent sets right (here validation = test); each rule's outcomes at the
    float32 thresholds; the probe's agreement; one time per question."""
    from headwise.intent.compound.classifier import CompoundClassifier
    from headwise.intent.inference.load import export_checked_onnx

    clf = CompoundClassifier.load(trained_compound_dir)
    rows = compound_corpus
    gold = C.questions_of(rows, None, {i for e in rows for i in e.intents})
    export_checked_onnx(clf, tmp_path / "model.onnx", model_dir=trained_compound_dir)
    rules = C.threshold_rules(C.split_probabilities(clf, rows, rows), seed=0)
    rec = C.int8_run(clf, tmp_path / "model.onnx", rows, rows, rules, gold, threads=1)
    assert (tmp_path / "model.int8.onnx").is_file() and rec["size_mb"] > 0
    answers = C.decode_answers(rec["answers"], gold)
    fp32 = C.per_question(clf.predict([e.text for e in rows], top_k=1), rows)
    same = np.mean([a["pred"] == b["pred"] and a["pred_spans"] == b["pred_spans"]
                    for a, b in zip(answers, fp32, strict=True)])
    assert same >= 0.9
    right = [sorted(a["pred"]) == g for a, g in zip(answers, gold["gold"], strict=True)]
    assert rec["valid_exact_match"] == pytest.approx(np.mean(right))
    for rule in C.RULES:
        got = rec["threshold_rules"][rule]["test_right"]
        assert len(got) == len(rows) and set(got) <= {"0", "1"}
        agree = np.mean([a == b for a, b in zip(got, rules[rule]["test_right"], strict=True)])
        assert agree >= 0.9, rule
    assert 0.9 <= rec["probe"]["intent_sets_equal"] <= 1.0
    assert len(rec["latencies_ms"]) == len(rows) and rec["p50_ms"] > 0


def test_a_soup_of_one_model_twice_answers_as_that_model(trained_compound_dir,
                                                          compound_corpus):
    """The benchmark's soup run: a uniform soup of two copies of one trained model is that
    model, and its thresholds, tuned again on the validation rows as training tuned the
    member's (here on the same rows), are the member's: the same answers and scores."""
    from headwise.demo.values import REFERENCE_DATE
    from headwise.intent.compound.classifier import CompoundClassifier
    from headwise.intent.evaluation import evaluate

    rows = compound_corpus
    gold = C.questions_of(rows, None, {i for e in rows for i in e.intents})
    member = {"model_dir": str(trained_compound_dir), "train_seconds": 2.0}
    spec = {"setting": "demo", "seed": 0, "threads": 1,
            "members": [{**member, "seed": 0}, {**member, "seed": 1}]}
    rec = C.soup_run(spec, rows, rows, gold, "q")
    clf = CompoundClassifier.load(trained_compound_dir)
    assert rec["threshold"] == pytest.approx(clf.thresholds.threshold)
    ref = evaluate(clf, rows, reference_date=REFERENCE_DATE)["intents"]
    assert rec["exact_match"] == pytest.approx(ref["exact_match"])
    assert rec["micro_f1"] == pytest.approx(ref["micro_f1"])
    assert rec["valid"]["exact_match"] == pytest.approx(ref["exact_match"])
    assert rec["train_seconds"] == 4.0 and [m["seed"] for m in rec["members"]] == [0, 1]
    mine = C.per_question(clf.predict([e.text for e in rows], top_k=1,
                                      reference_date=REFERENCE_DATE), rows)
    assert rec["answers"] == C.encode_answers(mine, gold)


def test_a_soup_runs_after_its_kept_members_and_refuses_without_them(tmp_path):
    plan = H.expand_soups([("demo-compound", "e5-joins1-soup3", 0),
                           ("demo-compound", "e5-joins1", 1)], C.CONFIGS)
    assert plan == [("demo-compound", "e5-joins1", 0), ("demo-compound", "e5-joins1", 1),
                    ("demo-compound", "e5-joins1", 2), ("demo-compound", "e5-joins1-soup3", 0)]
    kept = {}
    for s in range(3):
        (tmp_path / str(s)).mkdir()
        kept[("demo-compound", "e5-joins1", s)] = {
            "status": "ok", "recipe": C.CONFIGS["e5-joins1"], "model_dir": str(tmp_path / str(s)),
            "train_seconds": 10.0 + s}
    members = H.soup_members(kept, "demo-compound", "e5-joins1-soup3", 0, C.CONFIGS)
    assert [m["seed"] for m in members] == [0, 1, 2]
    for broken in ({"model_dir": None}, {"quick": True},
                   {"recipe": C.CONFIGS["e5-joins1-8ep"]}, {"status": "failed"}):
        bad = {**kept, ("demo-compound", "e5-joins1", 1):
               {**kept[("demo-compound", "e5-joins1", 1)], **broken}}
        with pytest.raises(ValueError, match="seed 1 .*--keep-models"):
            H.soup_members(bad, "demo-compound", "e5-joins1-soup3", 0, C.CONFIGS)


def test_a_soup_is_chosen_on_its_own_validation_without_narrowing_the_seeds():
    # e5 on seeds 0-2 (mean 0.7) against e5-joins1 on seeds 0-2 (mean 0.6 though seed 0
    # alone is 0.9); the soup (one run, seed 0) must not make the others compare on seed 0
    runs = [_run(0, "e5", valid=0.7), _run(1, "e5", valid=0.7), _run(2, "e5", valid=0.7),
            _run(0, "e5-joins1", valid=0.9), _run(1, "e5-joins1", valid=0.45),
            _run(2, "e5-joins1", valid=0.45),
            {**_run(0, "e5-joins1-soup3", valid=0.65), "recipe": C.CONFIGS["e5-joins1-soup3"]}]
    assert R.chosen_configs(runs)["e5"] == "e5"
    runs[-1]["valid"] = {"exact_match": 0.75}
    assert R.chosen_configs(runs)["e5"] == "e5-joins1-soup3"


def test_runs_on_another_test_set_are_never_compared_with_the_current_ones():
    """The generator changed between runs: the newest run's test set is the current one;
    runs on an earlier one get a subsection of their own (left out of the headline's
    tally), and pairing runs across test sets is refused."""
    import _harness as H

    def on(base: int, config: str, seed: int, key: str, date: str) -> dict:
        """A run on the test set of ``_run(base)``, wrong on every (seed + 3)-th question."""
        run = _run(base, config)
        for i, q in enumerate(run["per_question"]):
            if i % (seed + 3) == 0:
                q["pred"] = [] if q["gold"] else ["a"]
        return {**run, "seed": seed, "questions": key, "date": date, "command": "c",
                "train_seconds": 1.0}

    old = [on(0, "bilstm", s, "old", "2026-12-01 10:00 UTC") for s in range(2)]
    new = [on(1, "bilstm", s, "new", "2026-12-02 10:00 UTC") for s in range(2)]
    e5 = [on(1, "e5", s, "new", "2026-12-02 11:00 UTC") for s in range(2)]
    runs = old + new + e5
    assert R.test_sets(runs) == ["new", "old"]
    assert R.on_test_set(runs, "old") == old
    other = {**_run(0), "setting": "nlupp-full"}
    assert R.on_test_set([other, *old], "new") == [other]
    with pytest.raises(ValueError, match="same test questions"):
        R.targets_table(e5 + old)
    body = R.render(runs, Path("."), Path("."), draw=False)
    earlier = body.index("### The seed's comparison (an earlier corpus: test set old)")
    assert "test set `new`" in body[:earlier]
    current = "\n".join(H.current_lines(body))
    assert "test set old" not in current and "exact match >= 89 %" in current
    # the BiLSTM margin is judged against the BiLSTM of the current test set only
    margin = [ln for ln in current.splitlines() if ln.startswith("| exact match >= BiLSTM")]
    assert len(margin) == 1


def test_a_records_int8_answers_come_back_whole(tmp_path):
    """done_runs decodes the int8 file's answers against the run's test set, as the run's
    own, so the report reads both the same way."""
    results = tmp_path / "runs.jsonl"
    gold = {"gold": [["a"], []], "gold_spans": [[["amount", 0, 2]], []],
            "value_slots": [["amount"], []], "slices": [[], []]}
    key = C.store_questions(C.questions_path(results), gold)
    right = [{"pred": ["a"], "pred_spans": [["amount", 0, 2]], "values": [1]},
             {"pred": [], "pred_spans": [], "values": []}]
    int8 = [{"pred": ["a"], "pred_spans": [["amount", 0, 3]], "values": [0]}, right[1]]
    record = {"setting": "demo-compound", "config": "e5", "seed": 0, "questions": key,
              "answers": C.encode_answers(right, gold),
              "int8": {"answers": C.encode_answers(int8, gold), "p50_ms": 1.0}}
    results.write_text(json.dumps(record) + "\n")
    run = C.done_runs(results)[("demo-compound", "e5", 0)]
    assert [q["pred_spans"] for q in run["int8"]["per_question"]] == [[["amount", 0, 3]], []]
    assert run["int8"]["per_question"][0]["values"] == [["amount", 0]]
    assert run["per_question"][0]["values"] == [["amount", 1]]
    assert "answers" not in run["int8"] and run["int8"]["p50_ms"] == 1.0


def test_off_topic_training_rows_are_the_demos_and_leave_valid_and_test_alone():
    from headwise.demo.runner import DemoSettings

    assert C.DEMO_OOS_TRAIN == DemoSettings().oos_train
    plain = C.load_setting("demo-compound", Path("."), quick=True)
    oos = C.load_setting("demo-compound", Path("."), quick=True, oos_train=30)
    assert [e.text for e in oos[1]] == [e.text for e in plain[1]]
    assert [e.text for e in oos[2]] == [e.text for e in plain[2]]
    assert oos[3] == plain[3]
    extra = [e for e in oos[0] if not e.intents]
    assert len(oos[0]) == len(plain[0]) + 30 and len(extra) == 30
    assert not any(not e.intents for e in plain[0])
    with pytest.raises(ValueError, match="demo corpus"):
        C.load_setting("nlupp-full", Path("."), quick=True, oos_train=30)
    # the configuration's key is not a recipe field: the worker takes it out
    assert C.CONFIGS["e5-joins1-oos"][C.OOS_TRAIN] == C.DEMO_OOS_TRAIN
    assert R.FAMILY["e5-joins1-oos"] == "e5" and "e5-joins1-oos" in R.LABEL


def test_a_member_run_on_fewer_seeds_never_narrows_the_others_comparison():
    # e5 and e5-8ep ran seeds 0-2 (e5-8ep better over them, e5 better on seed 0 alone);
    # e5-split was stopped after seed 0, worse there than e5-8ep: the choice stays e5-8ep
    runs = [_run(0, "e5", valid=0.80), _run(1, "e5", valid=0.70), _run(2, "e5", valid=0.70),
            _run(0, "e5-8ep", valid=0.78), _run(1, "e5-8ep", valid=0.80),
            _run(2, "e5-8ep", valid=0.80), _run(0, "e5-split", valid=0.70)]
    assert R.chosen_configs(runs)["e5"] == "e5-8ep"
    # stopped after seed 0 but better than the choice on it: it takes the choice
    runs[-1] = _run(0, "e5-split", valid=0.79)
    assert R.chosen_configs(runs)["e5"] == "e5-split"


def test_the_written_questions_are_the_demos_intents_each_in_a_slice_that_fits(tmp_path):
    """The committed file reads (every slice fits its intents, every intent is the demo's),
    and a line whose slice contradicts its intents, or that lacks a text, is refused with
    its line number."""
    from headwise.demo.corpus import generate_demo_corpus

    written = C.read_written()
    demo = {i for e in generate_demo_corpus(seed=0, per_intent=5)["train"] for i in e.intents}
    assert set(written["slices"]) == set(R.WRITTEN_SLICES)
    assert {i for g in written["gold"] for i in g} <= demo
    assert len(written["texts"]) == len(set(written["texts"])) >= 80
    bad = tmp_path / "w.jsonl"
    bad.write_text('{"text": "q", "intents": ["a"], "slice": "single"}\n\n'
                   '{"text": "r", "intents": ["a"], "slice": "compound"}\n')
    with pytest.raises(ValueError, match=r"w.jsonl:3: a compound question with 1 intents"):
        C.read_written(bad)
    bad.write_text('{"intents": [], "slice": "out_of_scope"}\n')
    with pytest.raises(ValueError, match=r"w.jsonl:1: expected text"):
        C.read_written(bad)


def test_written_answers_decide_each_rules_thresholds():
    """The same probabilities under one global threshold and under the exact-match pair
    (0.8 for the most probable intent, 0.3 for the others): hand-checked sets."""
    probs = np.array([[0.9, 0.4, 0.1], [0.5, 0.2, 0.1], [0.85, 0.2, 0.6]])
    out = C.written_answers(probs, ["a", "b", "c"], {
        "micro_f1": {"threshold": 0.45, "per_intent": None, "additional": None,
                     "metric": "micro_f1"},
        "exact_match": {"threshold": 0.8, "per_intent": None, "additional": 0.3,
                        "metric": "exact_match"}})
    assert out == {"micro_f1": [["a"], ["a"], ["a", "c"]],
                   "exact_match": [["a", "b"], [], ["a", "c"]]}


def _written_run(run: dict, key: str, gold: list, answers: dict, slices: list,
                 valid_em: float = 0.6) -> dict:
    run = _with_rules(run, 0.5, valid_em, [True] * len(run["per_question"]))
    return {**run, "written": {"questions": key, "answers": answers, "gold": gold,
                               "slices": slices, "texts": [f"t{i}" for i in range(len(gold))]}}


def test_the_written_table_scores_each_configuration_under_its_rule_per_slice():
    """Two e5 runs whose exact-match rule is chosen on validation: the written score is
    theirs under that rule (3 of 4 right in each), per slice, and the losses list the
    question both seeds miss with its answer; a configuration without written answers is
    left out."""
    gold = [["a", "b"], ["a"], [], ["c"]]
    slices = ["compound", "dropped", "out_of_scope", "single"]
    em = [["a", "b"], ["a", "b"], [], ["c"]]  # the dropped request answered: wrong
    micro = [["a"], ["a"], [], ["c"]]
    runs = [_written_run(_run(s, "e5-joins1"), "w1", gold,
                         {"micro_f1": micro, "exact_match": em}, slices) for s in (0, 1)]
    runs.append(_run(0, "bilstm"))
    table = R.written_table(runs)
    row = next(line for line in table.splitlines() if R.LABEL["e5-joins1"] in line)
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[4] == "exact-match thresholds"
    assert cells[5].startswith("75.0 [")
    assert cells[6:10] == ["100.0 [100.0, 100.0]", "0.0 [0.0, 0.0]", "100.0 [100.0, 100.0]",
                           "100.0 [100.0, 100.0]"]
    assert R.LABEL["bilstm"] not in table
    losses = R.written_losses(runs)
    assert "(1 of 4)" in losses and "| t1 | a | a, b | 2 of 2 |" in losses
    assert R.written_part([_run(0, "bilstm")]) == []


def test_a_records_written_answers_come_back_with_their_questions(tmp_path):
    """done_runs gives a run's written answers their texts, gold and slices from the
    questions file; a record naming a set the file lacks is refused."""
    results = tmp_path / "runs.jsonl"
    gold = {"gold": [["a"]], "gold_spans": [[]], "value_slots": [[]], "slices": [[]]}
    key = C.store_questions(C.questions_path(results), gold)
    written = {"kind": "written", "texts": ["q1", "q2"], "gold": [["a"], []],
               "slices": ["single", "out_of_scope"]}
    wkey = C.store_questions(C.questions_path(results), written)
    rec = {"setting": "demo-compound", "config": "tfidf", "seed": 0, "questions": key,
           "answers": C.encode_answers([{"pred": ["a"]}], gold),
           "written": {"questions": wkey, "answers": {"micro_f1": [["a"], ["a"]]}}}
    results.write_text(json.dumps(rec) + "\n")
    run = C.done_runs(results)[("demo-compound", "tfidf", 0)]
    assert run["written"]["texts"] == ["q1", "q2"] and run["written"]["gold"] == [["a"], []]
    assert R.written_outcomes([run], "micro_f1") == [[True, False]]
    rec["written"]["questions"] = "0" * 16
    results.write_text(json.dumps(rec) + "\n")
    with pytest.raises(ValueError, match="written questions 0+, which"):
        C.done_runs(results)


def test_the_written_table_compares_configurations_on_one_version_of_the_questions():
    """After the file is edited, runs on its earlier version are left out of the table (a
    configuration with one seed on each version too): only the newest version's runs are
    compared, and the counts in the header are theirs."""
    old_gold, new_gold = [["a"], []], [["a"], [], ["c"]]
    answers_old = {"micro_f1": [["a"], []], "exact_match": [["a"], []]}
    answers_new = {"micro_f1": [["a"], [], ["c"]], "exact_match": [["a"], [], ["c"]]}
    old = [{**_written_run(_run(s, "bilstm-joins"), "v1", old_gold, answers_old,
                           ["single", "out_of_scope"]), "date": "2026-12-01"} for s in (0, 1)]
    new = [{**_written_run(_run(s, "e5-joins1"), "v2", new_gold, answers_new,
                           ["single", "out_of_scope", "single"]), "date": "2026-12-02"}
           for s in (0, 1)]
    mixed = [{**_written_run(_run(0, "scratch-joins1"), "v1", old_gold, answers_old,
                             ["single", "out_of_scope"]), "date": "2026-12-01"},
             {**_written_run(_run(1, "scratch-joins1"), "v2", new_gold, answers_new,
                             ["single", "out_of_scope", "single"]), "date": "2026-12-02"}]
    table = R.written_table(old + new + mixed)
    assert R.LABEL["e5-joins1"] in table
    assert R.LABEL["bilstm-joins"] not in table and R.LABEL["scratch-joins1"] not in table
    assert "(3) |" in table and "single (2)" in table


def test_runs_on_an_earlier_corpus_are_measured_again(tmp_path):
    """A demo setting's test set id is the one its worker stores (the generator as it is
    now); a record of another id (an earlier corpus) or of none does not count as measured,
    an NLU++ record (read from files) does."""
    train, _, test, slices = C.load_setting("demo-compound", tmp_path, quick=True)
    stored = C.store_questions(tmp_path / "q.jsonl", C.questions_of(
        test, slices, {i for e in train for i in e.intents}))
    sets = C.current_test_sets(["demo-compound", "nlupp-low", "demo-compound"], tmp_path,
                               quick=True)
    assert sets == {"demo-compound": stored}
    done = {("demo-compound", "tfidf", 0): {"questions": stored},
            ("demo-compound", "tfidf", 1): {"questions": "0123456789abcdef"},
            ("demo-compound", "tfidf", 2): {},
            ("nlupp-low", "tfidf", 0): {"questions": "fedcba9876543210"}}
    current = C.of_current_test_sets(done, sets)
    assert sorted(current) == [("demo-compound", "tfidf", 0), ("nlupp-low", "tfidf", 0)]
    named = [("demo-compound", "tfidf", s) for s in range(3)] + [("nlupp-low", "tfidf", 0)]
    assert H.runs_to_measure(named, current, False, {}, C.CONFIGS) == named[1:3]
