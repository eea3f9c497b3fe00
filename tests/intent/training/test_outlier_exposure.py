"""Outlier exposure (``levers.outlier_exposure``): the training data's out-of-scope rows
train the network towards a uniform answer over the intents (Hendrycks et al. 2019)
instead of choosing the threshold. The loss against hand-computed values, a tiny
Transformer that learns to be unsure of off-topic texts, the refusals, how the other levers
go with it, and the report line."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest
import torch
from torch import nn

from headwise.intent.decision.ood import AUTO_MIN_OOS_ROWS
from headwise.intent.training.defaults import DEFAULT_OUTLIER_EXPOSURE
from headwise.intent.training.losses import (
    OUT_OF_SCOPE,
    SmoothedClassification,
    SoftTargets,
    outlier_exposure_loss,
)
from headwise.intent.training.pipeline import train_intent_classifier
from headwise.intent.training.recipe import IntentRecipe, Levers
from headwise.intent.training.result import TrainedIntent

# --- the loss ---------------------------------------------------------------------------------


def test_the_exposure_term_by_hand():
    # row 1: log p = (-2 ln 2, -ln 2, -2 ln 2) (exp sums to 1 + 2 + 1 = 4): -mean = 5 ln 2 / 3;
    # row 2: uniform logits, -mean log p = ln 3 (the least the term can be)
    logits = torch.tensor([[0.0, math.log(2.0), 0.0], [1.0, 1.0, 1.0]], dtype=torch.float64,
                          requires_grad=True)
    loss = outlier_exposure_loss(logits)
    assert loss.dtype == torch.float64
    assert float(loss.detach()) == pytest.approx((5 * math.log(2) / 3 + math.log(3)) / 2, abs=1e-12)
    loss.backward()  # d/dz of -mean_k log p_k is (p - 1/K), averaged over the 2 rows
    p = torch.softmax(logits.detach(), -1)
    assert torch.allclose(logits.grad, (p - 1 / 3) / 2, atol=1e-12)
    with pytest.raises(ValueError, match="a row"):
        outlier_exposure_loss(torch.zeros(0, 3))


class _Table(nn.Module):
    """A "model" whose logits for a row are the table's row named by its first token."""

    def __init__(self, table: torch.Tensor) -> None:
        super().__init__()
        self.table = nn.Parameter(table, requires_grad=False)

    def forward(self, input_ids, attention_mask=None):
        return {"logits": self.table[input_ids[:, 0]]}


def test_a_mixed_batch_is_the_in_scope_mean_plus_lambda_times_the_exposure_mean():
    table = torch.tensor([[2.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, math.log(2.0), 0.0]],
                         dtype=torch.float64)
    wrapper = SmoothedClassification(_Table(table), outlier_exposure=0.5)
    ids = torch.tensor([[0], [1], [2], [2]])
    labels = torch.tensor([0, 1, OUT_OF_SCOPE, OUT_OF_SCOPE])
    ce0 = math.log(1 + 2 * math.exp(-2))       # -log softmax([2, 0, 0])_0
    ce1 = math.log(1 + 2 * math.exp(-1))       # -log softmax([0, 1, 0])_1
    oe = 5 * math.log(2) / 3                   # the exposure term of [0, ln 2, 0]
    loss = wrapper(ids, labels=labels)["loss"]
    assert float(loss) == pytest.approx((ce0 + ce1) / 2 + 0.5 * oe, abs=1e-6)
    # a batch of out-of-scope rows alone: the term alone; of in-scope rows alone: as before
    assert float(wrapper(ids[2:], labels=labels[2:])["loss"]) == pytest.approx(0.5 * oe,
                                                                             abs=1e-9)
    plain = SmoothedClassification(_Table(table))
    assert float(wrapper(ids[:2], labels=labels[:2])["loss"]) == pytest.approx(
        float(plain(ids[:2], labels=labels[:2])["loss"]), abs=1e-12)
    # a teacher's rows (levers.distill="tfidf") are read for the in-scope rows only
    teacher = torch.tensor([[0.0, 1.0, 0.0], [0.0, 1.0, 0.0], [9.0, 9.0, 9.0],
                            [9.0, 9.0, 9.0]], dtype=torch.float64)
    mixed = SmoothedClassification(_Table(table), teacher_weight=0.5, outlier_exposure=0.5)
    soft0 = 0.5 * ce0 + 0.5 * math.log(math.exp(2) + 2)  # half gold 0, half teacher's 1
    assert float(mixed(ids, labels=labels, teacher=teacher)["loss"]) == pytest.approx(
        (soft0 + ce1) / 2 + 0.5 * oe, abs=1e-6)


