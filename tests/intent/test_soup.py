"""uniform_soup: several fine-tuned classifiers' weights averaged into one model."""

from __future__ import annotations

import copy
import json
import math

import numpy as np
import pytest
import torch

from headwise.intent import IntentClassifier
from headwise.intent.soup import greedy_soup, uniform_soup
from headwise.models import EncoderClassifier, preset
from headwise.text import train_tokenizer

TEXTS = ["i lost my card", "send money to my friend", "where is my refund",
         "what is my balance", "my card was stolen yesterday", "refund my order please"]
INTENTS = ["balance", "card", "refund", "transfer"]


@pytest.fixture(scope="module")
def tok():
    return train_tokenizer(TEXTS * 3, kind="wordpiece", vocab_size=120)


def _member(tok, seed: int, temperature: float = 1.0, threshold: float = 0.0
            ) -> IntentClassifier:
    torch.manual_seed(seed)
    model = EncoderClassifier(preset("tiny", vocab_size=tok.vocab_size, num_labels=len(INTENTS)))
    return IntentClassifier(model, tok, INTENTS, temperature=temperature, threshold=threshold,
                            max_length=16)


def _head_variants(tok, n: int) -> list[IntentClassifier]:
    """Members sharing one encoder, with different classifier heads (as after LP-FT runs
    that moved only the head)."""
    base = _member(tok, 0)
    out = []
    for i in range(n):
        m = copy.deepcopy(base)
        g = torch.Generator().manual_seed(100 + i)
        with torch.no_grad():
            m.model.classifier.weight.copy_(torch.randn(m.model.classifier.weight.shape,
                                                        generator=g))
            m.model.classifier.bias.copy_(torch.randn(m.model.classifier.bias.shape,
                                                      generator=g))
        out.append(m)
    return out


def test_logits_are_linear_in_the_head(tok):
    # with a shared encoder, logits are linear in the head's weights: the soup's logits
    # must be the mean of the members' logits
    members = _head_variants(tok, 3)
    soup = uniform_soup(members)
    ref = np.mean([m.logits(TEXTS) for m in members], axis=0)
    np.testing.assert_allclose(soup.logits(TEXTS), ref, rtol=0, atol=1e-5)


def test_every_weight_is_the_float64_mean(tok):
    members = [_member(tok, s, t, h) for s, t, h in [(0, 0.5, 0.2), (1, 2.0, 0.4)]]
    soup = uniform_soup(members, info={"run": 7})
    got = soup.model.state_dict()
    for name, value in members[0].model.state_dict().items():
        other = members[1].model.state_dict()[name]
        if value.is_floating_point():
            ref = ((value.double() + other.double()) / 2).float()
            torch.testing.assert_close(got[name], ref, rtol=0, atol=0)
        else:
            assert torch.equal(got[name], value)
    assert soup.temperature == pytest.approx(math.sqrt(0.5 * 2.0))
    assert soup.threshold == pytest.approx(0.3)
    assert soup.info["run"] == 7 and soup.info["soup"]["temperatures"] == [0.5, 2.0]
    # the members are left as they were
    assert not torch.equal(members[0].model.classifier.weight, soup.model.classifier.weight)


def test_a_soup_of_copies_is_the_model(tok, tmp_path):
    m = _member(tok, 3, 1.3, 0.25)
    soup = uniform_soup([m, copy.deepcopy(m)])
    np.testing.assert_allclose(soup.predict_proba(TEXTS), m.predict_proba(TEXTS), atol=1e-6)
    back = IntentClassifier.load(soup.save(tmp_path / "soup"))
    np.testing.assert_allclose(back.predict_proba(TEXTS), m.predict_proba(TEXTS), atol=1e-6)
    assert back.info["soup"]["members"] == 2


def test_soup_errors(tok):
    a, b = _member(tok, 0), _member(tok, 1)
    with pytest.raises(ValueError, match="at least two"):
        uniform_soup([a])
    with pytest.raises(ValueError, match="other intents"):
        uniform_soup([a, IntentClassifier(b.model, tok, list(reversed(INTENTS)),
                                          max_length=16)])
    with pytest.raises(ValueError, match="max_length"):
        uniform_soup([a, IntentClassifier(b.model, tok, INTENTS, max_length=32)])
    other_tok = train_tokenizer(["completely different words here"] * 3, kind="wordpiece",
                                vocab_size=120)
    with pytest.raises(ValueError, match="tokenizer"):
        uniform_soup([a, IntentClassifier(b.model, other_tok, INTENTS, max_length=16)])
    wide = EncoderClassifier(preset("tiny", vocab_size=tok.vocab_size, num_labels=len(INTENTS),
                                    d_model=64))
    with pytest.raises(ValueError, match="shape"):
        uniform_soup([a, IntentClassifier(wide, tok, INTENTS, max_length=16)])


