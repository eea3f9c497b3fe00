"""EnsembleClassifier: the mean of its members' calibrated probabilities."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from answers import intent_of

from headwise.intent import IntentClassifier, evaluate
from headwise.intent.decision.temperature import calibrated_probs
from headwise.intent.ensemble import EnsembleClassifier
from headwise.models import EncoderClassifier, preset
from headwise.text import train_tokenizer

TEXTS = ["i lost my card", "send money to my friend", "where is my refund",
         "what is my balance", "my card was stolen yesterday", "refund my order please"]
INTENTS = ["balance", "card", "refund", "transfer"]


@pytest.fixture(scope="module")
def members():
    tok = train_tokenizer(TEXTS * 3, kind="wordpiece", vocab_size=120)
    out = []
    for seed, (temp, thr) in enumerate([(1.0, 0.2), (1.7, 0.4), (0.8, 0.3)]):
        torch.manual_seed(seed)
        model = EncoderClassifier(preset("tiny", vocab_size=tok.vocab_size,
                                         num_labels=len(INTENTS)))
        out.append(IntentClassifier(model, tok, INTENTS, temperature=temp, threshold=thr,
                                    max_length=16))
    return out


def test_probabilities_are_the_members_mean(members):
    ens = EnsembleClassifier(members)
    ref = np.mean([calibrated_probs(m.logits(TEXTS), m.temperature) for m in members], 0)
    np.testing.assert_allclose(ens.predict_proba(TEXTS), ref, rtol=0, atol=1e-12)
    assert ens.threshold == pytest.approx(0.3)
    answers = ens.predict(TEXTS, top_k=2, threshold=0.0)
    assert [a.intent for a in answers] == [INTENTS[j] for j in ref.argmax(1)]
    assert all(a.top_k[0][1] == pytest.approx(ref[i].max()) for i, a in enumerate(answers))
    oos = ens.predict(TEXTS, threshold=1.0)
    assert all(a.out_of_scope for a in oos)


def test_save_load_round_trip_and_evaluation(members, tmp_path):
    ens = EnsembleClassifier(members[:2], threshold=0.25, info={"seeds": [0, 1]})
    back = EnsembleClassifier.load(ens.save(tmp_path / "ens"))
    np.testing.assert_allclose(back.predict_proba(TEXTS), ens.predict_proba(TEXTS), atol=1e-6)
    assert back.threshold == 0.25 and back.info == {"seeds": [0, 1]}
    gold = ["card", "transfer", "refund", "balance", "card", "refund"]
    report = evaluate(ens, TEXTS, gold)
    pred = [INTENTS[j] for j in ens.predict_proba(TEXTS).argmax(1)]
    hits = [p == g for p, g in zip(pred, gold, strict=True)]
    assert report["accuracy"] == pytest.approx(np.mean(hits))


def test_ensemble_errors(members, tmp_path):
    with pytest.raises(ValueError, match="at least two"):
        EnsembleClassifier(members[:1])
    other = IntentClassifier(members[0].model, members[0].tokenizer, list(reversed(INTENTS)))
    with pytest.raises(ValueError, match="other intents"):
        EnsembleClassifier([members[0], other])
    with pytest.raises(ValueError, match="threshold"):
        EnsembleClassifier(members, threshold=1.5)
    with pytest.raises(FileNotFoundError, match="ensemble.json"):
        EnsembleClassifier.load(tmp_path)


def test_predict_and_eval_commands_take_a_saved_ensemble(members, tmp_path, capsys):
    import json

    from headwise.cli import main

    ens = EnsembleClassifier(members, threshold=0.0)
    path = ens.save(tmp_path / "ens")
    assert main(["predict", str(path), TEXTS[0], TEXTS[1], "--json", "--top-k", "2"]) == 0
    lines = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    assert [intent_of(x) for x in lines] == [a.intent for a in ens.predict(TEXTS[:2])]
    data = tmp_path / "test.csv"
    data.write_text("text,label\n" + "".join(f"{t},card\n" for t in TEXTS), encoding="utf-8")
    assert main(["eval", str(path), "--data", str(data), "--json"]) == 0
    report = json.loads(capsys.readouterr().out.splitlines()[-1])
    pred = [INTENTS[j] for j in ens.predict_proba(TEXTS).argmax(1)]
    assert report["accuracy"] == pytest.approx(np.mean([p == "card" for p in pred]))


def test_ensemble_command_warns_when_below_its_best_member(members, tmp_path, capsys):
    from headwise.cli import main

    dirs = [str(m.save(tmp_path / f"m{i}")) for i, m in enumerate(members)]
    texts = TEXTS + ["my balance please", "card blocked", "money sent twice",
                     "refund still missing", "how much is left", "transfer failed"]
    # labelled with member 0's answers (its threshold rejects nothing here): it scores
    # 100 %; the ensemble (threshold 0) disagrees with it somewhere
    assert all(not a.out_of_scope for a in members[0].predict(texts))
    first = [a.intent for a in members[0].predict(texts)]
    ens = EnsembleClassifier(members, threshold=0.0)
    mean = [INTENTS[j] for j in ens.predict_proba(texts).argmax(1)]
    assert mean != first  # the premise
    acc = np.mean([a == b for a, b in zip(mean, first, strict=True)])
    data = tmp_path / "first.csv"
    data.write_text("text,label\n" + "".join(f"{t},{k}\n" for t, k in zip(
        texts, first, strict=True)), encoding="utf-8")
    assert main(["ensemble", str(tmp_path / "ens"), *dirs, "--data", str(data),
                 "--threshold", "0"]) == 0
    err = capsys.readouterr().err
    assert "warning: the ensemble scores" in err
    assert f"{100 * acc:.2f}% accuracy" in err
    assert f"below its best member {dirs[0]} alone (100.00%" in err
    # labelled with the ensemble's own answers: it is not below any member, no warning
    data.write_text("text,label\n" + "".join(f"{t},{k}\n" for t, k in zip(
        texts, mean, strict=True)), encoding="utf-8")
    assert main(["ensemble", str(tmp_path / "ens2"), *dirs, "--data", str(data),
                 "--threshold", "0", "--json"]) == 0
    assert "warning" not in capsys.readouterr().err