# --- a tiny network learns to be unsure of off-topic texts -----------------------------------
_PREFIXES = ["please", "i want to", "can you", "help me", "quickly", "today i need to"]
_TOPICS = {
    "card_lost": ["report my lost card", "block my stolen card", "freeze the missing card",
                  "cancel the card i lost"],
    "transfer": ["send money to john", "transfer cash to savings", "wire funds abroad",
                 "pay money to my friend"],
    "balance": ["check my balance", "see how much money is left", "show the account balance",
                "know my current balance"],
}
_OFF_TOPIC = ["watch the football score", "order a pizza tonight", "play a song by adele",
              "find a good movie", "hear a funny joke", "plan a beach holiday",
              "feed the hungry cat", "cook some pasta", "fix my bike tyre",
              "read a mystery novel", "learn the guitar", "book a dentist visit"]
TINY = {"architecture": {"type": "transformer", "d_model": 32, "num_layers": 1,
                         "num_heads": 4, "d_ff": 64, "vocab_size": 300, "dropout": 0.0,
                         "attention_dropout": 0.0},
        "train": {"epochs": 8, "batch_size": 16, "lr": 1e-2, "progress": False, "seed": 0},
        "decision": {"ood_detector": "max_prob"}}


def _data():
    rng = random.Random(0)
    rows = [(f"{p} {t}", k) for k, ts in _TOPICS.items() for t in ts for p in _PREFIXES]
    rng.shuffle(rows)
    held = rows[:18]  # unseen in-scope texts (valid), the rest trains
    off = [f"{p} {t}" for t in _OFF_TOPIC for p in _PREFIXES]
    rng.shuffle(off)
    return rows[18:], held, off[:36], off[36:]


def _recipe(valid_fraction: float = 0.1, **levers) -> IntentRecipe:
    return IntentRecipe.from_dict({**TINY, "levers": levers, "valid_fraction": valid_fraction})


def _top_probability(clf, texts) -> np.ndarray:
    z = clf.logits(texts)
    p = np.exp(z - z.max(1, keepdims=True))
    return (p / p.sum(1, keepdims=True)).max(1)


def test_exposure_makes_held_out_off_topic_texts_unsure_and_keeps_the_intents(tmp_path):
    train, valid, off_train, off_held = _data()
    rows = train + [(t, "oos") for t in off_train]
    # no validation rows: every epoch runs and the last weights are kept (early stopping on
    # in-scope accuracy would keep the first epoch that gets them all right, an unsure one)
    plain, exposed = (train_intent_classifier(rows, None, _recipe(0.0, outlier_exposure=w),
                                              out_dir=tmp_path / str(w)).classifier
                      for w in (0.0, 0.5))
    texts, gold = [t for t, _ in valid], [k for _, k in valid]
    for clf in (plain, exposed):  # in-scope accuracy stays
        pred = [clf.labels[i] for i in clf.logits(texts).argmax(1)]
        assert np.mean([p == g for p, g in zip(pred, gold, strict=True)]) >= 0.9
    p_plain, p_exposed = _top_probability(plain, off_held), _top_probability(exposed, off_held)
    # held-out off-topic texts: near uniform (1/3) under exposure, confident without
    assert p_exposed.mean() < 0.5 and p_plain.mean() > p_exposed.mean() + 0.25, (
        p_exposed.mean(), p_plain.mean())
    # and the top probability tells them apart from every in-scope text
    assert p_exposed.max() < _top_probability(exposed, texts).min()


