"""The compound path of train / eval / predict: detection, output, errors."""

from __future__ import annotations

import json

import pytest

from headwise.cli import main

TINY = {"architecture": {"type": "transformer", "tokenizer": "wordpiece", "vocab_size": 120,
                         "max_length": 24, "d_model": 32, "num_layers": 1, "num_heads": 4,
                         "d_ff": 64, "dropout": 0.0, "attention_dropout": 0.0},
        "train": {"epochs": 20, "batch_size": 8, "lr": 3e-3, "patience": None}}


def _jsonl(path, examples):
    with open(path, "w", encoding="utf-8") as f:
        for e in examples:
            f.write(json.dumps({"text": e.text, "intents": list(e.intents), "slots": [
                {"name": s.name, "start": s.start, "end": s.end, "text": s.text,
                 "value": s.value} for s in e.slots]}) + "\n")
    return path


@pytest.fixture(scope="module")
def trained(tmp_path_factory, compound_corpus):
    d = tmp_path_factory.mktemp("compound-cli")
    data = _jsonl(d / "train.jsonl", compound_corpus)
    (d / "recipe.json").write_text(json.dumps(TINY))
    out = d / "model"
    assert main(["train", "--data", str(data), "--valid", str(data), "--config",
                 str(d / "recipe.json"), "--out", str(out),
                 "--set", "architecture.model_overrides.number_heads=[0]", "--quiet"]) == 0
    return d, out


def test_train_detects_multi_label_and_saves_a_compound_model(trained, capsys):
    d, out = trained
    assert (out / "compound.json").is_file() and not (out / "intent.json").exists()
    summary = json.loads((out / "train_summary.json").read_text())
    assert summary["slot_names"] == ["amount_of_money"]
    assert summary["recipe"]["architecture"]["model_overrides"] == {"number_heads": [0]}
    # --quiet: nothing is announced, so no estimate is measured; the precision is recorded
    assert summary["estimate"] is None and summary["precision"]["precision"] in ("fp32", "bf16")


def test_eval_reports_intents_spans_and_values(trained, capsys):
    d, out = trained
    assert main(["eval", str(out), "--data", str(d / "train.jsonl"), "--out",
                 str(d / "ev")]) == 0
    text = capsys.readouterr().out
    assert "micro-F1" in text and "span F1" in text and "amount_of_money" in text
    report = json.loads((d / "ev" / "report.json").read_text())
    assert report["num_examples"] == 27 and report["values"]["amount_of_money"]["n"] == 24


def test_predict_json_has_intents_and_valued_slots(trained, capsys):
    _, out = trained
    assert main(["predict", str(out), "send 50 pounds to my sister", "--json"]) == 0
    rec = json.loads(capsys.readouterr().out)
    assert [x["intent"] for x in rec["intents"]] == ["transfer"]
    assert rec["slots"] == [{"name": "amount_of_money", "start": 5, "end": 14,
                             "text": "50 pounds", "value": {"amount": 50.0, "currency": "GBP"}}]
    assert main(["predict", str(out), "send 50 pounds to my sister", "--threshold",
                 "1.0", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["out_of_scope"] is True


def test_bad_annotations_exit_1_with_the_line(trained, tmp_path, capsys):
    _, out = trained
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"text": "pay 5 pounds", "intents": ["pay"]}\n'
                   '{"text": "pay 5 pounds", "intents": ["pay"], "slots": [{"name": "amount", '
                   '"start": 4, "end": 40, "text": "5 pounds"}]}\n', encoding="utf-8")
    assert main(["eval", str(out), "--data", str(bad)]) == 1
    assert "bad.jsonl:2" in capsys.readouterr().err
    assert main(["train", "--data", str(bad), "--out", str(tmp_path / "m"),
                 "--multi-label", "--skip-bad-rows", "--quiet"]) == 1
    assert "two intents" in capsys.readouterr().err


def test_predict_reference_date_reaches_the_slot_values(trained, tmp_path, capsys,
                                                         monkeypatch):
    from datetime import date

    from headwise.intent.compound.classifier import CompoundClassifier

    _, out = trained
    seen = []
    real = CompoundClassifier.resolve_slots.__func__
    monkeypatch.setattr(CompoundClassifier, "resolve_slots", classmethod(
        lambda cls, spans, reference: seen.append(reference) or real(cls, spans, reference)))
    assert main(["predict", str(out), "send 50 pounds", "--reference-date", "2026-12-01",
                 "--json"]) == 0
    assert seen[-1] == date(2026, 12, 1)
    data = tmp_path / "texts.txt"
    data.write_text("send 50 pounds\n", encoding="utf-8")
    assert main(["predict", str(out), "--data", str(data), "--out", str(tmp_path / "o.jsonl"),
                 "--reference-date", "2027-03-04", "--quiet"]) == 0
    assert seen[-1] == date(2027, 3, 4)
    capsys.readouterr()
    with pytest.raises(SystemExit):
        main(["predict", str(out), "x", "--reference-date", "2026-13-01"])
    assert "not a date YYYY-MM-DD" in capsys.readouterr().err


