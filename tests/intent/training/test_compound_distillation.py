"""Distillation with a compound teacher: a compound student trained on the teacher's
per-intent sigmoid probabilities (mixed with the gold intents by levers.distill_weight)
and the gold slot tags, through ``distill`` and ``headwise distill``."""

from __future__ import annotations

import json
import random

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from tiny_corpus import write_annotated

from headwise.cli import main
from headwise.intent.compound.classifier import CompoundClassifier
from headwise.intent.compound.thresholds import span_f1
from headwise.intent.training.compound import distilled_targets
from headwise.intent.training.distillation import distill
from headwise.intent.training.losses import multilabel_intent_loss
from headwise.intent.training.pipeline import train_intent_classifier
from headwise.intent.training.recipe import IntentRecipe
from headwise.intent.training.teacher import TARGETS_FILE, read_soft_targets
from headwise.text.dataset import Example

#: the student: a Transformer smaller than the teacher (no number-aware heads)
STUDENT = {"architecture": {"tokenizer": "wordpiece", "vocab_size": 120, "max_length": 24,
                            "d_model": 32, "num_layers": 1, "num_heads": 4, "d_ff": 64,
                            "dropout": 0.0, "attention_dropout": 0.0},
           "train": {"epochs": 20, "batch_size": 8, "lr": 3e-3, "patience": None,
                     "progress": False}}
#: texts none of the models trained on: amounts and a phrasing they never saw
NEW = ["i was charged twice for 40 pounds refund it", "send 65 pounds to my sister",
       "refund the 120 pounds please", "why was i charged 35 pounds",
       "charged twice for 10 pounds so refund it", "what is the weather like"]


def test_distilled_targets_mix_gold_and_teacher_and_the_loss_is_linear_in_them():
    gold = np.array([[1.0, 0.0, 0.0], [0.0, 0.0, 1.0]])
    teacher = np.array([[0.9, 0.2, 0.05], [0.1, 0.4, 0.7]])
    got = distilled_targets(gold, teacher, 0.25)
    np.testing.assert_allclose(got, [[0.975, 0.05, 0.0125], [0.025, 0.1, 0.925]])
    np.testing.assert_array_equal(distilled_targets(gold, teacher, 0.0), gold)
    np.testing.assert_array_equal(distilled_targets(gold, teacher, 1.0), teacher)
    # BCE is linear in its target: the mix's loss is the weighted sum of the two losses
    z = torch.tensor([[2.0, -1.0, 0.5], [-0.3, 0.1, 1.5]], dtype=torch.float64)
    mixed = multilabel_intent_loss(z, torch.from_numpy(got))
    want = sum(w * F.binary_cross_entropy_with_logits(z, torch.from_numpy(t),
                                                      reduction="sum") / 2
               for w, t in ((0.75, gold), (0.25, teacher)))
    torch.testing.assert_close(mixed.double(), want, rtol=1e-6, atol=1e-6)
    for bad, match in (((gold, teacher[:1], 0.5), "shape"), ((gold, teacher, 1.5), "weight"),
                       ((gold, teacher * 2, 0.5), r"\[0, 1\]")):
        with pytest.raises(ValueError, match=match):
            distilled_targets(*bad)


def _shuffled(corpus: list[Example]) -> list[Example]:
    """The corpus with its intent sets dealt to other texts (the slots stay the texts'
    own): gold intents that no longer say what a text asks."""
    intents = [e.intents for e in corpus]
    random.Random(0).shuffle(intents)
    return [Example(e.text, i, e.slots, e.line)
            for e, i in zip(corpus, intents, strict=True)]


def _gap(student: CompoundClassifier, teacher: CompoundClassifier, texts: list[str]) -> float:
    """Mean absolute difference of the two models' per-intent probabilities."""
    return float(np.abs(student.analyse(texts)[0] - teacher.analyse(texts)[0]).mean())


@pytest.fixture(scope="module")
def students(trained_compound_dir, compound_corpus, tmp_path_factory):
    """The same student on the same rows, whose gold intents are shuffled: distilled from
    the teacher (weight 1: the teacher's probabilities alone) and trained without it."""
    root = tmp_path_factory.mktemp("compound-distill")
    rows = _shuffled(compound_corpus)
    notes: list[str] = []
    distilled = distill(trained_compound_dir, rows, compound_corpus, out_dir=root / "kd",
                        recipe={**STUDENT, "levers": {"distill_weight": 1.0}},
                        unlabelled=NEW[:2], report=notes.append)
    plain = train_intent_classifier(rows, compound_corpus, IntentRecipe.from_dict(
        {**STUDENT, "task": {"type": "multi_label"}}), out_dir=root / "plain")
    return root, distilled, plain, notes