def test_the_rows_are_trained_on_and_choose_nothing_and_the_report_says_so(tmp_path):
    train, valid, off_train, _ = _data()
    rows = train + [(t, "oos") for t in off_train]
    out = {}
    for w in (0.0, 0.5):
        lines: list[str] = []
        recipe = _recipe(outlier_exposure=w).replace(train__epochs=1)
        out[w] = (train_intent_classifier(rows, valid, recipe, out_dir=tmp_path / str(w),
                                          report=lines.append), lines)
    (plain, plain_lines), (exposed, lines) = out[0.0], out[0.5]
    assert plain.classifier.info["train_oos"] == {"rows": 36, "labels": ["oos"], "used": True,
                                                  "outlier_exposure": 0.0, "auto": False,
                                                  "held_out": 0}
    assert plain.threshold.n_oos == 36
    assert exposed.classifier.info["train_oos"] == {"rows": 36, "labels": ["oos"],
                                                    "used": False, "outlier_exposure": 0.5,
                                                    "auto": False, "held_out": 0}
    # the validation rows are the given ones alone: no out-of-scope row chose the threshold
    assert exposed.threshold.n_oos == 0
    assert exposed.classifier.info["valid_examples"] == len(valid)
    assert exposed.classifier.info["recipe"]["levers"]["outlier_exposure"] == 0.5
    assert "36 out-of-scope rows (label oos) trained on by outlier exposure (weight 0.5: a " \
           "uniform answer over the intents), so they choose neither the out-of-scope " \
           "threshold nor the detector (the model has seen them); 3 intents" in lines
    assert any(line.startswith("36 out-of-scope rows (label oos) used for the out-of-scope "
                               "threshold and detector") for line in plain_lines)


# --- the default: the architecture's measured weight, where it was measured ------------------
@pytest.mark.parametrize("arch", ["transformer", "bilstm"])
def test_the_default_trains_on_the_rows_when_validation_holds_out_of_scope_rows_too(
        tmp_path, arch):
    train, valid, off_train, off_held = _data()
    rows = train + [(t, "oos") for t in off_train]
    fields = {**TINY, "train": {**TINY["train"], "epochs": 1}}
    if arch == "bilstm":
        fields["architecture"] = {"type": "bilstm", "lstm_embed_dim": 16, "lstm_hidden": 16,
                                  "vocab_size": 300}
    recipe = IntentRecipe.from_dict(fields)
    assert recipe.levers.outlier_exposure is None
    lines: list[str] = []
    # validation with out-of-scope rows (the measured setting): the architecture's weight
    run = train_intent_classifier(rows, valid + [(t, "oos") for t in off_held[:6]], recipe,
                                  out_dir=tmp_path / "both", report=lines.append)
    weight = DEFAULT_OUTLIER_EXPOSURE[arch]
    assert weight > 0
    assert run.classifier.info["train_oos"] == {"rows": 36, "labels": ["oos"], "used": False,
                                                "outlier_exposure": weight, "auto": True,
                                                "held_out": 0}
    assert run.threshold.n_oos == 6  # the validation's own rows chose it, not the trained ones
    assert any(f"trained on by outlier exposure (weight {weight:g} (this architecture's "
               f"default: BENCHMARKS demo:ood)" in line for line in lines)
    # the recipe saved keeps the default: a warm start decides again on its own data
    assert run.classifier.info["recipe"]["levers"]["outlier_exposure"] is None
    # a validation file without them: the training rows choose the threshold
    run = train_intent_classifier(rows, valid, recipe, out_dir=tmp_path / "given")
    assert run.classifier.info["train_oos"]["outlier_exposure"] == 0.0
    assert run.classifier.info["train_oos"]["used"] and run.threshold.n_oos == 36
    # no validation file: the split holds a seeded share of them out, the rest train; the
    # share is valid_fraction (9 of 36 here), at least the 20 rows auto compares detectors
    # on, up to half (18)
    assert AUTO_MIN_OOS_ROWS == 20
    lines = []
    run = train_intent_classifier(rows, None, recipe.replace(valid_fraction=0.25),
                                  out_dir=tmp_path / "split", report=lines.append)
    assert run.classifier.info["train_oos"] == {"rows": 36, "labels": ["oos"], "used": False,
                                                "outlier_exposure": weight, "auto": True,
                                                "held_out": 18}
    assert run.threshold.n_oos == 18
    many = rows + [(t, "oos") for t in off_held]  # 72 rows: 0.25 is 18, at least 20
    run = train_intent_classifier(many, None, recipe.replace(valid_fraction=0.25),
                                  out_dir=tmp_path / "many")
    assert run.classifier.info["train_oos"]["held_out"] == 20 and run.threshold.n_oos == 20
    run = train_intent_classifier(many, None, recipe.replace(valid_fraction=0.4),
                                  out_dir=tmp_path / "more")  # 0.4 of 72: 29 (28.8 up)
    assert run.classifier.info["train_oos"]["held_out"] == 29
    assert any(line.startswith("36 out-of-scope rows (label oos): 18 held out with the "
                               "validation split, to choose the out-of-scope threshold and "
                               "detector; 18 "
                               "trained on by outlier exposure") for line in lines), lines