def test_train_keeps_the_datas_reference_date_and_eval_takes_one(tmp_path, compound_corpus,
                                                                 capsys, monkeypatch):
    from datetime import date

    from headwise.intent.compound.classifier import CompoundClassifier

    data = tmp_path / "train.jsonl"
    with open(data, "w", encoding="utf-8") as f:
        for e in compound_corpus:
            f.write(json.dumps({"text": e.text, "intents": list(e.intents),
                                "reference_date": "2026-01-15"}) + "\n")
    (tmp_path / "recipe.json").write_text(json.dumps(
        {**TINY, "train": {**TINY["train"], "epochs": 1}}))
    out = tmp_path / "model"
    assert main(["train", "--data", str(data), "--valid", str(data), "--config",
                 str(tmp_path / "recipe.json"), "--out", str(out), "--quiet"]) == 0
    meta = json.loads((out / "compound.json").read_text())
    assert meta["reference_date"] == "2026-01-15"
    assert CompoundClassifier.load(out).reference_date == date(2026, 1, 15)
    seen = []
    real = CompoundClassifier.resolve_slots.__func__
    monkeypatch.setattr(CompoundClassifier, "resolve_slots", classmethod(
        lambda cls, spans, reference: seen.append(reference) or real(cls, spans, reference)))
    assert main(["eval", str(out), "--data", str(data), "--out", str(tmp_path / "a")]) == 0
    assert set(seen) == {date(2026, 1, 15)}
    seen.clear()
    assert main(["eval", str(out), "--data", str(data), "--out", str(tmp_path / "b"),
                 "--reference-date", "2027-03-04"]) == 0
    assert set(seen) == {date(2027, 3, 4)}
    capsys.readouterr()
    with pytest.raises(SystemExit):
        main(["eval", str(out), "--data", str(data), "--reference-date", "2026-13-01"])
    assert "not a date YYYY-MM-DD" in capsys.readouterr().err


@pytest.mark.parametrize("model", ["bilstm", "transformer", "pretrained"])
def test_train_multi_label_builds_each_architecture(model, compound_corpus, tmp_path, capsys):
    """``headwise train --model bilstm|transformer|pretrained:NAME --multi-label`` trains a
    compound model of that architecture, which ``predict --json`` answers with."""
    from hf_checkpoints import chinese_bert

    from headwise.intent.kinds import load_classifier

    data = _jsonl(tmp_path / "train.jsonl", compound_corpus)
    spec = f"pretrained:{chinese_bert(tmp_path / 'bert')}" if model == "pretrained" else model
    out = tmp_path / "model"
    assert main(["train", "--data", str(data), "--model", spec, "--multi-label", "--out",
                 str(out), "--epochs", "1", "--quiet"]) == 0
    assert (out / "compound.json").is_file()
    clf = load_classifier(out)
    assert clf.model.multi_label and clf.intents == ["charge", "refund", "transfer"]
    assert type(clf.model).__name__ == ("BiLSTMJointModel" if model == "bilstm"
                                        else "JointIntentSlotModel")
    summary = json.loads((out / "train_summary.json").read_text())
    assert summary["recipe"]["architecture"]["type"] == model
    assert summary["recipe"]["task"]["type"] == "multi_label"
    # LP-FT is a pretrained encoder's default in this task too, recorded as used
    assert summary["recipe"]["levers"]["linear_probe"] is (model == "pretrained")
    assert (clf.info["linear_probe"] is not None) is (model == "pretrained")
    if model == "pretrained":  # --epochs given, the learning rate left to the default
        from headwise.intent.training.defaults import MULTI_LABEL_PRETRAINED

        assert summary["recipe"]["train"]["lr"] == MULTI_LABEL_PRETRAINED.lr
        assert summary["recipe"]["train"]["epochs"] == 1
    capsys.readouterr()
    assert main(["predict", str(out), "send 50 pounds to my sister", "--json"]) == 0
    answer = json.loads(capsys.readouterr().out)
    assert {"intents", "out_of_scope", "slots"} <= set(answer)
    assert all(set(x) >= {"intent", "confidence"} for x in answer["intents"])


def test_train_blends_a_compound_model_with_tfidf_and_says_so(tmp_path, compound_corpus, capsys):
    """`--set levers.blend=tfidf` on multi-label data: a one-epoch network, which the
    TF-IDF model beats on the validation rows, is saved blended, and the choice is printed
    and summarised."""
    data = _jsonl(tmp_path / "train.jsonl", compound_corpus)
    recipe = {**TINY, "train": {**TINY["train"], "epochs": 1}}
    (tmp_path / "recipe.json").write_text(json.dumps(recipe))
    out = tmp_path / "model"
    assert main(["train", "--data", str(data), "--valid", str(data), "--config",
                 str(tmp_path / "recipe.json"), "--out", str(out), "--set",
                 "levers.blend=tfidf", "--quiet"]) == 0
    printed = capsys.readouterr().out
    summary = json.loads((out / "train_summary.json").read_text())
    assert summary["blend"]["weight"] > 0 and summary["blend"]["metric"] == "exact_match"
    assert f"blend: TF-IDF share {summary['blend']['weight']:g} chosen on" in printed
    assert main(["predict", str(out), "refund the 65 pounds please", "--json"]) == 0
    rec = json.loads(capsys.readouterr().out)
    assert "refund" in {i["intent"] for i in rec["intents"]}