def test_soup_command(tok, tmp_path, capsys):
    from headwise.cli import main
    from headwise.intent import evaluate

    dirs = [str(_member(tok, s).save(tmp_path / f"m{s}")) for s in (0, 1)]
    data = tmp_path / "test.csv"
    gold = ["card", "transfer", "refund", "balance", "card", "refund"]
    data.write_text("text,label\n" + "".join(f"{t},{g}\n" for t, g in zip(TEXTS, gold,
                                                                          strict=True)))
    out = tmp_path / "soup"
    assert main(["soup", str(out), *dirs, "--data", str(data), "--json"]) == 0
    scores = json.loads(capsys.readouterr().out)
    soup = IntentClassifier.load(out)
    ref = uniform_soup([IntentClassifier.load(d) for d in dirs])
    np.testing.assert_allclose(soup.logits(TEXTS), ref.logits(TEXTS), atol=1e-6)
    assert scores["soup"]["accuracy"] == pytest.approx(
        evaluate(soup, TEXTS, gold)["accuracy"])
    assert set(scores) == {*dirs, "soup"}
    assert main(["soup", str(tmp_path / "one"), dirs[0]]) == 1
    assert "at least two" in capsys.readouterr().err
    assert main(["soup", dirs[0], *dirs]) == 1
    assert "one of the members" in capsys.readouterr().err


def _scaled_heads(tok, scales: list[float]) -> list[IntentClassifier]:
    """Members sharing one encoder whose heads are ``scale`` times one head: their logits
    are ``scale`` times one member's, so a soup's logits are the mean scale times them."""
    base = _head_variants(tok, 1)[0]
    out = []
    for c in scales:
        m = copy.deepcopy(base)
        with torch.no_grad():
            m.model.classifier.weight.mul_(c)
            m.model.classifier.bias.mul_(c)
        out.append(m)
    return out


def test_greedy_soup_keeps_what_does_not_hurt(tok):
    # heads 1, -3 and 2 times one head h; labels = h's own argmax, so:
    #   alone: scale 1 and 2 are 100 % right, -3 predicts h's argmin (wrong);
    #   tried best first: 1, 2 (soup 1.5 h: same argmax, 100 %: kept), then -3 (soup of
    #   1, 2, -3 is 0 h: all logits equal, argmax intent 0 everywhere: worse, left out)
    members = _scaled_heads(tok, [1.0, -3.0, 2.0])
    predicted = members[0].logits(TEXTS).argmax(1)
    labels = [INTENTS[j] for j in predicted]
    assert any(j != 0 for j in predicted)  # so the zero head is measurably worse
    soup = greedy_soup(members, TEXTS, labels, info={"run": 3})
    g = soup.info["soup"]["greedy"]
    assert g["order"] == [0, 2, 1] and g["kept"] == [0, 2]
    assert g["member_accuracy"][0] == g["member_accuracy"][2] == 1.0
    assert g["member_accuracy"][1] < 1.0 and g["accuracy"] == 1.0
    assert soup.info["run"] == 3 and soup.info["soup"]["members"] == 2
    ref = uniform_soup([members[0], members[2]])
    np.testing.assert_allclose(soup.logits(TEXTS), ref.logits(TEXTS), rtol=0, atol=1e-6)
    np.testing.assert_allclose(soup.logits(TEXTS), 1.5 * members[0].logits(TEXTS),
                               rtol=1e-5, atol=1e-5)


def test_greedy_soup_of_one_kept_member_is_that_member(tok):
    members = _scaled_heads(tok, [1.0, -1.0])
    predicted = members[0].logits(TEXTS).argmax(1)
    assert any(j != 0 for j in predicted)  # the zero head (the soup of both) is worse
    soup = greedy_soup(members, TEXTS, [INTENTS[j] for j in predicted])
    assert soup.info["soup"]["greedy"]["kept"] == [0] and soup.info["soup"]["members"] == 1
    np.testing.assert_allclose(soup.logits(TEXTS), members[0].logits(TEXTS), atol=1e-6)
    assert soup.model is not members[0].model


def test_greedy_soup_errors(tok):
    members = _scaled_heads(tok, [1.0, 2.0])
    with pytest.raises(ValueError, match="at least two"):
        greedy_soup(members[:1], TEXTS, ["card"] * len(TEXTS))
    with pytest.raises(ValueError, match="one label each"):
        greedy_soup(members, TEXTS, ["card"])
    with pytest.raises(ValueError, match="one label each"):
        greedy_soup(members, [], [])
    other = IntentClassifier(members[1].model, members[1].tokenizer, INTENTS[::-1],
                             max_length=members[1].max_length)
    with pytest.raises(ValueError, match="other intents"):  # refused before any scoring
        greedy_soup([members[0], other], TEXTS, ["card"] * len(TEXTS))


def test_greedy_soup_command(tok, tmp_path, capsys):
    from headwise.cli import main

    members = _scaled_heads(tok, [1.0, -3.0, 2.0])
    dirs = [str(m.save(tmp_path / f"m{i}")) for i, m in enumerate(members)]
    labels = [INTENTS[j] for j in members[0].logits(TEXTS).argmax(1)]
    held_out = tmp_path / "valid.csv"
    held_out.write_text("text,label\n" + "".join(f"{t},{y}\n" for t, y in zip(
        TEXTS, labels, strict=True)))
    out = tmp_path / "greedy"
    assert main(["soup", str(out), *dirs, "--greedy", str(held_out), "--data",
                 str(held_out), "--json"]) == 0
    captured = capsys.readouterr()
    assert "greedy soup: 2 of 3 members, 100.00%" in captured.err
    assert f"{dirs[1]}: " in captured.err and "left out" in captured.err
    assert set(json.loads(captured.out)) == {dirs[0], dirs[2], "soup"}
    soup = IntentClassifier.load(out)
    assert soup.info["soup"]["greedy"]["kept"] == [0, 2]
    np.testing.assert_allclose(soup.logits(TEXTS), 1.5 * members[0].logits(TEXTS),
                               rtol=1e-5, atol=1e-5)