def test_a_distilled_compound_student_learns_the_teacher(students, trained_compound_dir,
                                                         compound_corpus):
    root, distilled, plain, notes = students
    teacher = CompoundClassifier.load(trained_compound_dir)
    student = CompoundClassifier.load(root / "kd")
    assert student.intents == teacher.intents
    texts = [e.text for e in compound_corpus] + NEW
    kd, alone = _gap(student, teacher, texts), _gap(plain.classifier, teacher, texts)
    # the distilled student is close to the teacher; the same student on the same rows
    # without it learnt the shuffled intents and is far from it
    assert kd < 0.1 and alone > 2 * kd, (kd, alone)

    def agreement(clf: CompoundClassifier) -> float:  # same intent sets at the teacher's
        ours = clf.predict(texts, thresholds=teacher.thresholds)  # thresholds
        return float(np.mean([{k for k, _ in a.intents} == {k for k, _ in t.intents}
                              for a, t in zip(ours, teacher.predict(texts), strict=True)]))

    assert agreement(student) > agreement(plain.classifier) + 0.3
    answers = student.predict(texts)
    # the slot tagger learnt the gold tags
    spans = span_f1([a.slots for a in answers[:len(compound_corpus)]],
                    [e.slots for e in compound_corpus])
    assert spans["f1"] >= 0.8, spans
    info = student.info["distill"]
    assert info["weight"] == 1.0 and info["teacher"]["kind"] == "CompoundClassifier"
    assert info["teacher"]["intents"] == len(teacher.intents) and info["teacher"]["sha256"]
    assert info["unlabelled"] == 2 and info["extra_rows"] == 2
    assert info["labelled_rows"] == len(compound_corpus) and info["joined_rows"] > 0
    assert student.info["recipe"]["levers"]["distill"] == "teacher"
    assert student.info["recipe"]["task"]["type"] == "multi_label"
    assert any(n.startswith("teacher: ") for n in notes)
    # the cache holds the teacher's per-intent probabilities (as log-probabilities)
    meta, logits = read_soft_targets(root / "kd")
    assert meta["labels"] == teacher.intents
    np.testing.assert_allclose(np.exp(logits), teacher.analyse(meta["texts"])[0], atol=1e-6)


def test_the_command_distils_a_compound_teacher(trained_compound_dir, compound_corpus,
                                                tmp_path, capsys):
    data = write_annotated(tmp_path / "train.jsonl", compound_corpus)
    cfg = tmp_path / "student.json"
    cfg.write_text(json.dumps({"architecture": {"max_length": 24, "lstm_embed_dim": 16,
                                                "lstm_hidden": 16, "tokenizer": "wordpiece",
                                                "vocab_size": 120},
                               "train": {"epochs": 2, "batch_size": 8}}))
    out = tmp_path / "student"
    base = ["distill", str(trained_compound_dir), "--data", str(data), "--out", str(out),
            "--config", str(cfg), "--student", "bilstm", "--quiet"]
    assert main(base + ["--set", "levers.distill_weight=0.7"]) == 0
    text = capsys.readouterr().out
    assert "distilled bilstm (intents + slots)" in text and "teacher weight 0.7" in text
    assert "validation: intent micro-F1" in text and (out / TARGETS_FILE).is_file()
    summary = json.loads((out / "train_summary.json").read_text())
    assert summary["distill"]["weight"] == 0.7 and summary["distill"]["valid_split"] == 0.1
    student = CompoundClassifier.load(out)
    assert type(student.model).__name__ == "BiLSTMJointModel"
    assert student.slot_tags == CompoundClassifier.load(trained_compound_dir).slot_tags
    for extra, message in ((["--alpha", "0.3"], "alpha (--alpha) is a single-label teacher's"),
                           (["--temperature", "3"], "temperature (--temperature) is a "
                                                    "single-label teacher's"),
                           (["--student", "truncate:1"], "a compound teacher's student is "
                                                         "transformer or bilstm"),
                           (["--set", "task.select_on=macro_f1"],
                            "task.select_on is a single-label task's")):
        assert main(base + extra) == 1, extra
        assert message in capsys.readouterr().err, extra


def test_the_teacher_lever_needs_a_teacher(compound_corpus, tmp_path):
    recipe = IntentRecipe.from_dict({**STUDENT, "task": {"type": "multi_label"},
                                     "levers": {"distill": "teacher"}})
    with pytest.raises(ValueError, match="run `headwise distill TEACHER`"):
        train_intent_classifier(compound_corpus, None, recipe, out_dir=tmp_path / "x")


def test_a_joined_row_takes_the_larger_of_its_parts_teacher_probabilities():
    from headwise.intent.training.compound import CompoundData, distilled_rows, encode_rows
    from headwise.intent.training.joins import join_two
    from headwise.intent.training.losses import SoftTargets
    from headwise.text.char_level import train_tokenizer

    train = [Example("查余额", ("balance",), (), 1), Example("转账", ("transfer",), (), 2),
             Example("挂失", ("loss",), (), 3)]
    intents = ["balance", "transfer", "loss"]
    teacher = np.array([[0.8, 0.1, 0.3], [0.2, 0.6, 0.1], [0.1, 0.2, 0.9]])
    soft = SoftTargets(labels=intents, texts=[e.text for e in train] + ["天气"],
                       logits=np.log(np.vstack([teacher, [[0.05, 0.05, 0.05]]])),
                       extra=[("天气", None)])
    pairs = [(0, 1, "，"), (2, 0, "。")]
    joined = [join_two(train[i], train[j], c) for i, j, c in pairs]
    tokenizer = train_tokenizer([e.text for e in train + joined] + ["天气"], kind="char")
    data = CompoundData(train=train, valid=[], intents=intents, slot_names=[], tags=None)
    rows = encode_rows(tokenizer, train + joined, intents, {}, 16)
    out, info = distilled_rows(rows, tokenizer, data, soft, 0.25, {}, 16, pairs)
    got = np.array([r["labels"] for r in out])
    gold = np.array([[1, 0, 0], [0, 1, 0], [0, 0, 1], [1, 1, 0], [1, 0, 1]], dtype=float)
    # hand-computed: each joined row's teacher is the per-intent max of its two parts'
    parts = np.vstack([teacher, [[0.8, 0.6, 0.3]], [[0.8, 0.2, 0.9]]])
    np.testing.assert_allclose(got[:5], 0.75 * gold + 0.25 * parts)
    np.testing.assert_allclose(got[5], [0.05, 0.05, 0.05])  # the extra row: teacher alone
    assert (info["labelled_rows"], info["joined_rows"], info["extra_rows"]) == (3, 2, 1)
    with pytest.raises(ValueError, match="joined pairs"):
        distilled_rows(rows[:4], tokenizer, data, soft, 0.25, {}, 16, pairs)