def test_the_default_is_off_for_tfidf_a_teacher_and_data_without_such_rows(tmp_path):
    train, valid, off_train, off_held = _data()
    rows = train + [(t, "oos") for t in off_train]
    valid_oos = valid + [(t, "oos") for t in off_held[:6]]
    assert DEFAULT_OUTLIER_EXPOSURE["tfidf"] == 0.0
    for weight in (None, 0.0):  # 0 is off, which a TF-IDF recipe may say
        tfidf = IntentRecipe.from_dict({"architecture": {"type": "tfidf"},
                                        "levers": {"outlier_exposure": weight}})
        run = train_intent_classifier(rows, valid_oos, tfidf, out_dir=tmp_path / f"t{weight}")
        assert run.classifier.info["train_oos"]["outlier_exposure"] == 0.0
        assert run.classifier.info["train_oos"]["used"]
    short = _recipe().replace(train__epochs=1)
    run = train_intent_classifier(train, valid_oos, short, out_dir=tmp_path / "none")
    assert run.classifier.info["train_oos"]["outlier_exposure"] == 0.0
    labels = sorted(_TOPICS)
    texts = [t for t, _ in train]
    soft = SoftTargets(labels=labels, texts=texts, logits=np.zeros((len(texts), 3)))
    run = train_intent_classifier(rows, valid_oos, short, out_dir=tmp_path / "teacher",
                                  soft_targets=soft)
    assert run.classifier.info["train_oos"]["outlier_exposure"] == 0.0


