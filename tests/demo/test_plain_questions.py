"""Plain questions answered right: every intent's core wordings are learnable from the demo's
training split (issue 37, item 1: 我的信用卡丢了 was answered out of scope when the plainest
way to say an intent was held out with its template family).

``plain_questions.jsonl`` is written by hand for this test (not generated, not copied from
the templates): several plain questions per intent and a few out-of-scope ones."""

from __future__ import annotations

import dataclasses
import json
import random
from collections import Counter
from pathlib import Path

import pytest

from headwise.demo import DEMO_INTENTS, generate_demo_corpus
from headwise.demo.families import assign_families, catalogue
from headwise.demo.runner import DemoSettings, demo_recipes
from headwise.intent import train_intent_classifier
from headwise.text.labels import OOS_LABEL

PLAIN = [json.loads(line) for line in
         (Path(__file__).parent / "plain_questions.jsonl").read_text("utf-8").splitlines()]
#: the corpus the README's model trains on (the demo's full one, ``DemoSettings().per_intent``)
#: and the quick demo's small Transformer (width 64, one layer), 5 epochs. On the quick
#: demo's quarter corpus an intent has about 7 rows of its own wordings, and whether 我的信用卡丢了
#: is among the answers right turned on which rows a change of the corpus happened to draw
#: (one row with 丢 for report_card_loss at seed 0).
SETTINGS = dataclasses.replace(DemoSettings.quick(), per_intent=DemoSettings().per_intent,
                               epochs=5)
#: share of the plain questions each model must answer right (out-of-scope ones rejected).
#: Measured, seed 0, fp32, on the corpus with the minimal pairs' negation on the request's
#: own verb (issue 37 item 2): TF-IDF 84 of 89, Transformer 88 of 89 (10 epochs: 86). The
#: quick demo's quarter corpus and 10 epochs before that change: TF-IDF 81, Transformer 81;
#: on the corpus before the core families were kept in training: TF-IDF 74, Transformer 71
#: (both answered 我的信用卡丢了 cancel_card).
BAR = 0.85


def test_the_plain_questions_cover_every_intent():
    counts = Counter(q["label"] for q in PLAIN)
    assert set(counts) == set(DEMO_INTENTS) | {OOS_LABEL}
    assert min(counts[i] for i in DEMO_INTENTS) >= 3 and counts[OOS_LABEL] >= 3
    assert len({q["text"] for q in PLAIN}) == len(PLAIN)


@pytest.mark.parametrize("seed", [0, 1, 2, 7])
def test_every_intents_core_family_is_in_training(seed):
    templates = catalogue()
    split = assign_families(templates, random.Random(seed))
    core = {t.family for t in templates if t.core}
    assert core == {f"{intent}.0" for intent in DEMO_INTENTS}
    assert all(split[f] == "train" for f in core)
    # the other families of each intent are still held out: one to valid, one to test
    for intent in DEMO_INTENTS:
        own = Counter(s for f, s in split.items()
                      if f.rpartition(".")[0] == intent and f not in core)
        assert own["test"] == 1 and own["valid"] == 1, intent
    corpus = generate_demo_corpus(seed=seed, per_intent=30)
    trained = {ex.family for ex in corpus["train"]}
    assert core <= trained


@pytest.fixture(scope="module")
def answers(tmp_path_factory) -> dict[str, list[str]]:
    """Each model's answer to each plain question (``oos`` when rejected)."""
    corpus = generate_demo_corpus(seed=SETTINGS.seed, per_intent=SETTINGS.per_intent)
    train = [(e.text, e.label) for e in corpus["train"]]
    valid = [(e.text, e.label) for e in corpus["valid"]]
    # right answers are not remembered texts: no plain question is a training text
    assert not {q["text"] for q in PLAIN} & {t for t, _ in train}
    out = {}
    for name in ("tfidf", "transformer"):
        recipe = demo_recipes(SETTINGS)[name]
        # fp32 named here: a module fixture runs before conftest's pin of "auto"
        fp32 = {"precision": "fp32"} if name != "tfidf" else {}
        recipe = dataclasses.replace(recipe, train=dataclasses.replace(
            recipe.train, progress=False, **fp32))
        clf = train_intent_classifier(train, valid, recipe,
                                      out_dir=tmp_path_factory.mktemp(name)).classifier
        out[name] = [OOS_LABEL if p.out_of_scope else p.intent
                     for p in clf.predict([q["text"] for q in PLAIN])]
    return out


@pytest.mark.parametrize("model", ["tfidf", "transformer"])
def test_the_demos_models_answer_plain_questions_right(answers, model):
    got = answers[model]
    wrong = [(q["text"], q["label"], a) for q, a in zip(PLAIN, got, strict=True)
             if a != q["label"]]
    right = len(PLAIN) - len(wrong)
    assert right >= BAR * len(PLAIN), (f"{model}: {right} of {len(PLAIN)} right", wrong)
    # the README's first question
    assert got[[q["text"] for q in PLAIN].index("我的信用卡丢了")] == "report_card_loss", wrong
