"""Soups of compound (multi-label + slots) models: the joint networks' weights averaged,
refused with the reason for members that cannot be averaged, the greedy soup ordered and
accepted on the exact match of annotated held-out rows with its thresholds tuned there."""

from __future__ import annotations

import copy
import json

import numpy as np
import pytest
import torch
from tiny_corpus import write_annotated

from headwise.cli import main
from headwise.intent.compound.classifier import CompoundClassifier
from headwise.intent.compound.thresholds import Thresholds, tune_thresholds
from headwise.intent.soup import greedy_soup, uniform_soup
from headwise.intent.training.pipeline import train_intent_classifier
from headwise.intent.training.recipe import IntentRecipe
from headwise.intent.training.warm_start import WarmStart, warm_recipe


@pytest.fixture(scope="module")
def finetuned(trained_compound_dir, compound_corpus, tmp_path_factory):
    """Two runs fine-tuned from one start (the session's trained compound model), with
    other seeds (another batch order): their weights differ, their basin is one."""
    root = tmp_path_factory.mktemp("compound-soup")
    dirs = []
    for seed in (1, 2):
        recipe = IntentRecipe.from_dict(warm_recipe(trained_compound_dir, {
            "train": {"epochs": 2, "seed": seed, "lr": 1e-3}}))
        out = root / f"run{seed}"
        train_intent_classifier(compound_corpus, compound_corpus, recipe, out_dir=out,
                                init_from=WarmStart(trained_compound_dir))
        dirs.append(out)
    return root, dirs


def test_a_compound_soup_is_the_hand_averaged_weights(finetuned, compound_corpus, tmp_path):
    _, dirs = finetuned
    a, b = (CompoundClassifier.load(d) for d in dirs)
    a.thresholds = Thresholds(0.4, [0.3, 0.5, 0.7])
    soup = uniform_soup([a, b], info={"run": 1})
    assert isinstance(soup, CompoundClassifier)
    sa, sb, got = a.model.state_dict(), b.model.state_dict(), soup.model.state_dict()
    moved = 0
    for name, value in sa.items():
        if value.is_floating_point():
            ref = ((value.double() + sb[name].double()) / 2).to(value.dtype)
            torch.testing.assert_close(got[name], ref, rtol=0, atol=0)
            moved += not torch.equal(value, sb[name])
        else:
            assert torch.equal(got[name], value)
    assert moved > 10  # the runs did move apart: the mean is not either member
    assert soup.intents == a.intents and soup.slot_tags == a.slot_tags
    assert soup.max_length == a.max_length and soup.info["run"] == 1
    # thresholds: the mean, per intent since one member has per-intent ones
    tb = b.thresholds.threshold
    assert soup.thresholds.threshold == pytest.approx((0.4 + tb) / 2)
    np.testing.assert_allclose(soup.thresholds.per_intent,
                               (np.array([0.3, 0.5, 0.7]) + tb) / 2)
    # one model answering compound questions with slots, saved and loaded as a compound one
    back = CompoundClassifier.load(soup.save(tmp_path / "soup"))
    texts = [e.text for e in compound_corpus]
    np.testing.assert_allclose(back.analyse(texts)[0], soup.analyse(texts)[0], atol=1e-6)
    answer = back.predict(["i was charged twice for 50 pounds refund it"])[0]
    assert {k for k, _ in answer.intents} == {"charge", "refund"}
    assert [s.text for s in answer.slots] == ["50 pounds"]


def test_a_mismatched_pair_is_refused_with_the_reason(finetuned, compound_corpus):
    from headwise.intent.classifier import IntentClassifier
    from headwise.models import EncoderClassifier, preset

    _, dirs = finetuned
    a, b = (CompoundClassifier.load(d) for d in dirs)
    swapped = CompoundClassifier(copy.deepcopy(b.model), b.tokenizer, b.intents[::-1],
                                 max_length=b.max_length)
    with pytest.raises(ValueError, match="other intents"):
        uniform_soup([a, swapped])
    untagged = copy.deepcopy(b)
    untagged.model.config = untagged.model.config.replace(
        slot_tags=["O", "B-amount", "I-amount"])
    with pytest.raises(ValueError, match="other slot tags"):
        uniform_soup([a, untagged])
    with pytest.raises(ValueError, match="max_length"):
        uniform_soup([a, CompoundClassifier(copy.deepcopy(b.model), b.tokenizer, b.intents,
                                            max_length=b.max_length + 8)])
    wide = IntentRecipe.from_dict({"architecture": {
        "type": "transformer", "tokenizer": "wordpiece", "vocab_size": 120, "max_length": 24,
        "d_model": 48, "num_layers": 1, "num_heads": 4, "d_ff": 64,
        "model_overrides": {"number_heads": [0]}}, "task": {
        "type": "multi_label"}})
    from headwise.intent.training.compound import compound_network

    net, _, _ = compound_network(wide, [e.text for e in compound_corpus], a.intents,
                              a.slot_tags)
    with pytest.raises(ValueError, match="shape"):  # another architecture, same tokenizer
        uniform_soup([a, CompoundClassifier(net, a.tokenizer, a.intents, max_length=24)])
    single = IntentClassifier(EncoderClassifier(preset(
        "tiny", vocab_size=a.tokenizer.vocab_size, num_labels=len(a.intents))), a.tokenizer,
        a.intents, max_length=a.max_length)
    with pytest.raises(ValueError, match="member 1 is a single-label classifier, member 0 a "
                                         "compound classifier"):
        uniform_soup([a, single])