# --- refusals ----------------------------------------------------------------------------------
def test_refusals_name_the_reason(tmp_path):
    with pytest.raises(ValueError, match=r"levers.outlier_exposure is a loss weight"):
        Levers(outlier_exposure=-0.5)
    with pytest.raises(ValueError, match=r"levers.outlier_exposure is a loss weight"):
        Levers(outlier_exposure=float("inf"))
    with pytest.raises(ValueError, match=r"levers.outlier_exposure must be a number"):
        IntentRecipe.from_dict({"levers": {"outlier_exposure": "0.5"}})
    with pytest.raises(ValueError, match=r"levers.outlier_exposure does not apply to the "
                                         r"tfidf architecture"):
        IntentRecipe.from_dict({"architecture": {"type": "tfidf"},
                                "levers": {"outlier_exposure": 0.5}})
    with pytest.raises(ValueError, match=r"levers.outlier_exposure is single-label "
                                         r"training's: a multi_label row out of scope is "
                                         r"already a training row"):
        IntentRecipe.from_dict({"task": {"type": "multi_label"},
                                "levers": {"outlier_exposure": 0.5}})
    train, valid, _, _ = _data()
    with pytest.raises(ValueError, match=r"no row is labelled out of scope \(the labels read "
                                         r"so: oos, out_of_scope, .*, 其他; a data set's own "
                                         r"label is decision.oos_labels\)"):
        train_intent_classifier(train, valid, IntentRecipe.from_dict(
            {**TINY, "levers": {"outlier_exposure": 0.5},
             "decision": {"oos_labels": "其他"}}), out_dir=tmp_path / "none")
    # a teacher's soft targets: the student learns the teacher's distribution on every row
    labels = sorted(_TOPICS)
    texts = [t for t, _ in train]
    soft = SoftTargets(labels=labels, texts=texts, logits=np.zeros((len(texts), 3)))
    with pytest.raises(ValueError, match=r"levers.outlier_exposure does not combine with a "
                                         r"teacher's soft targets"):
        train_intent_classifier(train, valid, _recipe(outlier_exposure=0.5),
                                out_dir=tmp_path / "t", soft_targets=soft)
    with pytest.raises(ValueError, match="outlier exposure does not combine with distillation"):
        SmoothedClassification(nn.Linear(2, 2), outlier_exposure=0.5, distill_temperature=2.0)
    with pytest.raises(ValueError, match="outlier_exposure must be a number >= 0"):
        SmoothedClassification(nn.Linear(2, 2), outlier_exposure=-1.0)


# --- with the other levers ---------------------------------------------------------------------
def test_label_cleaning_tfidf_distillation_and_balanced_weights_go_with_it(tmp_path):
    train, valid, off_train, _ = _data()
    recipe = IntentRecipe.from_dict({
        **TINY, "train": {**TINY["train"], "epochs": 2},
        "levers": {"outlier_exposure": 0.5, "label_cleaning": "drop", "distill": "tfidf",
                   "class_weighting": "balanced"}})
    run = train_intent_classifier(train + [(t, "oos") for t in off_train], valid, recipe,
                                  out_dir=tmp_path / "m")
    info = run.classifier.info
    assert info["train_oos"]["outlier_exposure"] == 0.5 and not info["train_oos"]["used"]
    assert info["label_cleaning"] is not None and info["distill"]["teacher"] == "tfidf"
    # cleaning reads the in-scope rows only; the out-of-scope rows are all trained on
    assert info["label_cleaning"]["total"] == len(train) and info["train_oos"]["rows"] == 36


def test_a_warm_start_continues_with_the_new_datas_out_of_scope_rows(tmp_path):
    train, valid, off_train, off_held = _data()
    parent = train_intent_classifier(train, valid, IntentRecipe.from_dict(
        {**TINY, "train": {**TINY["train"], "epochs": 2}}), out_dir=tmp_path / "parent")
    from headwise.intent.training.warm_start import WarmStart, warm_recipe

    def child(weight: float, name: str, lines: list[str]) -> TrainedIntent:
        recipe = IntentRecipe.from_dict(warm_recipe(parent.directory, {
            "levers": {"outlier_exposure": weight}, "train": {"epochs": 6}}))
        return train_intent_classifier(train + [(t, "oos") for t in off_train], valid, recipe,
                                       out_dir=tmp_path / name, report=lines.append,
                                       init_from=WarmStart(parent.directory))

    lines: list[str] = []
    exposed, plain = child(0.5, "child", lines), child(0.0, "plain", [])
    info = exposed.classifier.info
    assert info["lineage"]["parent"] and info["train_oos"]["outlier_exposure"] == 0.5
    assert any("trained on by outlier exposure" in line for line in lines)
    # the grown vocabulary reads the out-of-scope texts' tokens too: the same warm start
    # without the exposure is more confident on held-out off-topic texts
    assert _top_probability(exposed.classifier, off_held).mean() < \
        _top_probability(plain.classifier, off_held).mean()
