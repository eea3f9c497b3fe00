"""``headwise explain MODEL TEXT [--json]``: the public JSON keys, offsets into the text,
the heads' roles read from a head report, every kind it answers, plain output."""

from __future__ import annotations

import json
import unicodedata

import pytest
import torch

from headwise.cli import main
from headwise.inspect.attribution import explain
from headwise.intent.classifier import IntentClassifier
from headwise.intent.compound.classifier import CompoundClassifier
from headwise.intent.compound.thresholds import Thresholds
from headwise.intent.tfidf import TfidfClassifier
from headwise.intent.training.builders import build_intent_model
from headwise.intent.training.recipe import IntentRecipe
from headwise.models import ModelConfig
from headwise.models.joint import JointIntentSlotModel


def _json(argv, capsys):
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert len(out.strip().splitlines()) == 1  # one JSON object
    return json.loads(out)


def test_json_keys_offsets_and_roles_from_the_report(tiny_clf, small_report, tmp_path,
                                                     demo_examples, capsys):
    analysis, paths = small_report
    tiny_clf.save(tmp_path / "model")
    text = demo_examples[0].text
    out = _json(["explain", str(tmp_path / "model"), text, "--json", "--report",
                 str(paths["json"].parent)], capsys)
    assert {"intents", "tokens", "heads", "completeness"} <= set(out)
    want = explain(IntentClassifier.load(tmp_path / "model"), text)
    assert out["explained_intent"] == want.attributions[0].intent
    assert [t["token"] for t in out["tokens"]] == [t[0] for t in want.tokens]
    for t, score in zip(out["tokens"], want.attributions[0].scores, strict=True):
        assert set(t) == {"token", "start", "end", "special", "attribution"}
        if t["special"]:
            assert t["attribution"] is None and t["start"] is None
        else:
            piece = unicodedata.normalize("NFKC", text[t["start"]:t["end"]])
            assert piece.lower() == t["token"].lower()
            assert t["attribution"] == pytest.approx(score, abs=1e-6)
    c = out["completeness"]
    assert c["within_tolerance"] and c["tolerance"] == 0.01
    assert sum(t["attribution"] or 0 for t in out["tokens"]) == pytest.approx(c["delta"],
                                                                              abs=0.01)
    config = IntentClassifier.load(tmp_path / "model").model.config
    assert len(out["heads"]) == min(5, config.num_layers * config.num_heads)  # the default 5
    for h in out["heads"]:
        assert h["roles"] == [r["role"] for r in analysis["roles"][h["layer"]][h["head"]]]
    assert out["intents"] == tiny_clf.predict([text])[0].to_dict()["intents"]
    assert main(["explain", str(tmp_path / "model"), text]) == 0
    plain = capsys.readouterr().out
    assert plain.startswith("answer: ") and f"why {out['explained_intent']}" in plain
    assert "roles unknown" in plain  # no --report


def test_bilstm_tfidf_and_compound_answer(tiny_clf, demo_examples, tmp_path, capsys):
    recipe = IntentRecipe.from_dict({"architecture": {"type": "bilstm", "lstm_embed_dim": 8,
                                                      "lstm_hidden": 8}})
    torch.manual_seed(0)
    model = build_intent_model(recipe, tiny_clf.tokenizer, tiny_clf.labels)
    IntentClassifier(model, tiny_clf.tokenizer, tiny_clf.labels).save(tmp_path / "bilstm")
    text = demo_examples[1].text
    out = _json(["explain", str(tmp_path / "bilstm"), text, "--json"], capsys)
    assert out["heads"] == [] and out["method"] == "integrated_gradients"
    assert out["completeness"]["within_tolerance"]

    texts = [e.text for e in demo_examples if e.label != "oos"]
    labels = [e.label for e in demo_examples if e.label != "oos"]
    TfidfClassifier.fit(texts, labels).save(tmp_path / "tfidf")
    out = _json(["explain", str(tmp_path / "tfidf"), text, "--json"], capsys)
    assert out["method"] == "feature_weights" and out["heads"] == []
    assert abs(out["completeness"]["error"]) < 1e-9
    assert "".join(t["token"] for t in out["tokens"]) == text.replace(" ", "")

    tok = tiny_clf.tokenizer
    cfg = ModelConfig(vocab_size=tok.vocab_size, d_model=16, num_layers=1, num_heads=2,
                      d_ff=32, num_labels=3, labels=["a", "b", "c"], max_position=64,
                      pad_token_id=tok.pad_token_id, dropout=0.0,
                      model_type="joint_intent_slot", multi_label=True, slot_tags=None)
    torch.manual_seed(1)
    joint = JointIntentSlotModel(cfg).eval()
    CompoundClassifier(joint, tok, ["a", "b", "c"], thresholds=Thresholds(0.0),
                       max_length=48).save(tmp_path / "compound")
    out = _json(["explain", str(tmp_path / "compound"), text, "--json"], capsys)
    assert sorted(e["intent"] for e in out["explained"]) == ["a", "b", "c"]  # all pass 0
    assert [e["intent"] for e in out["explained"]] == [i["intent"] for i in out["intents"]]
    assert all(e["completeness"]["within_tolerance"] for e in out["explained"])
    assert len(out["heads"]) == 2  # every head of the one layer, best first
    out = _json(["explain", str(tmp_path / "compound"), text, "--json", "--intent", "b"],
                capsys)
    assert [e["intent"] for e in out["explained"]] == ["b"]