def _scaled(clf: CompoundClassifier, scale: float) -> CompoundClassifier:
    """``clf`` with its intent head times ``scale`` (a negative one flips every answer)."""
    out = copy.deepcopy(clf)
    with torch.no_grad():
        out.model.classifier.weight.mul_(scale)
        out.model.classifier.bias.mul_(scale)
    return out


def _exact_match(clf: CompoundClassifier, examples) -> tuple[float, Thresholds]:
    """Exact match on ``examples`` with one threshold tuned there, by hand."""
    probs = clf.analyse([e.text for e in examples])[0]
    gold = np.array([[name in e.intents for name in clf.intents] for e in examples])
    th = tune_thresholds(probs, gold)
    return float(((probs >= th.threshold) == gold).all(axis=1).mean()), th


def test_greedy_compound_soup_is_chosen_on_exact_match(finetuned, compound_corpus):
    _, dirs = finetuned
    a, b = (CompoundClassifier.load(d) for d in dirs)
    bad = _scaled(a, -4.0)  # its sigmoids are reversed: no threshold makes it right
    texts = [e.text for e in compound_corpus]
    labels = [list(e.intents) for e in compound_corpus]
    soup = greedy_soup([bad, a, b], texts, labels, info={"run": 2})
    g = soup.info["soup"]["greedy"]
    alone = [_exact_match(m, compound_corpus)[0] for m in (bad, a, b)]
    assert g["member_exact_match"] == pytest.approx(alone)
    assert alone[1] >= 0.8 and alone[2] >= 0.8 and alone[0] < 0.5
    best = 1 if alone[1] >= alone[2] else 2
    other = 3 - best
    assert g["order"] == [best, other, 0]
    both, both_th = _exact_match(uniform_soup([a, b]), compound_corpus)
    # the second run is kept when the soup with it matches as many rows exactly; the
    # reversed run never is (the mean of heads 1, 1 and -4 is reversed too)
    kept = [best, other] if both >= alone[best] else [best]
    assert g["kept"] == kept and 0 not in g["kept"]
    assert g["exact_match"] == pytest.approx(max(both, alone[best]))
    assert soup.info["run"] == 2 and soup.info["soup"]["members"] == len(kept)
    ref = uniform_soup([a, b]) if len(kept) == 2 else (a, b)[best - 1]
    probs = ref.analyse(texts)[0]
    np.testing.assert_allclose(soup.analyse(texts)[0], probs, atol=1e-6)
    # the soup's thresholds are the ones tuned for it on the held-out rows
    assert soup.thresholds == (both_th if len(kept) == 2 else
                               _exact_match(ref, compound_corpus)[1])
    with pytest.raises(ValueError, match="set of intents"):
        greedy_soup([a, b], texts, [e.intents[0] if e.intents else "" for e in
                                    compound_corpus])


def test_soup_command_on_compound_models(finetuned, compound_corpus, capsys):
    root, dirs = finetuned
    held_out = write_annotated(root / "held_out.jsonl", compound_corpus)
    bad = _scaled(CompoundClassifier.load(dirs[0]), -4.0).save(root / "bad")
    out = root / "greedy"
    assert main(["soup", str(out), str(bad), *map(str, dirs), "--greedy", str(held_out),
                 "--data", str(held_out), "--json"]) == 0
    captured = capsys.readouterr()
    soup = CompoundClassifier.load(out)
    g = soup.info["soup"]["greedy"]
    assert 0 not in g["kept"]
    assert f"greedy soup: {len(g['kept'])} of 3 members, {100 * g['exact_match']:.2f}% exact " \
           f"match" in captured.err
    assert f"{bad}: " in captured.err and "left out" in captured.err
    scores = json.loads(captured.out)
    assert set(scores) == {*(str(dirs[i - 1]) for i in g["kept"]), "soup"}
    assert set(scores["soup"]) == {"exact_match", "micro_f1"}
    assert scores["soup"]["exact_match"] >= max(s["exact_match"] for s in scores.values()) \
        - 1 / len(compound_corpus)  # its thresholds are tuned on these rows, as theirs were
    assert main(["soup", str(root / "uniform"), *map(str, dirs)]) == 0
    assert CompoundClassifier.load(root / "uniform").info["soup"]["members"] == 2
    # a compound model beside a single-label one: refused in words, no traceback
    single = root / "single"
    from tiny_corpus import INTENTS

    rows = [(t, y) for y, ts in INTENTS.items() for t in ts]
    train_intent_classifier(rows, rows, IntentRecipe.from_dict({
        "architecture": {"d_model": 16, "num_layers": 1, "num_heads": 2, "d_ff": 32,
                         "max_length": 16}, "train": {"epochs": 1, "progress": False}}),
        out_dir=single)
    capsys.readouterr()
    assert main(["soup", str(root / "mixed"), str(dirs[0]), str(single)]) == 1
    err = capsys.readouterr().err
    assert "a soup averages networks of one kind" in err and "is an intent classifier" in err
